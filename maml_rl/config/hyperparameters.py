"""Every configuration key, declared once: its type, default, check and help.

A :class:`Hyperparameter` is the single declaration of one key. Everything
else is derived from the declarations below:

* :mod:`maml_rl.config.loading` validates files with them (and renders the key
  reference of ``docs/training.md`` from them);
* :data:`DEFAULTS` holds every default by attribute name (``fast-lr`` ->
  ``DEFAULTS.fast_lr``): the Python API (:class:`~maml_rl.metalearners.MAMLTRPO`,
  :class:`~maml_rl.metalearners.gradient.adaptation.InnerLoop`, the sampler) takes its defaults
  from it, so a key left out means the same in a config file and in a call;
* a meta-learner's ``from_config`` passes each key with an ``argument`` to
  that keyword of its constructor.

Keys are grouped into :data:`SHARED_KEYS`, used by every algorithm, and one
section per algorithm in :data:`ALGORITHM_KEYS`; a configuration may only
hold the shared keys and those of its ``algorithm`` (:mod:`maml_rl.config.loading`
checks that ``algorithm`` names a registered meta-learner). Imports nothing
of maml_rl's but the key declaration (:mod:`.declaration`), and the policies when checking a ``nonlinearity``: the
episodes, the sampler and the meta-learners read :data:`DEFAULTS` from here.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from typing import Any, Mapping

from maml_rl.config.declaration import (  # noqa: F401  (the checks are part of this module's API)
    BOOLEAN,
    POSITIVE_INT,
    REQUIRED,
    Check,
    Hyperparameter,
    InvalidValue,
    _env_kwargs,
    _hidden_sizes,
    _name,
    _nonlinearity,
    _seed,
    choice,
    integer,
    number,
    optional,
)

__all__ = [
    "ALGORITHM_KEYS",
    "DEFAULTS",
    "REQUIRED",
    "SHARED_KEYS",
    "Check",
    "Hyperparameter",
    "Hyperparameters",
    "InvalidValue",
    "MAML_TRPO_KEYS",
    "PROMP_KEYS",
    "PEARL_KEYS",
    "RL2_PPO_KEYS",
    "choice",
    "integer",
    "number",
    "optional",
]


# -------------------------------------------------------------- declarations
#: The keys of every algorithm, in the order a resolved configuration lists them.
SHARED_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("algorithm", str, "maml-trpo", Check(_name, "a meta-learner name"),
                   "The meta-learner; its own keys are listed in its section below."),
    Hyperparameter("env-name", str, REQUIRED, Check(_name, "a registered environment id (string)"),
                   "Environment id, e.g. 2DNavigation-v0 or HalfCheetahVel-v5."),
    Hyperparameter("env-kwargs", dict, {}, Check(_env_kwargs, "a mapping of keyword arguments for gymnasium.make"),
                   "Keyword arguments of gymnasium.make (max_episode_steps, task ranges, ...)."),
    Hyperparameter("gamma", float, 0.95, number(0.0, 1.0),
                   "Discount factor of returns and advantages; left out, the same default as the Python API "
                   "(every shipped config gives it)."),
    Hyperparameter("gae-lambda", float, 1.0, number(0.0, 1.0),
                   "GAE lambda; 1 gives Monte-Carlo returns minus the baseline.", argument="gae_lambda"),
    Hyperparameter("hidden-sizes", list, REQUIRED, Check(_hidden_sizes, "a list of integers >= 1, e.g. [64, 64]"),
                   "Widths of the policy's hidden layers."),
    Hyperparameter("nonlinearity", str, REQUIRED, Check(_nonlinearity, "an activation name such as tanh or relu"),
                   "Activation of the policy's hidden layers."),
    Hyperparameter("fast-batch-size", int, REQUIRED, POSITIVE_INT,
                   "Episodes per task before each inner step and after the last one."),
    Hyperparameter("num-steps", int, 1, POSITIVE_INT, "Inner (adaptation) gradient steps per task.",
                   argument="num_steps"),
    Hyperparameter("fast-lr", float, 0.5, number(0.0, open_low=True),
                   "Step size of the inner gradient steps; left out, the same default as the Python API "
                   "(every shipped config gives it).", argument="fast_lr"),
    Hyperparameter("num-batches", int, REQUIRED, POSITIVE_INT, "Meta-updates (outer iterations) of the run."),
    Hyperparameter("meta-batch-size", int, REQUIRED, POSITIVE_INT, "Tasks per meta-update."),
    Hyperparameter("loss-averaging", str, "step", choice("step", "episode"),
                   'How a task\'s losses weigh its steps: "step" (each valid step alike) or "episode" '
                   "(mean of per-episode means, as pytorch-maml-rl).", argument="averaging"),
    Hyperparameter("seed", int, None, Check(_seed, "null or an integer in [0, 2**63)"),
                   "Seed of the run; null draws one (recorded in config.json)."),
)

#: The keys of MAML with a TRPO meta-update (:class:`~maml_rl.metalearners.MAMLTRPO`).
MAML_TRPO_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("first-order", bool, False, BOOLEAN,
                   "Ignore the second derivatives through the inner steps (first-order MAML).",
                   argument="first_order"),
    Hyperparameter("max-kl", float, 1.0e-2, number(0.0, open_low=True),
                   "Trust-region radius on the mean KL divergence.", argument="max_kl"),
    Hyperparameter("cg-iters", int, 10, POSITIVE_INT,
                   "Conjugate-gradient iterations for the natural-gradient direction.", argument="cg_iters"),
    Hyperparameter("cg-damping", float, 1.0e-5, number(0.0),
                   "Multiple of the identity added to the KL Hessian.", argument="cg_damping"),
    Hyperparameter("ls-max-steps", int, 15, POSITIVE_INT,
                   "Most backtracking line-search trials.", argument="ls_max_steps"),
    Hyperparameter("ls-backtrack-ratio", float, 0.8, number(0.0, 1.0, open_low=True, open_high=True),
                   "Step shrink factor between line-search trials.", argument="ls_backtrack_ratio"),
)

#: The keys of RL² with a PPO update (:class:`~maml_rl.metalearners.RL2PPO`). Defaults follow
#: metaworld-algorithms' RL² (docs/training.md, "RL²", lists where this package departs from it).
RL2_PPO_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("episodes-per-trial", int, 10, POSITIVE_INT,
                   "Episodes of one task per trial; the policy's state is kept across them.",
                   argument="episodes_per_trial"),
    Hyperparameter("gru-size", int, 256, POSITIVE_INT, "Width of the policy's GRU (after the hidden-sizes encoder)."),
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
    Hyperparameter("action-head", str, "linear", choice("linear", "tanh"),
                   "The GRU policy's Gaussian head: \"linear\", a linear mean and a learned state-independent "
                   "log-std; \"tanh\", metaworld-algorithms' head, mean and log-std both network outputs "
                   "passed through tanh."),
    Hyperparameter("gru-init", str, "pytorch", choice("pytorch", "xavier"),
                   "The GRU's initial weights: \"pytorch\", the recurrent weights orthogonal as one matrix, the "
                   "input weights and biases PyTorch's; \"xavier\", metaworld-algorithms', per gate Xavier-uniform "
                   "input and orthogonal recurrent weights, zero biases."),
    Hyperparameter("trial-inputs", str, "rl2", choice("rl2", "rl2-autoreset"),
                   "What the policy sees after an episode's end: \"rl2\", the previous action, scaled reward and a "
                   "done flag of 1; \"rl2-autoreset\", zeros for the three, as Meta-World's autoreset shows them "
                   "to metaworld-algorithms' RL².", argument="trial_inputs"),
    Hyperparameter("baseline-inputs", str, "observations", choice("observations", "policy-inputs"),
                   "The linear baseline's features: the observations, or the policy's whole input (observation, "
                   "previous action, scaled reward and done flag), as metaworld-algorithms.",
                   argument="baseline_inputs"),
    Hyperparameter("target-kl", float, None, optional(number(0.0, open_low=True)),
                   "Stop the iteration's PPO updates once an update's approximate KL exceeds 1.5 times this "
                   "(metaworld-algorithms' target_kl); null: never stop early.", argument="target_kl"),
)

#: The keys of ProMP (:class:`~maml_rl.metalearners.ProMP`): the LVC inner step, then several Adam
#: steps on the clipped post-adaptation objective with a KL penalty on the pre-adaptation policy.
#: Defaults are ProMP's published settings (its HalfCheetahRandDirec run script).
PROMP_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("outer-steps", int, 5, POSITIVE_INT,
                   "Adam steps on each iteration's episodes (ProMP's num_promp_steps).", argument="outer_steps"),
    Hyperparameter("outer-lr", float, 1.0e-3, number(0.0, open_low=True),
                   "Adam's learning rate of the meta-update.", argument="outer_lr"),
    Hyperparameter("outer-clip", float, 0.3, number(0.0, open_low=True),
                   "Clip of the post-adaptation likelihood ratio.", argument="outer_clip"),
    Hyperparameter("inner-kl-coef", float, 5.0e-4, number(0.0),
                   "Initial weight of the KL penalty between the sampling and the current pre-adaptation policy, "
                   "per inner step.", argument="inner_kl_coef"),
    Hyperparameter("inner-kl-target", float, 1.0e-2, number(0.0, open_low=True),
                   "With adaptive-inner-kl: the KL the coefficient steers to (halved below target / 1.5, "
                   "doubled above target * 1.5).", argument="inner_kl_target"),
    Hyperparameter("adaptive-inner-kl", bool, False, BOOLEAN,
                   "Adapt the KL coefficient after each iteration (ProMP's HalfCheetah runs keep it fixed).",
                   argument="adaptive_inner_kl"),
    Hyperparameter("outer-kl-limit", float, None, optional(number(0.0, open_low=True)),
                   "Most mean KL of the adapted policies from those that sampled: an Adam step that exceeds it is "
                   "undone and ends the iteration's steps (null: no limit, as ProMP).", argument="outer_kl_limit"),
    Hyperparameter("outer-kl-backtracks", int, 0, integer(0),
                   "With outer-kl-limit: halve an Adam step that exceeds the limit up to this many times and keep "
                   "the first within it, with Adam's moments (0: undo the step and its moments).",
                   argument="outer_kl_backtracks"),
)

#: The keys of PEARL (:class:`~maml_rl.metalearners.PEARL`). Defaults are oyster's (katerakelly/oyster
#: 44e20fd, configs/default.py); docs/training.md, "PEARL", lists where this package departs from it.
PEARL_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("latent-size", int, 5, POSITIVE_INT, "Size of the task latent z."),
    Hyperparameter("context-hidden-sizes", list, [200, 200, 200],
                   Check(_hidden_sizes, "a list of integers >= 1, e.g. [200, 200, 200]"),
                   "Widths of the context encoder's hidden layers."),
    Hyperparameter("num-train-tasks", int, 100, POSITIVE_INT,
                   "Training tasks, drawn once from the run seed; every iteration collects meta-batch-size of them "
                   "and trains on all.", argument="num_train_tasks"),
    Hyperparameter("num-initial-steps", int, 2000, integer(0),
                   "Transitions collected for every training task before training, with z from the prior.",
                   argument="num_initial_steps"),
    Hyperparameter("num-steps-prior", int, 400, integer(0),
                   "Transitions collected per sampled task and iteration with z from the prior (both replays).",
                   argument="num_steps_prior"),
    Hyperparameter("num-steps-posterior", int, 0, integer(0),
                   "Transitions collected per sampled task and iteration with z from the posterior (both replays).",
                   argument="num_steps_posterior"),
    Hyperparameter("num-extra-rl-steps-posterior", int, 400, integer(0),
                   "Transitions collected per sampled task and iteration with z from the posterior, for the "
                   "actor-critic's replay only.", argument="num_extra_rl_steps_posterior"),
    Hyperparameter("num-train-steps-per-itr", int, 2000, POSITIVE_INT, "Gradient steps per iteration.",
                   argument="num_train_steps"),
    Hyperparameter("tasks-per-update", int, 16, POSITIVE_INT,
                   "Training tasks in each gradient step (oyster's meta_batch), drawn with replacement.",
                   argument="tasks_per_update"),
    Hyperparameter("sac-batch-size", int, 256, POSITIVE_INT, "Transitions per task in each actor-critic batch.",
                   argument="sac_batch_size"),
    Hyperparameter("embedding-batch-size", int, 64, POSITIVE_INT,
                   "Transitions per task in each context batch.", argument="embedding_batch_size"),
    Hyperparameter("replay-capacity", int, 1_000_000, POSITIVE_INT,
                   "Most transitions each training task's replay keeps (the oldest go first).",
                   argument="replay_capacity"),
    Hyperparameter("policy-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the actor.",
                   argument="policy_lr"),
    Hyperparameter("qf-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the two Q networks.",
                   argument="qf_lr"),
    Hyperparameter("vf-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the value network.",
                   argument="vf_lr"),
    Hyperparameter("context-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the encoder.",
                   argument="context_lr"),
    Hyperparameter("kl-lambda", float, 0.1, number(0.0), "Weight of the KL of q(z|c) to the prior.",
                   argument="kl_lambda"),
    Hyperparameter("sac-reward-scale", float, 5.0, number(0.0, open_low=True),
                   "Factor of the rewards in the Bellman targets (the entropy's weight is its inverse).",
                   argument="sac_reward_scale"),
    Hyperparameter("soft-target-tau", float, 0.005, number(0.0, 1.0, open_low=True),
                   "Polyak step of the target value network.", argument="soft_target_tau"),
    Hyperparameter("policy-mean-reg", float, 1.0e-3, number(0.0), "Weight of the actor's mean^2 penalty.",
                   argument="policy_mean_reg"),
    Hyperparameter("policy-std-reg", float, 1.0e-3, number(0.0), "Weight of the actor's log-std^2 penalty.",
                   argument="policy_std_reg"),
    Hyperparameter("use-information-bottleneck", bool, True, BOOLEAN,
                   "A probabilistic z (product of Gaussians, KL to the prior); false: a deterministic one.",
                   ),
    Hyperparameter("use-next-obs-in-context", bool, False, BOOLEAN,
                   "Context transitions carry the next observation (for tasks that differ in dynamics).",
                   ),
    Hyperparameter("num-exp-traj-eval", int, 1, POSITIVE_INT,
                   "Evaluation: trajectories collected before z comes from the posterior of what they saw.",
                   argument="num_exp_traj_eval"),
    Hyperparameter("eval-trajectories", int, 3, POSITIVE_INT,
                   "Evaluation: trajectories per task, the posterior updated after each (oyster: "
                   "num_steps_per_eval / max_path_length).", argument="eval_trajectories"),
)

#: Each algorithm's own keys, by its ``algorithm`` name (the meta-learner's ``hyperparameters``).
ALGORITHM_KEYS: dict[str, tuple[Hyperparameter, ...]] = {
    "maml-trpo": MAML_TRPO_KEYS,
    "promp": PROMP_KEYS,
    "rl2-ppo": RL2_PPO_KEYS,
    "pearl": PEARL_KEYS,
}


def _defaults_class() -> type:
    declared: dict[str, Hyperparameter] = {}
    for hyperparameter in (*SHARED_KEYS, *(h for keys in ALGORITHM_KEYS.values() for h in keys)):
        other = declared.setdefault(hyperparameter.attribute, hyperparameter)
        if other.default != hyperparameter.default:
            raise ValueError(f"{hyperparameter.key} is declared twice with different defaults")
    fields = [
        (h.attribute, h.type, field(default_factory=h.default_value) if isinstance(h.default, (Mapping, list))
         else field(default=h.default))
        for h in declared.values() if not h.required
    ]
    cls = make_dataclass("Hyperparameters", fields, frozen=True)
    cls.__module__ = __name__
    cls.__doc__ = "Every declared default, by attribute name (``fast-lr`` -> ``fast_lr``)."
    return cls


#: Every key with a default, as a frozen dataclass (made from the declarations).
Hyperparameters = _defaults_class()

#: The defaults used wherever a hyperparameter is not given.
DEFAULTS = Hyperparameters()
