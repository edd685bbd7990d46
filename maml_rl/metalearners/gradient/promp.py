"""ProMP: Proximal Meta-Policy Search (Rothfuss et al., ICLR 2019).

The inner step is MAML's, on ProMP's low-variance curvature (LVC) objective
``-E[pi / pi_behaviour * A]`` (:func:`~maml_rl.metalearners.gradient.losses.inner_losses`): the same
step as REINFORCE's from the parameters that sampled the episodes, with
better-behaved second derivatives. The meta-update is ``outer_steps`` Adam
steps (the optimiser's moments kept across iterations, as ProMP's TensorFlow
optimiser kept them) on

    mean over tasks of -E[min(r A, clip(r, 1 - eps, 1 + eps) A)]
    + mean over inner steps i of  coef_i * KL(pi_behaviour_i || pi_theta_i)

where ``r`` is the adapted policy's likelihood ratio against the adapted
policy that sampled the post-adaptation episodes, differentiated through the
inner step, and the KL, on inner step ``i``'s episodes, keeps the pre-adaptation
policy (and the policies of later inner steps) near the ones that sampled them.
Each step's adaptation restarts from the current parameters, so from the second
Adam step on the LVC ratio differs from 1.
"""

from __future__ import annotations

import copy
import math
import time
from collections import OrderedDict
from typing import Any, ClassVar, Mapping

import torch
from torch.distributions import Distribution

from maml_rl.metalearners.gradient.adaptation import inner_step, meta_parameters
from maml_rl.data.episodes import TaskBatch
from maml_rl.metalearners.gradient.keys import DEFAULTS, PROMP_KEYS
from maml_rl.metalearners.gradient.losses import _flat_observations, clipped_surrogate_loss, mean_kl
from maml_rl.metalearners.base import StepLogs, check_same_params, recorded_params
from maml_rl.metalearners.gradient.learner import GradientMetaLearner, TrainEpisodes, ValidEpisodes
from maml_rl.policies.policy import Params, Policy, expand_params
from maml_rl.utils.torch_utils import detach_distribution

__all__ = ["ProMP", "adapt_kl_coefficient"]


def adapt_kl_coefficient(coefficient: float, kl: float, target: float) -> float:
    """ProMP's rule: halve the coefficient below ``target / 1.5``, double it above ``target * 1.5``."""
    if kl < target / 1.5:
        return coefficient / 2
    if kl > target * 1.5:
        return coefficient * 2
    return coefficient


class ProMP(GradientMetaLearner):
    """ProMP's meta-learner: LVC inner steps, then Adam on the clipped objective with an inner KL penalty.

    :param policy: policy supporting stacked per-task parameters.
    :param fast_lr: inner-loop step size.
    :param num_steps: number of inner gradient steps.
    :param device: device the policy and the data are put on.
    :param averaging: how losses weigh a task's steps, ``"step"`` or ``"episode"``.
    :param outer_steps: Adam steps per iteration on the same episodes.
    :param outer_lr: Adam's learning rate.
    :param outer_clip: clip of the post-adaptation likelihood ratio.
    :param inner_kl_coef: initial weight of each inner step's KL penalty.
    :param inner_kl_target: the KL that ``adaptive_inner_kl`` steers each coefficient to.
    :param adaptive_inner_kl: update the coefficients after each iteration (:func:`adapt_kl_coefficient`).
    :param outer_kl_limit: most mean KL of the adapted policies from those that sampled the valid
        episodes; an Adam step that exceeds it ends the iteration's steps. ``None`` (ProMP's
        algorithm): no limit.
    :param outer_kl_backtracks: with ``outer_kl_limit``, how many times the step that exceeds it is
        halved (the parameters' move; Adam's moments keep its gradient) before it is given up; the
        first within the limit is kept. 0, or none within it: the step is undone, parameters and
        moments. Undoing alone can freeze a run: the moments that made the step come back unchanged,
        and every later iteration's first step goes past the limit again.
    :param gae_lambda: GAE's lambda for the advantages of the episodes :meth:`sample` gathers.
    """

    hyperparameters = PROMP_KEYS
    # With outer-kl-limit and no outer-kl-backtracks, a step past the limit is undone with Adam's moments, so
    # the next iteration tries the same step again: a HalfCheetahDir run took no step in its last 213 iterations.
    stall_advice = ("(outer_steps 0): each first Adam step went past outer-kl-limit and was undone with its moments, "
                    "so the same step comes back every iteration and the policy no longer changes. Continue with "
                    "--set outer-kl-backtracks=10 (halve such a step until it is within the limit) or a larger "
                    "outer-kl-limit")

    #: A fraction of a second per iteration of 2D navigation (MetaLearner.contract_config); one gradient step.
    contract_config: ClassVar[dict] = {
        "algorithm": "promp", "env-name": "2DNavigation-v0",
        "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10}, "gamma": 0.99,
        "hidden-sizes": [16, 16], "nonlinearity": "tanh", "fast-batch-size": 4, "meta-batch-size": 3,
        "fast-lr": 0.1, "num-batches": 3, "outer-steps": 2}
    contract_stages: ClassVar[int] = 2

    @staticmethod
    def took_no_step(logs: Mapping[str, Any]) -> bool:
        return logs.get("outer_steps") == 0
    title = "ProMP"

    @staticmethod
    def config_problems(config: Mapping[str, Any]) -> list[str]:
        """What is wrong with a resolved configuration's keys taken together."""
        if config.get("outer-kl-backtracks") and config.get("outer-kl-limit") is None:
            return [f"outer-kl-backtracks: {config['outer-kl-backtracks']} shortens the steps that exceed "
                    "outer-kl-limit, which is not set: set outer-kl-limit too, or leave outer-kl-backtracks at 0"]
        return []

    def __init__(
        self,
        policy: Policy,
        fast_lr: float = DEFAULTS.fast_lr,
        num_steps: int = DEFAULTS.num_steps,
        device: str | torch.device = "cpu",
        averaging: str = DEFAULTS.loss_averaging,
        *,
        outer_steps: int = DEFAULTS.outer_steps,
        outer_lr: float = DEFAULTS.outer_lr,
        outer_clip: float = DEFAULTS.outer_clip,
        inner_kl_coef: float = DEFAULTS.inner_kl_coef,
        inner_kl_target: float = DEFAULTS.inner_kl_target,
        adaptive_inner_kl: bool = DEFAULTS.adaptive_inner_kl,
        outer_kl_limit: float | None = DEFAULTS.outer_kl_limit,
        outer_kl_backtracks: int = DEFAULTS.outer_kl_backtracks,
        gae_lambda: float = DEFAULTS.gae_lambda,
    ) -> None:
        self.check_arguments(outer_steps=outer_steps, outer_lr=outer_lr, outer_clip=outer_clip,
                             inner_kl_coef=inner_kl_coef, inner_kl_target=inner_kl_target,
                             adaptive_inner_kl=adaptive_inner_kl, outer_kl_limit=outer_kl_limit,
                             outer_kl_backtracks=outer_kl_backtracks)
        if outer_kl_backtracks and outer_kl_limit is None:
            raise ValueError(f"outer_kl_backtracks={outer_kl_backtracks} shortens steps that exceed outer_kl_limit, "
                             "which is not set: set outer-kl-limit too, or leave outer-kl-backtracks at 0")
        if not (isinstance(inner_kl_coef, (int, float)) and math.isfinite(inner_kl_coef) and inner_kl_coef >= 0):
            raise ValueError(f"inner_kl_coef must be a finite number >= 0, got {inner_kl_coef!r}")
        self._setup(policy, device, fast_lr, num_steps, averaging, gae_lambda, objective="lvc")
        self.outer_steps = outer_steps
        self.outer_clip = float(outer_clip)
        self.inner_kl_target = float(inner_kl_target)
        self.adaptive_inner_kl = bool(adaptive_inner_kl)
        self.outer_kl_limit = None if outer_kl_limit is None else float(outer_kl_limit)
        self.outer_kl_backtracks = outer_kl_backtracks
        #: The KL penalty's weight of each inner step (adapted after each iteration with ``adaptive_inner_kl``).
        self.inner_kl_coefs = [float(inner_kl_coef)] * num_steps
        self.optimizer = torch.optim.Adam([p for _, p in meta_parameters(self.policy)], lr=float(outer_lr))
        self.num_updates = 0

    # ------------------------------------------------------------ adaptation
    def _theta(self, num_tasks: int) -> Params:
        return expand_params(OrderedDict(meta_parameters(self.policy)), num_tasks)

    def _distribution(self, batch: TaskBatch, params: Params) -> Distribution:
        return self.policy(_flat_observations(batch.observations, 2), params=params)

    def _behaviour(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes | None) -> list[Params]:
        """The parameters that sampled each inner step's episodes, then the valid ones, stacked ``[K, ...]``.

        They are this learner's own adaptation from the current parameters,
        reached by the sampler's function (:meth:`InnerLoop.sampling_step`); where
        the episodes record theirs, those must be the same bits.
        """
        num_tasks = self.check_episodes(train_episodes, valid_episodes)
        names = [name for name, _ in meta_parameters(self.policy)]
        chain = [OrderedDict((name, p.detach()) for name, p in self._theta(num_tasks).items())]
        for episodes in train_episodes:
            chain.append(self.inner_loop.sampling_step(self.policy, episodes, chain[-1], self.device))
        for i, episodes in enumerate([*train_episodes, *([] if valid_episodes is None else [valid_episodes])]):
            recorded = recorded_params(episodes, names)
            if recorded is None:
                continue
            what = "valid_episodes" if i == self.num_steps else f"train_episodes[{i}]"
            remedy = ("Sample new episodes after every step(): each batch serves one update." if i == 0 else
                      f"Sample them with this learner's inner loop, {self.inner_loop} "
                      "(learner.sample(sampler, tasks), or sample_adapt_sample(sampler, tasks, "
                      "inner_loop=learner.inner_loop)), and with the current policy.")
            check_same_params(chain[i], recorded, what, remedy)
        return chain

    def adapt(self, train_episodes: TrainEpisodes, first_order: bool | None = None) -> "OrderedDict[str, torch.Tensor]":
        """Every task's adapted parameters from the current ones, stacked ``[K, ...]`` (in their graph
        unless ``first_order``), each LVC step weighed against the parameters that sampled its episodes."""
        batches = [self.inner_loop.task_batch(step, self.device) for step in train_episodes]
        chain = self._behaviour(train_episodes, None)
        old = [self._distribution(batch, chain[i]).log_prob(batch.actions).detach() for i, batch in enumerate(batches)]
        return self.inner_loop.adapt(self.policy, batches, self._theta(batches[0].num_tasks), bool(first_order), old)

    # ------------------------------------------------------------- meta-step
    def step(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes) -> StepLogs:
        """One ProMP meta-update: ``outer_steps`` Adam steps on the episodes of one batch of tasks.

        The episodes must come from the current policy through this learner's
        inner loop (``learner.sample(sampler, tasks)``);
        others are refused (:class:`~maml_rl.metalearners.StaleEpisodesError`),
        as are evaluation episodes of mean actions.

        :return: ``loss_before`` and ``loss_after`` (the clipped surrogate, mean over tasks, at the
            first and after the last Adam step), ``inner_kl`` (mean over inner steps of the KL from
            the sampling policies, after the update) and ``inner_kl_coef`` (the mean weight it had),
            ``outer_kl`` (KL of the adapted policies from those that sampled the valid episodes, after
            the update), ``clip_fraction`` (the weighted share of valid steps whose ratio left
            ``[1 - clip, 1 + clip]`` at the last Adam step taken), ``outer_steps`` (the Adam steps
            taken: fewer than ``outer_steps`` when ``outer_kl_limit`` stopped them, a shortened step
            counted), ``outer_step_scale`` (the share of the last step's move kept: 1, or ``0.5 ** j``
            after ``j`` backtracks, or 0 when it was undone) and ``time_update``.
        """
        started = time.perf_counter()
        batches = [self.inner_loop.task_batch(step, self.device) for step in train_episodes]
        valid = self.inner_loop.task_batch(valid_episodes, self.device)
        chain = self._behaviour(train_episodes, valid_episodes)
        with torch.no_grad():
            old_pis = [detach_distribution(self._distribution(batch, chain[i])) for i, batch in enumerate(batches)]
            old_log_probs = [pi.log_prob(batch.actions) for pi, batch in zip(old_pis, batches)]
            old_valid = detach_distribution(self._distribution(valid, chain[-1]))
            old_valid_log_probs = old_valid.log_prob(valid.actions)

        def objective() -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], Distribution, torch.Tensor]:
            params = self._theta(valid.num_tasks)
            kls = []
            for i, batch in enumerate(batches):
                kls.append(mean_kl(old_pis[i], self._distribution(batch, params), batch).mean())
                params = inner_step(self.policy, batch, params, self.fast_lr, False, "lvc", old_log_probs[i])
            pi = self._distribution(valid, params)
            log_ratio = pi.log_prob(valid.actions) - old_valid_log_probs
            surrogate = clipped_surrogate_loss(log_ratio, valid.advantages, valid.weights, self.outer_clip).mean()
            penalty = torch.stack([coef * kl for coef, kl in zip(self.inner_kl_coefs, kls)]).mean()
            return surrogate + penalty, surrogate, kls, pi, log_ratio

        parameters = [p for _, p in meta_parameters(self.policy)]
        total, surrogate, kls, pi, log_ratio = objective()
        loss_before = surrogate.item()
        self.check_finite(total.item(), "ProMP's objective")
        # The ratios before the last Adam step taken (the start's if none was), for the clip fraction.
        last_step_ratios, steps_taken, scale = log_ratio.detach(), 0, 1.0
        while steps_taken < self.outer_steps:
            ratios = log_ratio.detach()
            if self.outer_kl_limit is not None:
                undo = ([p.detach().clone() for p in parameters], copy.deepcopy(self.optimizer.state_dict()))
                kept = (surrogate.detach(), [kl.detach() for kl in kls], detach_distribution(pi))
            self.optimizer.zero_grad(set_to_none=True)
            total.backward()
            self.optimizer.step()
            total, surrogate, kls, pi, log_ratio = objective()
            if (self.outer_kl_limit is not None
                    and mean_kl(old_valid, pi, valid).mean().item() > self.outer_kl_limit):
                # This step moved the adapted policies too far: a shorter one along it, or none, and stop.
                shorter = self._backtrack(parameters, undo[0], objective, old_valid, valid)
                if shorter is None:
                    with torch.no_grad():
                        for p, value in zip(parameters, undo[0]):
                            p.copy_(value)
                    self.optimizer.load_state_dict(undo[1])
                    surrogate, kls, pi = kept
                    scale = 0.0
                else:
                    scale, (total, surrogate, kls, pi, log_ratio) = shorter
                    last_step_ratios = ratios
                    steps_taken += 1
                break
            last_step_ratios = ratios
            steps_taken += 1
        clipped = ((last_step_ratios.exp() - 1).abs() > self.outer_clip).to(valid.weights.dtype)
        clip_fraction = (clipped * valid.weights).sum(-1).mean().item()

        inner_kls = [kl.item() for kl in kls]
        coef_used = sum(self.inner_kl_coefs) / len(self.inner_kl_coefs)
        if self.adaptive_inner_kl:
            self.inner_kl_coefs = [adapt_kl_coefficient(coef, kl, self.inner_kl_target)
                                   for coef, kl in zip(self.inner_kl_coefs, inner_kls)]
        self.num_updates += 1
        return {
            "loss_before": loss_before,
            "loss_after": surrogate.item(),
            "inner_kl": sum(inner_kls) / len(inner_kls),
            "inner_kl_coef": coef_used,
            "outer_kl": mean_kl(old_valid, pi, valid).mean().item(),
            "clip_fraction": clip_fraction,
            "outer_steps": steps_taken,
            "outer_step_scale": scale,
            "time_update": time.perf_counter() - started,
        }

    def _backtrack(self, parameters: list[torch.Tensor], start: list[torch.Tensor], objective, old_valid, valid):
        """Halve the move from ``start`` up to ``outer_kl_backtracks`` times; the first within the limit as
        ``(scale, objective())`` (the parameters left there), or ``None`` (the parameters left anywhere)."""
        with torch.no_grad():
            moves = [p.detach() - s for p, s in zip(parameters, start)]
        for j in range(1, self.outer_kl_backtracks + 1):
            scale = 0.5 ** j
            with torch.no_grad():
                for p, s, move in zip(parameters, start, moves):
                    p.copy_(s + scale * move)
            out = objective()
            if mean_kl(old_valid, out[3], valid).mean().item() <= self.outer_kl_limit:
                return scale, out
        return None

    # ---------------------------------------------------------------- resume
    def state_dict(self) -> dict:
        """Adam's moments, the KL coefficients and the update count: what ``--resume`` needs to continue exactly."""
        return {"optimizer": self.optimizer.state_dict(), "inner_kl_coefs": list(self.inner_kl_coefs),
                "num_updates": self.num_updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        coefs = [float(c) for c in state["inner_kl_coefs"]]
        if len(coefs) != self.num_steps:
            raise ValueError(f"the state has KL coefficients for {len(coefs)} inner step(s), this learner has "
                             f"{self.num_steps}")
        self.optimizer.load_state_dict(state["optimizer"])
        self.inner_kl_coefs = coefs
        self.num_updates = int(state["num_updates"])
