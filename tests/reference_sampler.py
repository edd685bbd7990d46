"""A deliberately naive MultiTaskSampler: one env per slot, plain loops, no buffers.

It re-derives the sampler's documented scheme on its own (it calls nothing of
``maml_rl.samplers``), so that ``tests/test_sampler_reference.py`` can demand
bit-for-bit equality from the real sampler:

* rollout number ``call`` (0, 1, 2, ... per sampler) seeds slot ``j``'s env
  with ``SeedSequence([seed, call]).generate_state(num_slots)[j]``;
* its action noise comes from a ``torch.Generator`` seeded with
  ``SeedSequence([seed, call, 1]).generate_state(1)[0]``, drawn in one go as
  ``randn((horizon, num_slots, *action_shape))`` (Box actions) or
  ``rand((horizon, num_slots))`` (Discrete), ``horizon`` being the sampler's,
  not the rollout's;
* Normal policies act ``loc + scale * noise[t, j]``, Categorical ones invert
  the CDF: ``(u >= cumsum(probs)).sum()``, at most ``n - 1``;
* slot ``j`` runs one episode of task ``j // batch_size`` (``reset_task``, then
  ``reset(seed=...)``), until terminated, truncated or the horizon;
* each task's batch is ``[T, B, ...]``, ``T`` the longest episode of the whole
  rollout, zero past each episode's end, with the episodes' ``lengths``.

The policy, :class:`ElementwisePolicy`, computes every output element from
one observation element with exactly rounded arithmetic (and, for discrete
actions, torch's row-wise softmax over the categories), so evaluating it on
one observation or on all slots at once gives the same bits: any difference
from the sampler is a sampler bug, not rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import gymnasium as gym
import numpy as np
import torch
from torch.distributions import Categorical, Independent, Normal

Params = Dict[str, torch.Tensor]


class ElementwisePolicy(torch.nn.Module):
    """``x = a * obs[..., :d] + b`` elementwise; Box actions get
    ``Normal(x / (1 + |x|), |std| + 0.05)`` (``d`` = action size), Discrete
    ones ``Categorical(logits=x)`` (``d`` = number of actions).

    ``params`` may be unstacked (``a`` of shape ``[d]``, observations
    ``[..., obs]``) or stacked per task (``a`` of shape ``[K, d]``,
    observations ``[K, B, obs]``), as the sampler's batched path passes them.
    """

    supports_batched_params = True

    def __init__(self, observation_size: int, action_space: gym.Space):
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        size = int(action_space.n) if self.discrete else int(np.prod(action_space.shape))
        if size > observation_size:
            raise ValueError("ElementwisePolicy reads one observation element per output element")
        self.size = size
        steps = torch.arange(size, dtype=torch.float32)
        self.a = torch.nn.Parameter(0.9 - 0.35 * steps)
        self.b = torch.nn.Parameter(0.1 * steps - 0.2)
        if not self.discrete:
            self.std = torch.nn.Parameter(0.4 + 0.1 * steps)

    def forward(self, observations: torch.Tensor, params: Optional[Params] = None):
        if params is None:
            params = dict(self.named_parameters())
        a, b = params["a"], params["b"]
        stacked = a.dim() == 2
        if stacked:  # [K, d] against observations [K, B, obs]
            a, b = a.unsqueeze(-2), b.unsqueeze(-2)
        x = a * observations[..., : self.size] + b
        if self.discrete:
            return Categorical(logits=x)
        std = params["std"].unsqueeze(-2) if stacked else params["std"]
        loc = x / (1 + x.abs())
        return Independent(Normal(loc, (std.abs() + 0.05).expand_as(loc)), 1)


class UnbatchedElementwisePolicy(ElementwisePolicy):
    """The same policy, declared unable to take stacked parameters: the
    sampler then evaluates it task by task instead of in one batched call."""

    supports_batched_params = False


def task_params(policy: ElementwisePolicy, k: int) -> Params:
    """A parameter dict of the policy's names, far from those of ``k - 1`` and
    ``k + 1`` (flipped slopes, another favoured output), so that parameters
    given to the wrong task change the sampled actions, discrete ones too."""
    own = {name: p.detach() for name, p in policy.named_parameters()}
    favoured = (torch.arange(policy.size) == k % policy.size).float()
    params = {
        "a": own["a"] * (1 + 0.5 * (k % 3)) * (-1) ** k,
        "b": own["b"] + 2.0 * favoured - 0.5,
    }
    if "std" in own:
        params["std"] = own["std"] * (1 + 0.3 * (k % 4))
    return params


@dataclass
class ReferenceBatch:
    observations: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    lengths: torch.Tensor
    task: Any


@dataclass
class _Episode:
    observations: List[np.ndarray]
    actions: List[Union[np.ndarray, int]]
    rewards: List[np.float32]


def _noise(horizon: int, num_slots: int, action_space: gym.Space, seed: int, call: int) -> torch.Tensor:
    generator = torch.Generator()
    generator.manual_seed(int(np.random.SeedSequence([seed, call, 1]).generate_state(1)[0]))
    if isinstance(action_space, gym.spaces.Discrete):
        return torch.rand((horizon, num_slots), generator=generator)
    return torch.randn((horizon, num_slots, *action_space.shape), generator=generator)


@torch.no_grad()
def _action(policy: torch.nn.Module, observation: np.ndarray, params: Optional[Params],
            noise: torch.Tensor, action_space: gym.Space):
    obs = torch.tensor(observation, dtype=torch.float32)
    distribution = policy(obs) if params is None else policy(obs, params=params)
    if isinstance(action_space, gym.spaces.Discrete):
        cdf = distribution.probs.cumsum(-1)
        u = noise.item()
        action = 0
        for c in range(cdf.shape[-1]):
            if u >= cdf[c].item():
                action += 1
        return min(action, int(action_space.n) - 1)
    normal = distribution.base_dist
    return (normal.loc + normal.scale * noise).numpy().astype(np.float32)


def reference_rollout(
    env_fn: Callable[[], gym.Env],
    policy: torch.nn.Module,
    tasks: Sequence[Any],
    params: Union[None, Params, Sequence[Optional[Params]]],
    *,
    batch_size: int,
    seed: int,
    call: int,
    horizon: int,
) -> List[ReferenceBatch]:
    """What ``MultiTaskSampler(..., batch_size, seed=seed).rollout(tasks, params)``
    must return as its rollout number ``call``, ``horizon`` being the sampler's."""
    tasks = list(tasks)
    per_task = [params] * len(tasks) if params is None or isinstance(params, dict) else list(params)
    assert len(per_task) == len(tasks)
    num_slots = len(tasks) * batch_size
    seeds = np.random.SeedSequence([seed, call]).generate_state(num_slots)
    probe = env_fn()
    action_space, observation_space = probe.action_space, probe.observation_space
    probe.close()
    noise = _noise(horizon, num_slots, action_space, seed, call)

    episodes: List[_Episode] = []
    for j in range(num_slots):
        task, params_j = tasks[j // batch_size], per_task[j // batch_size]
        env = env_fn()
        env.unwrapped.reset_task(task)
        observation, _ = env.reset(seed=int(seeds[j]))
        episode = _Episode([], [], [])
        for t in range(horizon):
            observation = np.array(observation, dtype=observation_space.dtype)
            action = _action(policy, observation, params_j, noise[t, j], action_space)
            episode.observations.append(observation)
            episode.actions.append(action)
            observation, reward, terminated, truncated, _ = env.step(action)
            episode.rewards.append(np.float32(reward))
            if terminated or truncated:
                break
        env.close()
        episodes.append(episode)

    T = max(len(e.rewards) for e in episodes)
    discrete = isinstance(action_space, gym.spaces.Discrete)
    batches = []
    for k, task in enumerate(tasks):
        own = episodes[k * batch_size:(k + 1) * batch_size]
        observations = torch.zeros((T, batch_size, *observation_space.shape), dtype=torch.float32)
        actions = torch.zeros((T, batch_size) if discrete else (T, batch_size, *action_space.shape),
                              dtype=torch.int64 if discrete else torch.float32)
        rewards = torch.zeros((T, batch_size), dtype=torch.float32)
        lengths = torch.zeros(batch_size, dtype=torch.int64)
        for i, episode in enumerate(own):
            lengths[i] = len(episode.rewards)
            for t in range(len(episode.rewards)):
                observations[t, i] = torch.from_numpy(episode.observations[t].astype(np.float32))
                actions[t, i] = torch.as_tensor(episode.actions[t])
                rewards[t, i] = torch.from_numpy(np.array(episode.rewards[t]))
        batches.append(ReferenceBatch(observations, actions, rewards, lengths, task))
    return batches
