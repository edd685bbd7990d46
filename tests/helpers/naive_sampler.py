"""A deliberately naive reference for MultiTaskSampler: one env per slot, plain loops.

It derives seeds and action noise from the sampler's documented scheme
(docs/sampler.md, the reproducibility contract), not from the sampler's code: for the ``call``-th
rollout of a sampler seeded ``seed``, slot ``j`` (task ``j // batch_size``) is
reset with ``SeedSequence([seed, call]).generate_state(num_slots)[j]`` and its
action at step ``t`` is ``loc + scale * noise[t, j]`` (continuous) or the
inverse CDF at ``noise[t, j]`` of the CDF divided by its last entry (discrete), the noise drawn up front from a
generator seeded with ``SeedSequence([seed, call, 1])``. The episodes of a
rollout are zero-padded to its longest episode.

The policy is elementwise (no sums over features), so evaluating it on one
observation gives the same bits as on a batch: any difference from the
sampler is the sampler's, not float rounding.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from torch.distributions import Categorical, Independent, Normal


class ElementwisePolicy(torch.nn.Module):
    """``loc = a * obs[:act] + b`` with a state-independent ``scale``, or ``logits = w * obs[:n] + c``.

    Accepts ``params=`` unstacked, or stacked ``[K, ...]`` with observations ``[K, N, obs]``.
    """

    supports_batched_params = True

    def __init__(self, size: int, discrete: bool, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.discrete, self.size = discrete, size
        self.a = torch.nn.Parameter(torch.rand(size, generator=generator) + 0.5)
        self.b = torch.nn.Parameter(torch.rand(size, generator=generator) - 0.5)
        if not discrete:
            self.log_scale = torch.nn.Parameter(torch.full((size,), -0.5))

    def forward(self, observations: torch.Tensor, params=None):
        p = dict(self.named_parameters())
        p.update(params or {})
        stacked = p["a"].dim() == 2
        if stacked:  # [K, size] against [K, N, obs]
            p = {name: value.unsqueeze(-2) for name, value in p.items()}
        x = p["a"] * observations[..., : self.size] + p["b"]
        if self.discrete:
            return Categorical(logits=x)
        scale = p["log_scale"].exp().expand_as(x)
        return Independent(Normal(x, scale), 1)

    def perturbed(self, shift: float) -> dict:
        """Parameters different from the policy's own, for per-task parameter tests."""
        return {name: (value.detach() + shift) for name, value in self.named_parameters()}


class UnbatchedElementwisePolicy(ElementwisePolicy):
    """The same policy, declared unable to take stacked parameters: the sampler then
    evaluates (and adapts) it task by task."""

    supports_batched_params = False


def noise_for(seed: int, call: int, horizon: int, num_slots: int, action_shape, discrete: bool) -> torch.Tensor:
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, call, 1]).generate_state(1)[0]))
    if discrete:
        return torch.rand((horizon, num_slots), generator=generator)
    return torch.randn((horizon, num_slots, *action_shape), generator=generator)


def reference_rollout(
    env_fn: Callable[[], Any],
    policy: ElementwisePolicy,
    tasks: Sequence[Any],
    batch_size: int,
    seed: int,
    call: int,
    horizon: int,
    params: Optional[Sequence[Optional[dict]]] = None,
    actions: str = "sample",
) -> list[dict]:
    """One dict per task: ``observations [T, B, obs]``, ``actions``, ``rewards [T, B]``, ``lengths [B]``, ``task``,
    and ``infos``: ``{key: [T, B] float64}`` for each of the env's ``info_keys``.

    ``actions="mean"``: the Normal's mean, or the first of the most probable
    categories, ignoring the noise (the reset seeds are the same)."""
    mean_actions = actions == "mean"  # (the name is reused for each slot's list of actions below)
    num_slots = len(tasks) * batch_size
    seeds = np.random.SeedSequence([seed, call]).generate_state(num_slots)
    probe = env_fn()
    action_shape = probe.action_space.shape
    info_keys = tuple(getattr(probe.unwrapped, "info_keys", ()))
    probe.close()
    noise = noise_for(seed, call, horizon, num_slots, action_shape, policy.discrete)
    slots = []
    for j in range(num_slots):
        task = tasks[j // batch_size]
        task_params = None if params is None else params[j // batch_size]
        env = env_fn()
        env.unwrapped.reset_task(task)
        observation, _ = env.reset(seed=int(seeds[j]))
        observations, actions, rewards, infos = [], [], [], []
        for t in range(horizon):
            observation = torch.as_tensor(np.asarray(observation), dtype=torch.float32)
            with torch.no_grad():
                distribution = policy(observation.unsqueeze(0), params=task_params)
            if policy.discrete and mean_actions:
                probs = distribution.probs[0].tolist()
                action = probs.index(max(probs))
                env_action = np.int64(action)
            elif policy.discrete:
                cdf = distribution.probs[0].cumsum(-1)
                action = int((noise[t, j] >= cdf / cdf[-1]).sum())  # the CDF scaled to end at exactly 1
                env_action = np.int64(action)
            elif mean_actions:
                action = distribution.base_dist.loc[0].clone()
                env_action = action.numpy()
            else:
                base = distribution.base_dist
                action = base.loc[0] + base.scale[0] * noise[t, j]
                env_action = action.numpy()
            observations.append(observation)
            actions.append(torch.as_tensor(action))
            observation, reward, terminated, truncated, info = env.step(env_action)
            rewards.append(torch.tensor(reward, dtype=torch.float32))
            infos.append(torch.tensor([float(info[key]) for key in info_keys], dtype=torch.float64))
            if terminated or truncated:
                break
        env.close()
        slots.append((observations, actions, rewards, infos))
    longest = max(len(s[2]) for s in slots)

    def padded(rows: list, like: torch.Tensor) -> torch.Tensor:
        return torch.stack(rows + [torch.zeros_like(like)] * (longest - len(rows)))

    out = []
    for k, task in enumerate(tasks):
        mine = slots[k * batch_size:(k + 1) * batch_size]
        out.append({
            "observations": torch.stack([padded(o, o[0]) for o, _, _, _ in mine], dim=1),
            "actions": torch.stack([padded(a, a[0]) for _, a, _, _ in mine], dim=1),
            "rewards": torch.stack([padded(r, r[0]) for _, _, r, _ in mine], dim=1),
            "lengths": torch.tensor([len(r) for _, _, r, _ in mine]),
            "infos": {key: torch.stack([padded(i, i[0]) for _, _, _, i in mine], dim=1)[..., n]
                      for n, key in enumerate(info_keys)},
            "task": task,
        })
    return out


class PlainMLP(torch.nn.Module):
    """A user's own policy as people write it: ``F.linear`` layers, a ``params``
    argument that falls back on the module's own parameters, and no
    ``supports_batched_params``. Row sums make its bits depend on how many rows
    a call has: the sampler must call it the same way in every layout."""

    def __init__(self, observation_size: int, action_size: int, hidden: int = 16, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.l1 = torch.nn.Linear(observation_size, hidden)
        self.l2 = torch.nn.Linear(hidden, action_size)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
        self.log_std = torch.nn.Parameter(torch.full((action_size,), -0.5))

    def forward(self, observations: torch.Tensor, params=None):
        p = dict(self.named_parameters())
        p.update(params or {})
        hidden = torch.tanh(torch.nn.functional.linear(observations, p["l1.weight"], p["l1.bias"]))
        mean = torch.nn.functional.linear(hidden, p["l2.weight"], p["l2.bias"])
        return Independent(Normal(mean, p["log_std"].exp().expand_as(mean)), 1)
