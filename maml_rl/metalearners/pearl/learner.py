"""PEARL: off-policy meta-RL with a probabilistic task latent ("Efficient Off-Policy Meta-Reinforcement
Learning via Probabilistic Context Variables", Rakelly et al., ICML 2019), after oyster
(katerakelly/oyster 44e20fd: rlkit/core/rl_algorithm.py, rlkit/torch/sac/sac.py, agent.py).

Each iteration collects transitions for ``meta-batch-size`` of the fixed training tasks with the
sampler (``rollout_transitions``, the policy conditioned on each slot's z), into per-task replays,
then takes ``num-train-steps-per-itr`` soft actor-critic steps on batches of ``tasks-per-update``
tasks, the encoder trained by the Q loss and the KL of ``q(z|c)`` to the prior.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, List, Mapping, Optional, Sequence

import numpy as np
import torch
from gymnasium import spaces

from .keys import DEFAULTS, PEARL_KEYS
from maml_rl.data.replay import MultiTaskReplay
from maml_rl.data.stats import transition_stats
from maml_rl.data.transitions import TransitionBatch, Transitions

from ..base import Evaluation, EvaluationProtocol, MetaLearner, StepLogs
from .encoder import Posterior, kl_to_standard_normal
from .networks import Critics, PEARLPolicy
from .sac import policy_loss, q_target, qf_loss, vf_loss
from .task_encoding import decode_task, encode_task

__all__ = ["PEARL"]


class PEARL(MetaLearner):
    """PEARL's learner: per-task replays, the context encoder, SAC's actor and critics.

    :param policy: a :class:`PEARLPolicy` (the actor and the encoder).
    :param num_iterations: the run's iterations, for the replay's memory check (``None``: its capacity).
    Every other argument is the configuration key of the same name (``docs/training.md``, "PEARL").
    """

    hyperparameters = PEARL_KEYS
    unused_shared_keys: ClassVar[dict[str, str]] = {
        key: "PEARL's critics learn from one-step targets; there is no GAE"
        for key in ("gae-lambda",)}
    protocol: ClassVar[str] = "pearl-posterior"

    #: A few seconds of 2D navigation (MetaLearner.contract_config). Its replays wrap round at their capacity in
    #: the first iteration (30 initial steps + 40 collected > 45) on the tasks it collects on; 3 posterior stages.
    contract_config: ClassVar[dict] = {
        "algorithm": "pearl", "env-name": "2DNavigation-v0",
        "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10},
        "gamma": 0.99, "hidden-sizes": [16, 16], "nonlinearity": "relu", "fast-batch-size": 1, "meta-batch-size": 2,
        "num-batches": 3, "latent-size": 3, "context-hidden-sizes": [16], "num-train-tasks": 4,
        "num-initial-steps": 30, "num-steps-prior": 10, "num-steps-posterior": 10, "num-extra-rl-steps-posterior": 20,
        "num-train-steps-per-itr": 4, "tasks-per-update": 3, "sac-batch-size": 8, "embedding-batch-size": 6,
        "replay-capacity": 45, "sac-reward-scale": 10.0, "eval-trajectories": 3, "num-exp-traj-eval": 1,
    }
    contract_stages: ClassVar[int] = 3

    def __init__(self, policy: PEARLPolicy, *, num_train_tasks: int = DEFAULTS.num_train_tasks,
                 num_initial_steps: int = DEFAULTS.num_initial_steps, num_steps_prior: int = DEFAULTS.num_steps_prior,
                 num_steps_posterior: int = DEFAULTS.num_steps_posterior,
                 num_extra_rl_steps_posterior: int = DEFAULTS.num_extra_rl_steps_posterior,
                 num_train_steps: int = DEFAULTS.num_train_steps_per_itr,
                 tasks_per_update: int = DEFAULTS.tasks_per_update, sac_batch_size: int = DEFAULTS.sac_batch_size,
                 embedding_batch_size: int = DEFAULTS.embedding_batch_size,
                 replay_capacity: int = DEFAULTS.replay_capacity, policy_lr: float = DEFAULTS.policy_lr,
                 qf_lr: float = DEFAULTS.qf_lr, vf_lr: float = DEFAULTS.vf_lr, context_lr: float = DEFAULTS.context_lr,
                 kl_lambda: float = DEFAULTS.kl_lambda, sac_reward_scale: float = DEFAULTS.sac_reward_scale,
                 soft_target_tau: float = DEFAULTS.soft_target_tau, policy_mean_reg: float = DEFAULTS.policy_mean_reg,
                 policy_std_reg: float = DEFAULTS.policy_std_reg, num_exp_traj_eval: int = DEFAULTS.num_exp_traj_eval,
                 eval_trajectories: int = DEFAULTS.eval_trajectories, gamma: float = 0.99,
                 hidden_sizes: Sequence[int] = (300, 300, 300), nonlinearity: str = "relu",
                 num_iterations: Optional[int] = None, seed: int = 0, device: str | torch.device = "cpu"):
        if not isinstance(policy, PEARLPolicy):
            raise TypeError(f"PEARL trains a maml_rl.metalearners.pearl.PEARLPolicy (actor and context encoder), "
                            f"got {type(policy).__name__}: build it with PEARL.make_policy(env, config)")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"PEARL: seed must be an int >= 0 (the run seed), got {seed!r}")
        self.device = torch.device(device)
        self.policy = policy.to(self.device)
        self.latent_size = policy.latent_size
        self.num_train_tasks, self.num_initial_steps = int(num_train_tasks), int(num_initial_steps)
        self.phases = (("prior", int(num_steps_prior), False, True),  # (name, steps, posterior z, encoder replay)
                       ("posterior", int(num_steps_posterior), True, True),
                       ("extra", int(num_extra_rl_steps_posterior), True, False))
        self.num_train_steps, self.tasks_per_update = int(num_train_steps), int(tasks_per_update)
        self.sac_batch_size, self.embedding_batch_size = int(sac_batch_size), int(embedding_batch_size)
        self.replay_capacity, self.num_iterations = int(replay_capacity), num_iterations
        self.kl_lambda, self.reward_scale, self.tau = float(kl_lambda), float(sac_reward_scale), float(soft_target_tau)
        self.mean_reg, self.std_reg, self.gamma = float(policy_mean_reg), float(policy_std_reg), float(gamma)
        self.num_exp_traj_eval, self.eval_trajectories = int(num_exp_traj_eval), int(eval_trajectories)
        self.seed = int(seed)
        self.critics = Critics(policy.observation_size, policy.action_size, self.latent_size, hidden_sizes,
                               nonlinearity).to(self.device)
        self.optimizers = {
            "policy": torch.optim.Adam(policy.actor.parameters(), lr=policy_lr),
            # oyster's two Adams over qf1 and qf2 with one rate: Adam is per parameter, so one is the same.
            "qf": torch.optim.Adam([*self.critics.qf1.parameters(), *self.critics.qf2.parameters()], lr=qf_lr),
            "vf": torch.optim.Adam(self.critics.vf.parameters(), lr=vf_lr),
            "context": torch.optim.Adam(policy.encoder.parameters(), lr=context_lr),
        }
        # Everything random of collection and training: z draws, task choices, replay batches, SAC's noise.
        self.generator = torch.Generator().manual_seed(int(np.random.SeedSequence([self.seed, 11]).generate_state(1)[0]))
        self.train_tasks: Optional[List[Any]] = None
        self.replay: Optional[MultiTaskReplay] = None  # every transition, for the actor-critic
        self.encoder_replay: Optional[MultiTaskReplay] = None  # the context: recent prior/posterior collections
        self.initial_collected = False
        self._pending: Optional[List[int]] = None

    # ---------------------------------------------------------------- configuration
    @classmethod
    def from_config(cls, policy: torch.nn.Module, config: Mapping[str, Any],
                    device: str | torch.device = "cpu") -> "PEARL":
        keys = {h.argument: config[h.key] for h in cls.hyperparameters if h.argument is not None}
        return cls(policy, gamma=config["gamma"], hidden_sizes=config["hidden-sizes"],
                   nonlinearity=config["nonlinearity"], num_iterations=config["num-batches"], seed=config["seed"] or 0,
                   device=device, **keys)

    @staticmethod
    def make_policy(env: Any, config: Mapping[str, Any]) -> PEARLPolicy:
        if not isinstance(env.action_space, spaces.Box) or len(env.observation_space.shape) != 1:
            raise ValueError("PEARL needs flat Box observations and Box actions (SAC's squashed Gaussian actor), "
                             f"got {env.observation_space} and {env.action_space}")
        return PEARLPolicy(int(env.observation_space.shape[0]), int(np.prod(env.action_space.shape)),
                           config["latent-size"], config["hidden-sizes"], config["context-hidden-sizes"],
                           config["nonlinearity"], config["use-information-bottleneck"],
                           config["use-next-obs-in-context"])

    @staticmethod
    def sampler_options(config: Mapping[str, Any]) -> dict:
        """The policy reads each slot's z after the observation."""
        return {"conditioning_size": config["latent-size"]}

    @classmethod
    def evaluation_protocol(cls, config: Mapping[str, Any], *, eval_actions: str, batch_size: int) -> EvaluationProtocol:
        first, trajectories = config["num-exp-traj-eval"], config["eval-trajectories"]
        mean = ", mean actions" if eval_actions == "mean" else ""
        return EvaluationProtocol(
            {"protocol": "pearl-posterior", "eval-trajectories": trajectories, "num-exp-traj-eval": first},
            " (PEARL)", f"{batch_size} run(s) per task of {trajectories} trajectories, z from the prior for the "
            f"first {first} and then from the posterior of the run's own transitions{mean}; rows: trajectory",
            "trajectory 0, z from the prior", "last trajectory", ("first trajectory", "last trajectory"))

    @staticmethod
    def config_problems(config: Mapping[str, Any]) -> list[str]:
        problems = []
        if config["meta-batch-size"] > config["num-train-tasks"]:
            problems.append(f"meta-batch-size ({config['meta-batch-size']}) tasks are collected each iteration out "
                            f"of num-train-tasks ({config['num-train-tasks']}): lower it or add training tasks")
        if config["num-steps-prior"] + config["num-steps-posterior"] == 0 and config["num-extra-rl-steps-posterior"]:
            problems.append("num-extra-rl-steps-posterior collects with z from the posterior of the context that "
                            "num-steps-prior and num-steps-posterior collect, but both are 0")
        if config["num-initial-steps"] == 0:
            problems.append("num-initial-steps must be > 0: the first gradient steps sample every training task's "
                            "replay")
        return problems

    # ---------------------------------------------------------------- collection
    def sample_tasks(self, sampler: Any, num_tasks: int) -> List[Any]:
        """``num_tasks`` of the training tasks (drawn from the sampler on the first call), without replacement."""
        if self.train_tasks is None:
            self.train_tasks = list(sampler.sample_tasks(self.num_train_tasks))
        if num_tasks > self.num_train_tasks:
            raise ValueError(f"{num_tasks} tasks asked of {self.num_train_tasks} training tasks")
        self._pending = torch.randperm(self.num_train_tasks, generator=self.generator)[:num_tasks].tolist()
        return [self.train_tasks[i] for i in self._pending]

    def sample(self, sampler: Any, tasks: Sequence[Any], gamma: float = DEFAULTS.gamma,
               device: str | torch.device = "cpu") -> TransitionBatch:
        """This iteration's collection (every training task's initial one first, on the first call). The
        sampler runs the policy on the learner's device, where its weights are (``device`` is not used)."""
        if getattr(sampler, "conditioning_size", 0) != self.latent_size:
            raise ValueError(f"PEARL conditions its policy on z: build the sampler with conditioning_size="
                             f"{self.latent_size} (PEARL.sampler_options(config))")
        pending = self._pending
        if pending is None or len(tasks) != len(pending) or any(t is not self.train_tasks[i]
                                                                for t, i in zip(tasks, pending)):
            raise ValueError("PEARL.sample() collects for its own training tasks: pass what "
                             "learner.sample_tasks(sampler, n) just returned")
        self._pending = None
        self._make_replays(sampler)
        prior: List[Transitions] = []
        posterior: List[Transitions] = []
        if not self.initial_collected:
            prior += self._collect(sampler, range(self.num_train_tasks), self.num_initial_steps, False, True,
                                   "initial collection, every training task")
            self.initial_collected = True
        for i in pending:
            self.encoder_replay[i].clear()  # the context is this iteration's collection (oyster)
        for name, steps, from_posterior, for_encoder in self.phases:
            if steps:
                part = self._collect(sampler, pending, steps, from_posterior, for_encoder, f"collection ({name})")
                (posterior if from_posterior else prior).extend(part)
        return TransitionBatch(prior, posterior)

    @staticmethod
    def env_steps_per_iteration(config: Mapping[str, Any], horizon: int) -> tuple[int, int]:
        """Each phase's steps per task, and the initial collection of every training task (whole episodes:
        up to one more episode each)."""
        phases = ("num-steps-prior", "num-steps-posterior", "num-extra-rl-steps-posterior")
        per_task = sum(config[key] for key in phases)
        return config["meta-batch-size"] * per_task, config["num-train-tasks"] * config["num-initial-steps"]

    def _make_replays(self, sampler: Any) -> None:
        if self.replay is not None:
            return
        rows = self._replay_rows(sampler.batch_size, sampler.horizon)
        shapes = ((self.policy.observation_size,), (self.policy.action_size,))
        self.replay = MultiTaskReplay(self.num_train_tasks, self.replay_capacity, *shapes, rows_per_task=rows,
                                      what="replay (actor-critic)")
        self.encoder_replay = MultiTaskReplay(self.num_train_tasks, self.replay_capacity, *shapes,
                                              rows_per_task=rows, what="replay (encoder)")

    def _replay_rows(self, batch_size: int, horizon: int) -> int:
        """The most rows a task's replay will hold: each phase collects whole episodes of every slot until it
        has its steps, and no more than the capacity."""
        calls = batch_size * horizon
        per_iteration = sum(steps + calls for _, steps, _, _ in self.phases if steps)
        most = self.num_initial_steps + calls + (self.num_iterations or 0) * per_iteration
        return self.replay_capacity if self.num_iterations is None else min(self.replay_capacity, most)

    def batch_stats(self, batch: TransitionBatch) -> dict[str, float]:
        return transition_stats(batch)

    def memory_needs(self, config: Mapping[str, Any], observation_size: int, action_size: int,
                     horizon: int) -> dict[str, int]:
        row = 4 * (2 * observation_size + 1) + 4 * action_size + 1  # a transition, as MultiTaskReplay stores it
        rows = self._replay_rows(config["fast-batch-size"], horizon)
        width = max([*config["hidden-sizes"], *config["context-hidden-sizes"]])
        return {"replays (actor-critic and encoder)": 2 * self.num_train_tasks * rows * row,
                "training tasks": self.num_train_tasks * 64,
                "context batch": self.tasks_per_update * self.embedding_batch_size * (row + 8 * width),
                "actor-critic batch": self.tasks_per_update * self.sac_batch_size * (row + 8 * width)}

    def _collect(self, sampler: Any, indices: Sequence[int], steps: int, from_posterior: bool,
                 for_encoder: bool, name: str) -> List[Transitions]:
        """Whole episodes of each task until it has ``steps`` transitions, each slot with its own z
        (oyster resamples z every trajectory, from the prior or from a fresh context's posterior)."""
        remaining = {int(i): steps for i in indices}
        out = []
        with self.progress.phase(name, len(remaining) * steps, "env step") as advance:
            while active := [i for i in remaining if remaining[i] > 0]:
                with torch.no_grad():
                    if from_posterior:
                        z = self.posterior(self.context(active)).sample(self.generator, per_task=sampler.batch_size)
                    else:
                        z = torch.randn((len(active), sampler.batch_size, self.latent_size), generator=self.generator)
                collected = sampler.rollout_transitions([self.train_tasks[i] for i in active],
                                                        conditioning=z.cpu(), device=self.device)
                for i, transitions in zip(active, collected):
                    self.replay[i].add(transitions)
                    if for_encoder:
                        self.encoder_replay[i].add(transitions)
                    advance(min(len(transitions), remaining[i]))
                    remaining[i] -= len(transitions)
                    out.append(transitions)
        return out

    def context(self, indices: Sequence[int]) -> torch.Tensor:
        """``[K, embedding-batch-size, o + a + 1 (+ o)]`` transitions of each task's encoder replay."""
        rows = self.encoder_replay.sample(indices, self.embedding_batch_size, self.generator)
        return self.context_rows(rows).to(self.device)

    def context_rows(self, rows: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``[o, a, r(, o')]`` of transitions, the encoder's input (rewards unscaled, as oyster's)."""
        parts = [rows["observations"], rows["actions"], rows["rewards"].unsqueeze(-1)]
        if self.policy.next_obs_in_context:
            parts.append(rows["next_observations"])
        return torch.cat(parts, dim=-1)

    def posterior(self, context: torch.Tensor) -> Posterior:
        return self.policy.encoder(context.to(self.device))

    # ---------------------------------------------------------------- training
    def update(self, batch: TransitionBatch) -> StepLogs:
        """``num-train-steps-per-itr`` soft actor-critic steps; the means of their losses."""
        if not isinstance(batch, TransitionBatch):
            raise TypeError(f"PEARL.update() takes what PEARL.sample() returned, got {type(batch).__name__}")
        started = time.perf_counter()
        sums: dict[str, float] = {}
        with self.progress.phase("SAC gradient steps", self.num_train_steps, "step") as advance:
            for _ in range(self.num_train_steps):
                indices = torch.randint(self.num_train_tasks, (self.tasks_per_update,),
                                        generator=self.generator).tolist()
                for name, value in self.take_step(indices).items():
                    sums[name] = sums.get(name, 0.0) + value
                advance(1)
        logs: StepLogs = {name: value / self.num_train_steps for name, value in sums.items()}
        logs["time_update"] = time.perf_counter() - started
        return logs

    def take_step(self, indices: Sequence[int]) -> dict[str, float]:
        """One step of oyster's ``_take_step`` on tasks ``indices``, in its order: encoder and Q networks,
        then V (and its target), then the actor, the last two on the Q networks just updated."""
        K, n, generator, device = len(indices), self.sac_batch_size, self.generator, self.device
        context = self.context(indices)
        rows = {name: value.to(device) for name, value in self.replay.sample(indices, n, generator).items()}
        posterior = self.posterior(context)
        z = posterior.sample(generator)  # reparameterised: the Q loss reaches the encoder through it
        task_z = z.unsqueeze(1).expand(K, n, self.latent_size).reshape(K * n, self.latent_size)
        flat = {name: value.reshape(K * n, *value.shape[2:]) for name, value in rows.items()}
        obs, actions, next_obs = flat["observations"], flat["actions"], flat["next_observations"]
        noise = torch.randn((K * n, self.policy.action_size), generator=generator).to(device)
        drawn = self.policy.actor.rsample(torch.cat([obs, task_z.detach()], -1), noise)
        q1, q2 = self.critics.q(obs, actions, task_z)
        v = self.critics.vf(torch.cat([obs, task_z.detach()], -1))
        with torch.no_grad():
            target_v = self.critics.target_vf(torch.cat([next_obs, task_z], -1))
        opt = self.optimizers
        opt["context"].zero_grad()
        kl = kl_to_standard_normal(*posterior) if self.policy.encoder.information_bottleneck else z.new_zeros(())
        if self.policy.encoder.information_bottleneck:
            (self.kl_lambda * kl).backward(retain_graph=True)
        opt["qf"].zero_grad()
        target = q_target(flat["rewards"].unsqueeze(-1), flat["terminated"].unsqueeze(-1), target_v,
                          self.reward_scale, self.gamma)
        q_loss = qf_loss(q1, q2, target)
        q_loss.backward()
        opt["qf"].step()
        opt["context"].step()
        min_q_new = torch.min(*self.critics.q(obs, drawn.actions, task_z.detach()))
        v_loss = vf_loss(v, min_q_new, drawn.log_prob)
        opt["vf"].zero_grad()
        v_loss.backward()
        opt["vf"].step()
        self.critics.update_target(self.tau)
        pi_loss = policy_loss(drawn.log_prob, min_q_new, drawn.mean, drawn.log_std, self.mean_reg, self.std_reg)
        opt["policy"].zero_grad()
        pi_loss.backward()
        opt["policy"].step()
        return {"qf_loss": q_loss.item(), "vf_loss": v_loss.item(), "policy_loss": pi_loss.item(),
                "kl": kl.item(), "z_mean_abs": posterior.means.abs().mean().item(),
                "z_variance": posterior.variances.mean().item(), "q_mean": q1.mean().item(),
                "log_pi": drawn.log_prob.mean().item()}

    # ---------------------------------------------------------------- evaluation and state
    def evaluate(self, sampler: Any, tasks: Sequence[Any], gamma: float = DEFAULTS.gamma,
                 device: str | torch.device = "cpu", *, actions: str = "sample") -> Evaluation:
        """Oyster's online adaptation (``collect_paths``), every slot a run of its own: ``eval-trajectories``
        trajectories per task, z drawn from the prior until ``num-exp-traj-eval`` have been collected, then
        from the posterior of every transition the slot has seen. Stages are the trajectories. The policy runs
        on the learner's device (``device`` is not used)."""
        from .evaluation import online_adaptation

        return online_adaptation(self, sampler, list(tasks), actions)

    def state_dict(self) -> dict:
        return {
            "critics": self.critics.state_dict(),
            "optimizers": {name: optimizer.state_dict() for name, optimizer in self.optimizers.items()},
            "generator": self.generator.get_state(),
            "train_tasks": None if self.train_tasks is None else [encode_task(t) for t in self.train_tasks],
            "replay": None if self.replay is None else self.replay.state_dict(),
            "encoder_replay": None if self.encoder_replay is None else self.encoder_replay.state_dict(),
            "initial_collected": self.initial_collected,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.critics.load_state_dict(state["critics"])
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        self.generator.set_state(state["generator"])
        self.train_tasks = None if state["train_tasks"] is None else [decode_task(t) for t in state["train_tasks"]]
        self.initial_collected = bool(state["initial_collected"])
        self._pending = None
        if state["replay"] is not None:
            shapes = ((self.policy.observation_size,), (self.policy.action_size,))
            self.replay = MultiTaskReplay(self.num_train_tasks, self.replay_capacity, *shapes, check=False)
            self.encoder_replay = MultiTaskReplay(self.num_train_tasks, self.replay_capacity, *shapes, check=False)
            self.replay.load_state_dict(state["replay"])
            self.encoder_replay.load_state_dict(state["encoder_replay"])
