"""The policy on every slot of a rollout, under each task's parameters."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from torch.distributions import Categorical, Distribution, Independent, Normal

from maml_rl.policies.task_params import TaskParams

from ..errors import EnvOutputError, PolicyOutputError
from ..workers.buffers import BufferSpec
from .noise import actions_from_noise
from .request import RolloutRequest
from .torch_settings import rollout_torch_settings


def at_call_phase(x: torch.Tensor, first_task: int) -> torch.Tensor:
    """``x`` (``[K, B, ...]``, contiguous: tasks ``first_task ..`` of a call) where its first element would sit,
    modulo 64 bytes, in the whole call's tensor: a copy into a padded buffer, or ``x`` itself for the first task.

    MKL's product of a ``[B, d]`` block rounds differently depending on where the block starts within a
    cache line (measured: 39 inputs, 3 rows a task), so a group of tasks evaluated alone, as a Ray actor
    does, must start at the whole call's phase to get its bits."""
    per_task = x[0].numel() if len(x) else 0
    pad = (first_task * per_task) % (64 // x.element_size())
    if pad == 0:
        return x
    placed = torch.empty(pad + x.numel(), dtype=x.dtype, device=x.device)[pad:].view(x.shape)
    return placed.copy_(x)


def task_seed(seed: Optional[int], task: int) -> Optional[int]:
    """The fallback seed of one task's own policy call (``None``: no fallback)."""
    return None if seed is None else seed + task


def check_policy(policy, spec: BufferSpec, conditioning_size: int = 0) -> None:
    """Call ``policy`` once on one zero observation (followed by ``conditioning_size`` zeros) and refuse, with
    :class:`PolicyOutputError`, a distribution that does not fit the action
    space (a categorical policy over more categories than the space has, a
    Normal of another action size), before any worker starts. The global
    torch random state is left as it was."""
    device = next((p.device for p in policy.parameters()), torch.device("cpu"))
    shape = (int(np.prod(spec.observation_shape)) + conditioning_size,) if conditioning_size else spec.observation_shape
    observation = torch.zeros((1, *shape), device=device)
    name = type(policy).__name__
    with torch.no_grad(), torch.random.fork_rng(devices=[]), rollout_torch_settings():
        try:
            distribution = policy(observation)
        except Exception as exc:
            raise TypeError(f"the policy {name} failed when called on one observation of shape "
                            f"{tuple(observation.shape)} (a batch of one): {exc!r}. The sampler calls "
                            "policy(observations [N, *obs_shape]) -> Distribution") from exc
    if not isinstance(distribution, Distribution):
        raise TypeError(f"the policy {name} returned {type(distribution).__name__}, not a torch Distribution")
    base = distribution.base_dist if isinstance(distribution, Independent) else distribution
    if spec.discrete and not isinstance(base, Categorical):
        raise PolicyOutputError(f"the policy {name} returns a {type(base).__name__} for a Discrete action space; "
                                "it needs a Categorical (e.g. maml_rl.policies.CategoricalMLPPolicy)")
    if spec.discrete and base.probs.shape[-1] != spec.num_categories:
        raise PolicyOutputError(
            f"the policy {name} returns a Categorical over {base.probs.shape[-1]} categories, but the action space "
            f"is Discrete({spec.num_categories}): build it with {spec.num_categories} outputs"
        )
    if not spec.discrete and isinstance(base, Normal) and (
            base.loc.numel() != int(np.prod(spec.action_shape))
            or tuple(base.loc.shape[base.loc.dim() - len(spec.action_shape):]) != spec.action_shape):
        raise PolicyOutputError(
            f"the policy {name} returns a Normal of mean shape {tuple(base.loc.shape)} for one observation, but the "
            f"action space needs actions of shape {spec.action_shape}: build it with {spec.action_shape} outputs"
        )


class ActionFunction:
    """The policy, evaluated on every slot under each task's parameters, its output checked.

    A task's actions never depend on which other tasks share the call, nor on
    the backend, the workers or the mode, because the rows of every policy
    call are fixed by the request alone (torch computes a row with other
    arithmetic depending on how many rows share the product):

    * a policy that takes stacked parameters (``supports_batched_params``) is
      evaluated with one ``[K, B]`` batched product, each task its own matrix
      product of the same shape, even when all tasks share parameters;
    * any other policy is called once per task, on that task's ``B`` rows,
      with that task's parameters (``params=`` omitted for the policy's own).

    What the policy returns is checked before any env sees it: the
    distribution's shape against the action space (rows, action size, number
    of categories), and the actions of running slots for finiteness
    (:meth:`check_actions`); a violation raises :class:`PolicyOutputError`.

    :param request: the tasks and their parameters, the action mode (with
        ``"mean"`` the noise is unused) and the index of the first task in
        the whole call (for the slot numbers and the per-task fallback seeds).
    :param noise: ``[T, S, ...]`` noise of these tasks' slots.
    :param fallback: seed of ``sample()`` for other distributions; ``None`` refuses them
        (partial mode).
    :param spec: the action shape and number of categories the actions must have.
    :param env_name: for the message when the policy's input, the env's observation, is not finite.
    """

    def __init__(self, policy, request: RolloutRequest, device, noise: torch.Tensor, fallback: Optional[int],
                 spec: BufferSpec, env_name: str = "the env"):
        params: TaskParams = request.params
        self.policy = policy
        self.request = request
        self.spec = spec
        self.env_name = env_name
        self.mode = request.actions
        self.device = torch.device(device)
        self.noise = noise
        self.fallback_seed = fallback
        self.first_task = request.first_task
        self.num_tasks, self.batch_size = params.num_tasks, request.batch_size
        # Each slot's conditioning input, appended to its observation (the same rows in every call).
        self.conditioning = None if request.conditioning is None else torch.tensor(
            request.conditioning.reshape(self.num_tasks * self.batch_size, -1), dtype=torch.float32,
            device=self.device)
        # Stacked per-task parameters in one batched call, or a loop over tasks.
        self.batched = params.batched(policy) if getattr(policy, "supports_batched_params", False) else None
        # Each task's parameters (None: the policy's own), looked up once rather than at every step.
        self.per_task = [params.row_of(k) for k in range(self.num_tasks)]

    @torch.no_grad()
    def __call__(self, observations: np.ndarray, noise: torch.Tensor, t: int, times=None,
                 stepping: Optional[np.ndarray] = None) -> np.ndarray:
        """Actions ``[S, *act]`` for ``observations`` ``[S, *obs]`` and ``noise`` ``[S, ...]``
        (``times`` and ``stepping``, each slot's step and whether it steps now,
        matter to recurrent policies only)."""
        self._observations = observations
        # Always a fresh (aligned) tensor: with MKL, a linear layer's rounding depends on
        # where its input starts in memory, and a row of the shared buffer, a partial-mode
        # gather or a Ray actor's group each start elsewhere (a group: at_call_phase).
        obs = torch.tensor(observations, dtype=torch.float32, device=self.device)
        if self.conditioning is not None:
            obs = torch.cat([obs.reshape(len(obs), -1), self.conditioning], dim=1)
        seed = None if self.fallback_seed is None else self.fallback_seed + t
        if self.batched is not None:
            obs = at_call_phase(obs.view(self.num_tasks, self.batch_size, *obs.shape[1:]), self.first_task)
            distribution = self.policy(obs, params=self.batched)
            self._check_shape(distribution, len(observations), t, None)
            return self._shaped(actions_from_noise(distribution, noise, seed, self.mode), len(observations)).numpy()
        B = self.batch_size
        parts = []
        for k, p in enumerate(self.per_task):
            rows = obs[k * B:(k + 1) * B].clone() if k else obs[:B]  # each task's rows aligned alike
            distribution = self.policy(rows) if p is None else self.policy(rows, params=p)
            self._check_shape(distribution, B, t, k)
            parts.append(self._shaped(actions_from_noise(distribution, noise[k * B:(k + 1) * B],
                                                         task_seed(seed, self.first_task + k), self.mode), B))
        return torch.cat(parts).numpy()

    def recorded(self) -> dict:
        """What the policy side recorded for the trajectories (nothing, for a feed-forward policy)."""
        return {}

    def check_actions(self, actions: np.ndarray, running: np.ndarray, step_of_row) -> None:
        """Refuse non-finite actions (and categorical rows without a distribution)
        of the running slots (``running``: a bool mask over the rows) before
        any env is stepped with them. ``step_of_row(row)``: the row's time step."""
        if self.spec.discrete:
            bad = (actions < 0) & running
        else:
            bad = ~np.isfinite(actions).reshape(len(actions), -1).all(1) & running
        if not bad.any():
            return
        row = int(np.argmax(bad))
        observation = self._observations[row]
        # Overflow here is the point (a float64 beyond float32's range is inf to the policy), not a warning.
        with np.errstate(over="ignore"):
            beyond = np.issubdtype(observation.dtype, np.floating) and not np.isfinite(observation.astype(np.float32)).all()
        if beyond:
            # The env's fault, not the policy's: say so before the env gets the action.
            t = step_of_row(row)
            where = "from reset()" if t == 0 else f"from step() {t - 1}"
            raise EnvOutputError(
                f"{self.env_name} returned a non-finite observation {observation.tolist()!r} {where} "
                f"{self._where(row, 'of')}. Check the env; a value beyond the range of float32 (the dtype of "
                "episodes and of the policy's input) also becomes inf."
            )
        what = ("probabilities that are not a distribution (non-finite, negative or all zero)" if self.spec.discrete
                else f"the non-finite action {actions[row].tolist()}")
        raise PolicyOutputError(
            f"{self._policy_name()} returned {what} at step {step_of_row(row)} {self._where(row)}, "
            f"in {int(bad.sum())} running slot(s) of that step; no env was stepped with it. Check the policy "
            "(its parameters after adaptation, its inputs' scale)."
        )

    def _check_shape(self, distribution, rows: int, t: int, task: Optional[int]) -> None:
        spec = self.spec
        base = distribution.base_dist if isinstance(distribution, Independent) else distribution
        if spec.discrete:
            ok = isinstance(base, Categorical) and base.probs.shape[-1] == spec.num_categories \
                and base.probs[..., 0].numel() == rows
        elif isinstance(base, Normal):
            loc = base.loc
            ok = loc.numel() == rows * math.prod(spec.action_shape) and \
                tuple(loc.shape[loc.dim() - len(spec.action_shape):]) == spec.action_shape
        else:
            return  # checked after sampling, in _shaped
        if ok:  # this runs at every step: the message is built only on failure
            return
        if spec.discrete:
            got = (f"a Categorical over {base.probs.shape[-1]} categories with batch shape "
                   f"{tuple(base.probs.shape[:-1])}" if isinstance(base, Categorical)
                   else f"a {type(distribution).__name__}")
            expected = f"a Categorical over {spec.num_categories} categories for {rows} rows"
        else:
            got = f"a Normal of mean shape {tuple(base.loc.shape)}"
            expected = f"a mean of shape {(rows, *spec.action_shape)} (rows x action shape)"
        where = (f"for task {task} ({self.request.tasks[task]!r})" if task is not None
                 else f"for tasks {self.first_task}..{self.first_task + self.num_tasks - 1} stacked")
        raise PolicyOutputError(
            f"{self._policy_name()} returned {got} at step {t} {where}; the action space needs {expected}. "
            "Build the policy for this env's spaces (e.g. maml_rl.policies.get_policy_for_env)."
        )

    def _shaped(self, actions: torch.Tensor, rows: int) -> torch.Tensor:
        """``actions`` as ``[rows, *action_shape]``, refusing a sample of another size."""
        shape = self.spec.action_shape
        if actions.numel() != rows * math.prod(shape):
            raise PolicyOutputError(
                f"{self._policy_name()} returned {tuple(actions.shape)} actions for {rows} rows; the action space "
                f"needs {rows} rows of shape {shape}"
            )
        return actions.reshape(rows, *shape)

    def _where(self, row: int, preposition: str = "in") -> str:
        task = row // self.batch_size
        slot = self.first_task * self.batch_size + row
        return f"{preposition} env slot {slot} (task {self.first_task + task}: {self.request.tasks[task]!r})"

    def _policy_name(self) -> str:
        return f"the policy {type(self.policy).__name__}"
