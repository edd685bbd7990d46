"""On-policy learning over trials, whatever the sequence model: PPO on trials from
``MultiTaskSampler.rollout_trials`` (RL²'s GRU, a causal Transformer...).

"RL²: Fast Reinforcement Learning via Slow Reinforcement Learning" (Duan et
al., 2016). Each iteration samples ``B`` trials of ``episodes-per-trial``
episodes for each task and takes PPO epochs on them:

* a trial is one long episode: returns and GAE run across the episode
  boundaries inside it (RL²'s definition), and a ``LinearFeatureBaseline``
  is refitted on each task's trials (its time feature counts the steps of
  the trial), as metaworld-algorithms does, or (``critic: "gru"``) a
  :class:`~.critic.TrialCritic` reads the trial so far and is regressed on
  the GAE returns, one Adam step per minibatch;
* the clipped surrogate, an entropy bonus, minibatches of whole trials,
  gradient-norm clipping, Adam;
* a policy whose state is recorded (a GRU's) runs truncated BPTT: the state
  is carried through the whole trial but gradients flow through it for at
  most ``bptt-chunk`` steps; with ``update-per-chunk`` each chunk of a
  minibatch gets its own Adam step, in the trial's order, the state entering
  it carried (detached) from the previous chunk's forward pass, as
  metaworld-algorithms' RL² updates; with ``bptt-overlap`` the chunks overlap
  (each starts ``bptt-chunk - bptt-overlap`` steps after the one before, from
  the state that chunk's forward pass reached there);
* a policy whose state is its inputs (``state_is_inputs``, a Transformer's)
  runs each trial's whole sequence in one pass from the :class:`TrialBatch`;
* the minibatch order is drawn from the run seed and the update count.

A trial learner is this class with its policy: :meth:`make_policy`, its keys
(:func:`~.keys.trial_keys` and its policy's), :attr:`protocol_name` and
:attr:`label`, and what its data takes in :meth:`memory_needs`.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import torch

from maml_rl.config.hyperparameters import BOOLEAN, POSITIVE_INT, Hyperparameter
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.data.stats import trial_stats
from maml_rl.data.trials import TrialBatch
from maml_rl.metalearners.base import Evaluation, EvaluationProtocol, MetaLearner, StaleEpisodesError, StepLogs
from maml_rl.metalearners.ppo import clipped_objective
from maml_rl.metalearners.trials.critic import TrialCritic, critic_advantages, critic_step
from maml_rl.metalearners.trials.evaluation import evaluate_trials
from maml_rl.metalearners.trials.keys import DEFAULTS, trial_keys
from maml_rl.policies.recurrent import is_recurrent
from maml_rl.policies.trial_inputs import InputFormat, input_format
from maml_rl.policies.trial_state import records_state

__all__ = ["TrialPPO"]


class TrialPPO(MetaLearner):
    """PPO on trials from ``MultiTaskSampler.rollout_trials``, for any trial policy with
    ``forward_trials(inputs, state, chunk)`` (:mod:`maml_rl.policies.trial_state`).

    :param policy: a recurrent policy: one whose state is recorded runs from the recorded state in
        chunks; one whose state is its inputs runs each whole trial in one pass (``state`` ``None``).
    :param gae_lambda: GAE's lambda over the trial.
    :param attempt_input: the policy's input ends with the attempt index (:class:`InputFormat`).

    Every default is the configuration key's (:data:`~.keys.DEFAULTS`), so a key left out means the same
    in a config file and in a call.
    """

    #: Trials, not per-task adaptation: :meth:`sample` uses ``rollout_trials``.
    recurrent: ClassVar[bool] = True
    hyperparameters: ClassVar[tuple[Hyperparameter, ...]] = trial_keys(chunks=True)
    evaluation_options: ClassVar[tuple[Hyperparameter, ...]] = (
        Hyperparameter("evaluation-episodes", int, 3, POSITIVE_INT,
                       "episodes after the adaptation trial, each restarting from the state it reached "
                       "(Meta-World's protocol)", argument="evaluation_episodes"),
        Hyperparameter("reset-context-each-attempt", bool, False, BOOLEAN,
                       "start every episode from the policy's initial state and a trial's first input (same "
                       "weights, no memory of the earlier attempts): how much of the gain is memory",
                       argument="reset_context"),
    )
    #: The ``protocol`` test.py records, and what it prints after the policy's name.
    protocol_name: ClassVar[str] = "trials"
    label: ClassVar[str] = ""
    #: Its policy's state is its inputs, so the evaluation episodes run inside the trial (sampled actions).
    evaluation_in_trial: ClassVar[bool] = False

    def __init__(self, policy: torch.nn.Module, *, episodes_per_trial: int = DEFAULTS.episodes_per_trial,
                 epochs: int = DEFAULTS.ppo_epochs, minibatches: int = DEFAULTS.ppo_minibatches,
                 clip: float = DEFAULTS.clip, lr: float = DEFAULTS.lr, entropy_coef: float = DEFAULTS.entropy_coef,
                 max_grad_norm: float = DEFAULTS.max_grad_norm, bptt_chunk: int = DEFAULTS.bptt_chunk,
                 reward_scale: float = DEFAULTS.reward_scale,
                 normalize_advantages: bool = DEFAULTS.normalize_advantages,
                 gae_lambda: float = DEFAULTS.gae_lambda, update_per_chunk: bool = DEFAULTS.update_per_chunk,
                 bptt_overlap: int = DEFAULTS.bptt_overlap, baseline_inputs: str = DEFAULTS.baseline_inputs,
                 target_kl: float | None = DEFAULTS.target_kl, trial_inputs: str = DEFAULTS.trial_inputs,
                 critic: str = DEFAULTS.critic, critic_size: int = DEFAULTS.critic_size,
                 critic_lr: float = DEFAULTS.critic_lr, attempt_input: bool = False, seed: int = 0, device: str | torch.device = "cpu") -> None:
        name = type(self).__name__
        if not is_recurrent(policy) or not hasattr(policy, "forward_trials"):
            raise TypeError(
                f"{name} trains a recurrent policy (is_recurrent = True, with forward_trials), got "
                f"{type(policy).__name__}: build a maml_rl.policies.GRUPolicy, or use algorithm: maml-trpo for "
                "a feed-forward policy"
            )
        arguments = dict(episodes_per_trial=episodes_per_trial, epochs=epochs, minibatches=minibatches,
                         bptt_chunk=bptt_chunk, bptt_overlap=bptt_overlap, baseline_inputs=baseline_inputs,
                         trial_inputs=trial_inputs, target_kl=target_kl, critic=critic, critic_size=critic_size,
                         critic_lr=critic_lr)
        declared = {h.argument for h in self.hyperparameters}
        self.check_arguments(**{k: v for k, v in arguments.items() if k in declared})
        if bptt_overlap >= bptt_chunk:
            raise ValueError(f"{name}: bptt_overlap ({bptt_overlap}) must be smaller than bptt_chunk ({bptt_chunk}): "
                             "each chunk must move the trial on")
        if bptt_overlap and not update_per_chunk:
            raise ValueError(f"{name}: bptt_overlap applies to the chunk updates: set update_per_chunk (config: "
                             "update-per-chunk: true) or leave bptt-overlap at 0")
        self.chunked = records_state(policy)
        if update_per_chunk and not self.chunked:
            raise ValueError(f"{name}: update_per_chunk carries a recorded state from chunk to chunk, but "
                             f"{type(policy).__name__}'s state is its inputs: each trial runs in one pass")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"{name}: seed must be an int >= 0 (the run seed), got {seed!r}")
        self.policy = policy.to(device)
        self.device = torch.device(device)
        self.episodes_per_trial, self.epochs, self.minibatches = int(episodes_per_trial), int(epochs), int(minibatches)
        self.clip, self.entropy_coef, self.max_grad_norm = float(clip), float(entropy_coef), float(max_grad_norm)
        self.bptt_chunk, self.reward_scale = int(bptt_chunk), float(reward_scale)
        self.normalize_advantages, self.gae_lambda = bool(normalize_advantages), float(gae_lambda)
        self.update_per_chunk, self.bptt_overlap = bool(update_per_chunk), int(bptt_overlap)
        self.baseline_inputs, self.trial_inputs, self.seed = baseline_inputs, trial_inputs, int(seed)
        self.target_kl = None if target_kl is None else float(target_kl)
        #: What the policy sees at each step: declared here, the sampler and the TrialBatch only call it.
        self.input_format: InputFormat = InputFormat(
            previous=True, reward_scale=self.reward_scale, zero_after_done=input_format(trial_inputs).zero_after_done,
            attempt=bool(attempt_input))
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=lr, eps=1e-5)
        self.num_updates = 0
        #: The learned value function (critic: "gru"), or None for the linear baseline.
        self.critic: TrialCritic | None = None
        if critic == "gru":
            # It reads what the policy reads: the policy's input size is the trial inputs' width.
            self.critic = TrialCritic(int(policy.input_size), int(critic_size), seed=self.seed).to(self.device)
            self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=float(critic_lr), eps=1e-5)

    @classmethod
    def from_config(cls, policy: torch.nn.Module, config: Mapping[str, Any],
                    device: str | torch.device = "cpu") -> "TrialPPO":
        keys = {h.argument: config[h.key] for h in cls.hyperparameters if h.argument is not None}
        return cls(policy, gae_lambda=config["gae-lambda"], seed=config["seed"], device=device, **keys)

    @staticmethod
    def config_problems(config: Mapping[str, Any]) -> list[str]:
        problems = []
        if "bptt-overlap" not in config:
            return problems
        if config["bptt-overlap"] >= config["bptt-chunk"]:
            problems.append(f"bptt-overlap ({config['bptt-overlap']}) must be smaller than bptt-chunk "
                            f"({config['bptt-chunk']}): each chunk shares that many steps with the next")
        if config["bptt-overlap"] and not config["update-per-chunk"]:
            problems.append("bptt-overlap applies to the chunk updates: set update-per-chunk: true or leave "
                            "bptt-overlap at 0")
        return problems

    def batch_stats(self, batch: Sequence[TrialBatch]) -> dict[str, float]:
        return trial_stats(batch)

    @staticmethod
    def env_steps_per_iteration(config: Mapping[str, Any], horizon: int) -> tuple[int, int]:
        """``fast-batch-size`` trials of ``episodes-per-trial`` episodes per task."""
        return config["meta-batch-size"] * config["fast-batch-size"] * config["episodes-per-trial"] * horizon, 0

    def sample(self, sampler: Any, tasks: Sequence[Any], gamma: float = DEFAULTS.gamma,
               device: str | torch.device = "cpu") -> list[TrialBatch]:
        """This iteration's trials, as :meth:`step` needs them."""
        return sampler.rollout_trials(tasks, self.episodes_per_trial, inputs=self.input_format.name,
                                      reward_scale=self.reward_scale, chunk=self.bptt_chunk if self.chunked else None,
                                      gamma=gamma, device=device)

    def update(self, batch: Sequence[TrialBatch]) -> StepLogs:
        return self.step(batch)

    def evaluate(self, sampler: Any, tasks: Sequence[Any], gamma: float = DEFAULTS.gamma,
                 device: str | torch.device = "cpu", *, actions: str = "sample",
                 evaluation_episodes: int = 1, reset_context: bool = False) -> Evaluation:
        """Meta-World's protocol (:func:`evaluate_trials`): stages are the trial's episodes (the attempts),
        then the evaluation episodes; one value per task (``[stages, tasks, 1]``)."""
        returns, success = evaluate_trials(sampler, list(tasks), self.episodes_per_trial, self.reward_scale,
                                           evaluation_episodes, actions, gamma, device,
                                           inputs=self.input_format.name, reset_context=reset_context)
        return Evaluation(returns[..., None], None if success is None else success[..., None])

    @classmethod
    def evaluation_protocol(cls, config: Mapping[str, Any], *, eval_actions: str, batch_size: int,
                            evaluation_episodes: int = 1, reset_context: bool = False) -> EvaluationProtocol:
        if cls.evaluation_in_trial and eval_actions == "mean":
            raise ValueError(f"{cls.__name__}'s evaluation episodes run inside the trial, whose actions are sampled "
                             "(its policy's state is its inputs: there is no state to restart from); leave out "
                             "--eval-actions mean")
        mean = ", mean actions after adaptation" if eval_actions == "mean" else ""
        settings = {"protocol": cls.protocol_name, "episodes-per-trial": config["episodes-per-trial"],
                    "evaluation-episodes": evaluation_episodes}
        reset = ""
        if reset_context:  # only then: the records of runs evaluated before the option still pool
            settings["reset-context-each-attempt"] = True
            reset = ", the context reset at each episode"
        return EvaluationProtocol(
            settings, cls.label, f"{batch_size} trials of {config['episodes-per-trial']} episodes per task, then "
            f"{evaluation_episodes} evaluation episodes "
            f"{'in the same trial' if cls.evaluation_in_trial else 'from the adapted state'}{mean}{reset}; "
            "rows: episode of the trial, the last row the evaluation episodes",
            "episode 0 of the trial", "evaluation episodes" + (", mean action" if eval_actions == "mean" else ""),
            ("episode 0", "evaluation"))

    def step(self, trials: Sequence[TrialBatch]) -> StepLogs:
        """PPO epochs on one iteration's trials; returns what to log."""
        started = time.perf_counter()
        data = self._prepare(trials)
        N = data["actions"].shape[1]
        # The run seed reaches the minibatch order: two seeds must not share it.
        order_seed = np.random.SeedSequence([self.seed, self.num_updates, 7]).generate_state(1)[0]
        generator = torch.Generator().manual_seed(int(order_seed))
        sums = {"loss": 0.0, "entropy": 0.0, "approx_kl": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0}
        updates, stopped = 0, False
        value_loss, critic_steps = 0.0, 0
        minibatches = min(self.minibatches, N)
        with self.progress.phase("PPO epochs", self.epochs * minibatches, "minibatch") as advance:
            for _ in range(self.epochs):
                order = torch.randperm(N, generator=generator)
                for part in torch.tensor_split(order, minibatches):
                    minibatch = {name: value[:, part.to(value.device)] if value.dim() > 1 else value
                                 for name, value in data.items()}
                    for logs in self._updates(minibatch):
                        for name in sums:
                            sums[name] += logs[name]
                        updates += 1
                        # metaworld-algorithms' early stop: the policy has moved far enough from the one that sampled.
                        if self.target_kl is not None and logs["approx_kl"] > 1.5 * self.target_kl:
                            stopped = True
                            break
                    if self.critic is not None:
                        value_loss += critic_step(self.critic, self.critic_optimizer, minibatch, self.max_grad_norm)
                        critic_steps += 1
                    advance(1)
                    if stopped:
                        break
                if stopped:
                    break
        self.num_updates += 1
        out: StepLogs = {name: value / updates for name, value in sums.items()}
        out["ppo_updates"] = updates
        if self.critic is not None:
            out["value_loss"] = value_loss / max(critic_steps, 1)
        if self.target_kl is not None:
            out["kl_stopped"] = stopped
        out["time_update"] = time.perf_counter() - started
        return out

    def _prepare(self, trials: Sequence[TrialBatch]) -> dict[str, torch.Tensor]:
        """Advantages per task, then every trial side by side ``[T, N, ...]`` (zero-padded)."""
        if not trials:
            raise ValueError(f"{type(self).__name__}.step() needs the trials of at least one task")
        for batch in trials:
            if not isinstance(batch, TrialBatch) or batch.log_probs is None:
                raise StaleEpisodesError(f"{type(self).__name__}.step() needs TrialBatches sampled by the recurrent "
                                         "policy (MultiTaskSampler.rollout_trials), with behaviour log-probabilities")
            if batch.actions_from != "sample":
                raise StaleEpisodesError("these trials took the policy's mean actions (evaluation); "
                                         "a policy-gradient step needs sampled ones")
            # The ratios are exact only on the inputs the policy saw and from the state it started in.
            if batch.input_format != self.input_format:
                raise StaleEpisodesError(
                    f"these trials were sampled with inputs={batch.inputs!r}, reward_scale={batch.reward_scale}; "
                    f"this learner trains on inputs={self.input_format.name!r} with reward_scale={self.reward_scale}: "
                    "sample them with learner.sample(sampler, tasks, gamma, device) or rollout_trials(..., "
                    "inputs=learner.input_format)")
            if batch.context_reset:
                raise StaleEpisodesError("these trials reset the policy's context at each episode (an evaluation's "
                                         "ablation); a policy-gradient step needs whole trials")
            if self.chunked and batch.chunk_states is None:
                raise StaleEpisodesError("these trials recorded no policy states: sample them with "
                                         "rollout_trials(..., chunk=learner.bptt_chunk) (learner.sample does)")
        inputs = [batch.policy_inputs(self.reward_scale) for batch in trials]
        targets = None
        if self.critic is not None:
            targets = critic_advantages(self.critic, trials, inputs, self.gae_lambda, self.normalize_advantages)
        if targets is None:
            # "policy-inputs": metaworld-algorithms' features, so the values can see the trial's progress.
            features = inputs if self.baseline_inputs == "policy-inputs" else [None] * len(trials)
            width = inputs[0].shape[-1] if features[0] is not None else int(np.prod(trials[0].observation_shape))
            baseline = LinearFeatureBaseline(int(width)).to(trials[0].device)
            for batch, x in zip(trials, features):
                baseline.fit(batch, x)
                batch.compute_advantages(lambda b, x=x: baseline(b, x), gae_lambda=self.gae_lambda,
                                         normalize=self.normalize_advantages)
        T = max(len(batch) for batch in trials)

        def side_by_side(values: Sequence[torch.Tensor]) -> torch.Tensor:
            padded = [torch.cat([v, v.new_zeros((T - v.shape[0], *v.shape[1:]))]) for v in values]
            return torch.cat(padded, dim=1).to(self.device)

        data = {
            "inputs": side_by_side(inputs),
            "actions": side_by_side([b.actions for b in trials]),
            "advantages": side_by_side([b.advantages for b in trials]),
            "log_probs": side_by_side([b.log_probs for b in trials]),
            "mask": side_by_side([b.mask for b in trials]),
        }
        if targets is not None:
            data["targets"] = side_by_side(targets)
        if self.chunked:
            data["state"] = torch.cat([b.chunk_states[0] for b in trials]).to(self.device).unsqueeze(0)
        return data

    def _updates(self, minibatch: dict[str, torch.Tensor]):
        """The Adam steps on one minibatch of trials: one, or one per BPTT chunk."""
        if not self.update_per_chunk:
            # A policy whose state is its inputs starts each trial afresh (state None) and runs it in one pass.
            yield self._update(minibatch, minibatch["state"][0] if self.chunked else None)[0]
            return
        state = minibatch["state"][0]
        T = minibatch["mask"].shape[0]
        stride = self.bptt_chunk - self.bptt_overlap
        for lo in range(0, T, stride):
            chunk = {name: value[lo:lo + self.bptt_chunk] for name, value in minibatch.items() if name != "state"}
            if not chunk["mask"].any():
                break  # every trial of the minibatch has ended: no step to learn from (Adam would still move)
            # With an overlap the next chunk starts `stride` steps on, from the state reached there.
            logs, state = self._update(chunk, state, carry_after=stride if self.bptt_overlap else None)
            yield logs
            state = state.detach()
            if lo + self.bptt_chunk >= T:
                break  # this chunk reached the trials' end (a shorter last chunk covers the tail)

    def _update(self, data: dict[str, torch.Tensor], state: torch.Tensor,
                carry_after: int | None = None) -> tuple[dict[str, float], torch.Tensor]:
        """One Adam step on ``data`` from ``state``; also the state after its last step, or after
        its first ``carry_after`` steps (the start of an overlapping next chunk); ``state`` and ``chunk``
        are ``None`` for a policy whose state is its inputs."""
        mask = data["mask"]
        steps = mask.sum().clamp(min=1)
        if carry_after is None or carry_after >= mask.shape[0]:
            distribution, final_state = self.policy.forward_trials(data["inputs"], state,
                                                                   chunk=self.bptt_chunk if self.chunked else None)
            log_probs = distribution.log_prob(data["actions"])
            entropy_per_step = distribution.entropy()
        else:
            # Two passes, gradients flowing through the state between them (one chunk for BPTT).
            head, final_state = self.policy.forward_trials(data["inputs"][:carry_after], state)
            tail, _ = self.policy.forward_trials(data["inputs"][carry_after:], final_state)
            log_probs = torch.cat([head.log_prob(data["actions"][:carry_after]),
                                   tail.log_prob(data["actions"][carry_after:])])
            entropy_per_step = torch.cat([head.entropy(), tail.entropy()])
        ratio = torch.exp(log_probs - data["log_probs"])
        advantages = data["advantages"]
        surrogate = clipped_objective(ratio, advantages, self.clip)
        entropy = (entropy_per_step * mask).sum() / steps
        loss = -(surrogate * mask).sum() / steps - self.entropy_coef * entropy
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.optimizer.step()
        with torch.no_grad():
            log_ratio = log_probs - data["log_probs"]
            approx_kl = (((ratio - 1) - log_ratio) * mask).sum() / steps
            clipped = (((ratio - 1).abs() > self.clip).float() * mask).sum() / steps
        return ({"loss": loss.item(), "entropy": entropy.item(), "approx_kl": approx_kl.item(),
                 "clip_fraction": clipped.item(), "grad_norm": grad_norm.item()}, final_state)

    def state_dict(self) -> dict:
        """The optimiser's state and the update count (the minibatch order derives from it); the critic's
        weights and optimiser with critic: "gru"."""
        state = {"optimizer": self.optimizer.state_dict(), "num_updates": self.num_updates}
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if (self.critic is not None) != ("critic" in state):
            raise ValueError(
                f"this checkpoint was {'saved with' if 'critic' in state else 'saved without'} a learned critic, "
                f"and this run {'has' if self.critic is not None else 'has none'}: resume with the run's own "
                "config.json (its critic key)")
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_updates = int(state["num_updates"])
        if self.critic is not None:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
