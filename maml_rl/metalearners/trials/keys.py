"""The configuration keys of on-policy learning over trials, whatever the policy (:class:`~.learner.TrialPPO`);
a trial learner's own keys (its policy's sizes) are declared beside it. Defaults follow metaworld-algorithms' RL²
(docs/training.md, "RL²", lists where this package departs from it)."""

from __future__ import annotations

from maml_rl.config.hyperparameters import (
    BOOLEAN,
    POSITIVE_INT,
    SHARED_KEYS,
    Hyperparameter,
    choice,
    defaults_of,
    integer,
    number,
    optional,
)

__all__ = ["CHUNK_KEYS", "DEFAULTS", "trial_keys"]

EPISODES_PER_TRIAL = Hyperparameter("episodes-per-trial", int, 10, POSITIVE_INT,
                                    "Episodes of one task per trial; the policy's state is kept across them.",
                                    argument="episodes_per_trial")

#: The PPO keys every trial learner has, after ``episodes-per-trial``.
_PPO_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("reward-scale", float, 1.0, number(0.0),
                   "Factor of the previous reward in the policy's input (Meta-World: 0.1).",
                   argument="reward_scale"),
    Hyperparameter("ppo-epochs", int, 10, POSITIVE_INT, "Passes over the iteration's trials.", argument="epochs"),
    Hyperparameter("ppo-minibatches", int, 1, POSITIVE_INT, "Minibatches of whole trials per epoch.",
                   argument="minibatches"),
    Hyperparameter("clip", float, 0.2, number(0.0, open_low=True), "PPO's ratio clip.", argument="clip"),
    Hyperparameter("lr", float, 5.0e-4, number(0.0, open_low=True), "Adam's learning rate.", argument="lr"),
    Hyperparameter("entropy-coef", float, 5.0e-3, number(0.0), "Weight of the entropy bonus.",
                   argument="entropy_coef"),
    Hyperparameter("max-grad-norm", float, 1.0, number(0.0, open_low=True), "Gradient-norm clip of each update.",
                   argument="max_grad_norm"),
)

#: Truncated BPTT, for a policy whose state is recorded (a GRU's): the update runs chunks of the trial.
CHUNK_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("bptt-chunk", int, 250, POSITIVE_INT,
                   "Truncated BPTT: gradients flow through the state for at most this many steps.",
                   argument="bptt_chunk"),
    Hyperparameter("normalize-advantages", bool, True, BOOLEAN,
                   "Centre and scale the advantages of each task's trials.", argument="normalize_advantages"),
    Hyperparameter("update-per-chunk", bool, False, BOOLEAN,
                   "Take an Adam step per BPTT chunk of each minibatch, in the trial's order, the state carried "
                   "from the chunk before (metaworld-algorithms' scheme: ~20 steps per epoch on 5,000-step "
                   "trials); false: one step per minibatch of whole trials.", argument="update_per_chunk"),
    Hyperparameter("bptt-overlap", int, 0, integer(0),
                   "With update-per-chunk: steps each chunk shares with the next (chunks start every bptt-chunk "
                   "minus this many steps; the state entering a chunk is the one the chunk before reached "
                   "there); metaworld-algorithms: 50.", argument="bptt_overlap"),
)

#: The keys after the policy's own.
_INPUT_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("trial-inputs", str, "rl2", choice("rl2", "rl2-autoreset"),
                   "What the policy sees after an episode's end: \"rl2\", the previous action, scaled reward and a "
                   "done flag of 1; \"rl2-autoreset\", zeros for the three, as Meta-World's autoreset shows them "
                   "to metaworld-algorithms' RL².", argument="trial_inputs"),
    Hyperparameter("baseline-inputs", str, "observations", choice("observations", "policy-inputs"),
                   "The linear baseline's features: the observations, or the policy's whole input (observation, "
                   "previous action, scaled reward and done flag), as metaworld-algorithms.",
                   argument="baseline_inputs"),
    Hyperparameter("critic", str, "linear", choice("linear", "gru"),
                   "The advantages' value function: \"linear\", the linear baseline refitted on each task's trials; "
                   "\"gru\", a GRU over the trial so far, trained across iterations on the GAE returns (it can "
                   "value what the trial has found).", argument="critic"),
    Hyperparameter("critic-size", int, 128, POSITIVE_INT, "With critic: \"gru\", its embedding's and GRU's width.",
                   argument="critic_size"),
    Hyperparameter("critic-lr", float, 1.0e-3, number(0.0, open_low=True),
                   "With critic: \"gru\", its Adam learning rate (one step per minibatch).", argument="critic_lr"),
    Hyperparameter("target-kl", float, None, optional(number(0.0, open_low=True)),
                   "Stop the iteration's PPO updates once an update's approximate KL exceeds 1.5 times this "
                   "(metaworld-algorithms' target_kl); null: never stop early.", argument="target_kl"),
)

NORMALIZE_ADVANTAGES = CHUNK_KEYS[1]

def trial_keys(policy_keys: tuple[Hyperparameter, ...] = (), *, chunks: bool = False,
               after_chunks: tuple[Hyperparameter, ...] = ()) -> tuple[Hyperparameter, ...]:
    """A trial learner's keys: ``episodes-per-trial``, ``policy_keys``, PPO's, with ``chunks`` truncated BPTT's
    (else ``normalize-advantages`` alone), ``after_chunks``, then the inputs' and ``target-kl``."""
    middle = CHUNK_KEYS if chunks else (NORMALIZE_ADVANTAGES,)
    return (EPISODES_PER_TRIAL, *policy_keys, *_PPO_KEYS, *middle, *after_chunks, *_INPUT_KEYS)


#: The defaults of every key a trial learner may have, and the shared ones.
DEFAULTS = defaults_of(SHARED_KEYS, trial_keys(chunks=True), name="TrialDefaults", module=__name__)
