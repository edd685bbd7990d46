"""Time-major, zero-padded batches of episodes from one task."""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from maml_rl.config.hyperparameters import DEFAULTS
from maml_rl.utils.torch_utils import discounted_cumsum, length_mask, mean_weights, weighted_normalize

ArrayLike = torch.Tensor | np.ndarray

#: How losses and advantage normalisation weigh the valid steps of a task; the first is the default.
LOSS_AVERAGING = ("step", "episode")


class BatchEpisodes:
    """A batch of ``B`` episodes of one task, stored time-major and zero-padded.

    :param observations: ``[T, B, *obs_shape]`` observations.
    :param actions: ``[T, B, *act_shape]`` actions (float for continuous, integer ``[T, B]`` for discrete).
    :param rewards: ``[T, B]`` rewards.
    :param lengths: ``[B]`` episode lengths, each in ``[1, T]``.
    :param task: the task the episodes come from (kept for logging).
    :param gamma: discount factor used for returns and advantages.
    :param device: device the tensors live on.
    :param behaviour_params: the parameters of the policy that sampled the
        episodes (as SB3's rollout buffer keeps the behaviour log-probabilities):
        the meta-learner builds its importance ratios and KL from them, and
        checks them against its own adaptation. ``None`` for episodes from
        elsewhere, which are then taken to be on-policy.
    :param inner_loop: the :class:`~maml_rl.metalearners.gradient.adaptation.InnerLoop` that produced
        ``behaviour_params`` (for error messages), if any.
    :param infos: per-step values of chosen keys of the env's ``info``, each
        ``[T, B]`` (zero past an episode's end), e.g. ``{"success": ...}``.

    :ivar actions_from: ``"sample"`` (drawn from the policy), or ``"mean"``
        for evaluation episodes of the policy's most likely actions, which
        policy-gradient steps refuse (:meth:`TaskBatch.from_episodes`).
    """

    actions_from: str = "sample"

    def __init__(
        self,
        observations: ArrayLike,
        actions: ArrayLike,
        rewards: ArrayLike,
        lengths: ArrayLike | Sequence[int],
        *,
        task: Any = None,
        gamma: float = DEFAULTS.gamma,
        device: str | torch.device = "cpu",
        behaviour_params: Mapping[str, torch.Tensor] | None = None,
        inner_loop: Any = None,
        infos: Mapping[str, ArrayLike] | None = None,
    ) -> None:
        self.task = task
        self.gamma = float(gamma)
        self.device = torch.device(device)
        self.behaviour_params = None if behaviour_params is None else dict(behaviour_params)
        self.inner_loop = inner_loop

        self._observations = torch.as_tensor(observations, dtype=torch.float32, device=self.device)
        actions = torch.as_tensor(actions, device=self.device)
        action_dtype = torch.float32 if actions.is_floating_point() else torch.int64
        self._actions = actions.to(action_dtype)
        self._rewards = torch.as_tensor(rewards, dtype=torch.float32, device=self.device)
        self._lengths = torch.as_tensor(lengths, dtype=torch.int64, device=self.device)
        self.infos = {key: torch.as_tensor(value, dtype=torch.float64, device=self.device).contiguous()
                      for key, value in (infos or {}).items()}
        self._check_shapes()

        self._mask: torch.Tensor | None = None
        self._returns: torch.Tensor | None = None
        self._advantages: torch.Tensor | None = None

    def _check_shapes(self) -> None:
        if self._rewards.dim() != 2:
            raise ValueError(f"rewards must be [T, B], got shape {tuple(self._rewards.shape)}")
        horizon, batch_size = self._rewards.shape
        for name, tensor in (("observations", self._observations), ("actions", self._actions)):
            if tensor.dim() < 2 or tuple(tensor.shape[:2]) != (horizon, batch_size):
                raise ValueError(
                    f"{name} must start with [T, B] = [{horizon}, {batch_size}], got shape {tuple(tensor.shape)}"
                )
        for key, tensor in self.infos.items():
            if tuple(tensor.shape) != (horizon, batch_size):
                raise ValueError(f"infos[{key!r}] must be [T, B] = [{horizon}, {batch_size}], got shape {tuple(tensor.shape)}")
        if tuple(self._lengths.shape) != (batch_size,):
            raise ValueError(f"lengths must be [B] = [{batch_size}], got shape {tuple(self._lengths.shape)}")
        if batch_size > 0 and (self._lengths.min() < 1 or self._lengths.max() > horizon):
            raise ValueError(f"episode lengths must lie in [1, T={horizon}], got {self._lengths.tolist()}")

    # ------------------------------------------------------------------ data
    @property
    def observations(self) -> torch.Tensor:
        return self._observations

    @property
    def actions(self) -> torch.Tensor:
        return self._actions

    @property
    def rewards(self) -> torch.Tensor:
        return self._rewards

    @property
    def lengths(self) -> torch.Tensor:
        return self._lengths

    @property
    def observation_shape(self) -> torch.Size:
        return self._observations.shape[2:]

    @property
    def action_shape(self) -> torch.Size:
        return self._actions.shape[2:]

    @property
    def batch_size(self) -> int:
        return self._rewards.shape[1]

    def __len__(self) -> int:
        return self._rewards.shape[0]

    def success(self, key: str = "success") -> torch.Tensor:
        """``[B]`` bool: whether each episode succeeded, i.e. ``infos[key]`` was
        non-zero at some step of it (Meta-World's definition)."""
        if key not in self.infos:
            carried = sorted(self.infos) or "none"
            raise KeyError(f"these episodes carry no info {key!r} (carried: {carried}); "
                           f"sample them with MultiTaskSampler(..., info_keys=({key!r},))")
        return ((self.infos[key] != 0) & (self.mask > 0)).any(dim=0)

    # --------------------------------------------------------- derived data
    @property
    def mask(self) -> torch.Tensor:
        """``[T, B]`` float mask, 1 where ``t < length``."""
        if self._mask is None:
            self._mask = length_mask(self._lengths, len(self))
        return self._mask

    @property
    def returns(self) -> torch.Tensor:
        """``[T, B]`` discounted reward-to-go within each episode (0 on padding)."""
        if self._returns is None:
            # Masking first keeps rewards written past an episode's end from leaking in.
            self._returns = discounted_cumsum(self._rewards * self.mask, self.gamma) * self.mask
        return self._returns

    @property
    def total_rewards(self) -> torch.Tensor:
        """``[B]`` undiscounted sum of rewards of each episode."""
        return (self._rewards * self.mask).sum(0)

    @property
    def advantages(self) -> torch.Tensor:
        """``[T, B]`` advantages set by :meth:`compute_advantages`."""
        if self._advantages is None:
            raise RuntimeError(
                "advantages are not available yet: call episodes.compute_advantages(baseline) first"
            )
        return self._advantages

    @advantages.setter
    def advantages(self, value: torch.Tensor) -> None:
        value = torch.as_tensor(value, dtype=torch.float32, device=self.device)
        if value.shape != self._rewards.shape:
            raise ValueError(f"advantages must have shape {tuple(self._rewards.shape)}, got {tuple(value.shape)}")
        self._advantages = value

    @property
    def has_advantages(self) -> bool:
        return self._advantages is not None

    def compute_advantages(
        self,
        baseline: Callable[["BatchEpisodes"], torch.Tensor],
        gae_lambda: float = 1.0,
        normalize: bool = True,
        averaging: str = LOSS_AVERAGING[0],
    ) -> torch.Tensor:
        """Generalised advantage estimation with ``baseline`` as value function.

        :param baseline: callable mapping these episodes to ``[T, B]`` values (e.g. a fitted
            :class:`~maml_rl.data.baseline.LinearFeatureBaseline`).
        :param gae_lambda: GAE lambda (1 gives Monte-Carlo returns minus the baseline).
        :param normalize: centre and scale the advantages over the valid steps.
        :param averaging: ``"step"``: every valid step weighs the same in the mean and
            variance (the MAML paper's code); ``"episode"``: every episode does
            (pytorch-maml-rl). See :func:`loss_weights`.
        :return: the ``[T, B]`` advantages (also stored on the batch).
        """
        mask = self.mask
        with torch.no_grad():
            values = baseline(self).detach().to(torch.float32) * mask
        # A zero value after the last step: episodes end (or are cut) there.
        values = F.pad(values, (0, 0, 0, 1))
        deltas = (self._rewards * mask + self.gamma * values[1:] - values[:-1]) * mask
        advantages = discounted_cumsum(deltas, self.gamma * gae_lambda) * mask
        if normalize:
            advantages = self.normalize_advantages(advantages, averaging)
        self._advantages = advantages
        return advantages

    def normalize_advantages(self, advantages: torch.Tensor, averaging: str = LOSS_AVERAGING[0]) -> torch.Tensor:
        """``[T, B]`` advantages centred and scaled over the valid steps, as :meth:`compute_advantages` does
        with ``normalize=True`` (``averaging`` as there)."""
        return weighted_normalize(
            advantages, lengths=self._lengths, mask=self.mask, per_step=check_loss_averaging(averaging) == "step"
        )

    def to(self, device: str | torch.device) -> "BatchEpisodes":
        """Move every tensor to ``device`` (in place) and return ``self``."""
        device = torch.device(device)
        self.device = device
        for name in ("_observations", "_actions", "_rewards", "_lengths", "_mask", "_returns", "_advantages"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.to(device))
        if self.behaviour_params is not None:
            self.behaviour_params = {name: p.to(device) for name, p in self.behaviour_params.items()}
        self.infos = {key: value.to(device) for key, value in self.infos.items()}
        return self

    def __repr__(self) -> str:
        return (
            f"BatchEpisodes(T={len(self)}, B={self.batch_size}, obs_shape={tuple(self.observation_shape)}, "
            f"act_shape={tuple(self.action_shape)}, gamma={self.gamma}, task={self.task!r})"
        )




def check_loss_averaging(averaging: str) -> str:
    """Return ``averaging`` if it is one of :data:`LOSS_AVERAGING`, else raise ``ValueError``."""
    if averaging not in LOSS_AVERAGING:
        raise ValueError(f"loss averaging must be 'step' or 'episode', got {averaging!r}")
    return averaging


def loss_weights(mask: torch.Tensor, lengths: torch.Tensor, averaging: str = LOSS_AVERAGING[0]) -> torch.Tensor:
    """Weights over one task's steps that sum to 1, for losses ``(x * weights).sum()``.

    ``"step"``: every valid step weighs the same (the MAML paper's code).
    ``"episode"``: the mean of per-episode means (pytorch-maml-rl): a step of an
    episode that ends early weighs more than a step of a full-length one.

    :param mask: ``[T, *S, B]`` validity mask; the weights of each ``S`` index sum to 1.
    :param lengths: ``[*S, B]`` episode lengths.
    :param averaging: ``"step"`` or ``"episode"``.
    :return: tensor shaped like ``mask``.
    """
    return mean_weights(mask, lengths, per_step=check_loss_averaging(averaging) == "step", dim=(0, -1))


def _pad_time(tensor: torch.Tensor, horizon: int) -> torch.Tensor:
    if tensor.shape[0] == horizon:
        return tensor
    padding = tensor.new_zeros((horizon - tensor.shape[0], *tensor.shape[1:]))
    return torch.cat([tensor, padding], dim=0)


def stack_episodes(episodes_list: Sequence[BatchEpisodes]) -> dict[str, torch.Tensor]:
    """Stack the batches of ``K`` tasks along a new task axis.

    All batches must have the same number of episodes ``B``; shorter horizons are
    zero-padded to the longest one.

    :param episodes_list: one :class:`BatchEpisodes` per task.
    :return: dict with ``observations`` ``[T, K, B, *obs]``, ``actions`` ``[T, K, B, *act]``,
        ``rewards``, ``mask``, ``returns`` ``[T, K, B]``, ``lengths`` ``[K, B]`` and, when every
        batch has them, ``advantages`` ``[T, K, B]``.
    """
    if len(episodes_list) == 0:
        raise ValueError("stack_episodes needs at least one BatchEpisodes")
    batch_sizes = {episodes.batch_size for episodes in episodes_list}
    if len(batch_sizes) != 1:
        raise ValueError(f"all tasks must have the same number of episodes, got {sorted(batch_sizes)}")
    horizon = max(len(episodes) for episodes in episodes_list)

    def stack(get: Callable[[BatchEpisodes], torch.Tensor]) -> torch.Tensor:
        return torch.stack([_pad_time(get(episodes), horizon) for episodes in episodes_list], dim=1)

    out = {
        "observations": stack(lambda e: e.observations),
        "actions": stack(lambda e: e.actions),
        "rewards": stack(lambda e: e.rewards),
        "mask": stack(lambda e: e.mask),
        "returns": stack(lambda e: e.returns),
        "lengths": torch.stack([episodes.lengths for episodes in episodes_list], dim=0),
    }
    if all(episodes.has_advantages for episodes in episodes_list):
        out["advantages"] = stack(lambda e: e.advantages)
    return out


class TaskBatch(NamedTuple):
    """Valid data of ``K`` tasks laid out task-major and flat in time, for batched losses.

    ``M = T * B`` rows per task; ``weights`` come from :func:`loss_weights`, so
    that ``(x * weights).sum(-1)`` is, for each task, the mean of ``x`` over all
    its valid steps (``"step"``, the default, as in the MAML paper's code) or the
    mean of its per-episode means (``"episode"``, as in pytorch-maml-rl).
    """

    observations: torch.Tensor  # [K, M, *obs_shape]
    actions: torch.Tensor  # [K, M, *act_shape]
    advantages: torch.Tensor  # [K, M]
    weights: torch.Tensor  # [K, M]

    @property
    def num_tasks(self) -> int:
        return self.weights.shape[0]

    @classmethod
    def from_episodes(cls, episodes_list: Sequence[BatchEpisodes], averaging: str = LOSS_AVERAGING[0]) -> "TaskBatch":
        """Build from one :class:`BatchEpisodes` per task (advantages must be computed).

        :param episodes_list: the ``K`` tasks' batches (same ``B``; ``T`` padded to the longest).
        :param averaging: ``"step"`` or ``"episode"`` (:func:`loss_weights`).
        """
        deterministic = [k for k, episodes in enumerate(episodes_list) if episodes.actions_from != "sample"]
        if deterministic:
            raise ValueError(
                f"the episodes of task(s) {deterministic} hold the policy's most likely actions "
                "(sampled with actions='mean', for evaluation): a policy-gradient step needs episodes "
                "of sampled actions (actions='sample', the default)"
            )
        stacked = stack_episodes(episodes_list)
        if "advantages" not in stacked:
            raise RuntimeError("TaskBatch needs advantages: call compute_advantages(baseline) on every batch first")
        horizon, num_tasks, batch_size = stacked["mask"].shape

        def task_major(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.transpose(0, 1).reshape(num_tasks, horizon * batch_size, *tensor.shape[3:])

        weights = loss_weights(stacked["mask"], stacked["lengths"], averaging)
        return cls(
            observations=task_major(stacked["observations"]),
            actions=task_major(stacked["actions"]),
            advantages=task_major(stacked["advantages"]),
            weights=task_major(weights),
        )
