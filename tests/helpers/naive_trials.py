"""A naive reference for trial rollouts: one env per slot, a recurrent policy stepped slot by slot.

Seeds and noise follow the documented scheme (docs/sampler.md): slot ``j``'s
first episode is reset with ``SeedSequence([seed, call]).generate_state(S)[j]``,
its episode ``e >= 1`` with ``SeedSequence([seed, call, 3]).generate_state(S * (E - 1))``
read as ``[S, E - 1]`` at ``[j, e - 1]``; the noise is the rollout's
``[E * H, S, ...]`` draw of ``SeedSequence([seed, call, 1])``. RL²'s input is
the observation, the previous action (one-hot if discrete), reward times the
scale, and 1.0 if the previous step ended an episode; all zero at a trial's start.

The policy is elementwise (no sums over rows or features), so stepping it on
one slot gives the same bits as on a batch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from torch.distributions import Categorical, Independent, Normal

from helpers.naive_sampler import noise_for


class CountingRecurrentPolicy(torch.nn.Module):
    """``h' = tanh(a * x + c * h[:-1] + d)`` elementwise over the input ``x``, plus
    a last state entry that counts the steps since the trial started; the
    action's mean (or logits) reads the first entries of ``h'``."""

    is_recurrent = True
    supports_task_batches = True

    def __init__(self, input_size: int, action_size: int, discrete: bool, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.input_size, self.action_size, self.discrete = input_size, action_size, discrete
        self.state_shape = (input_size + 1,)
        self.a = torch.nn.Parameter(torch.rand(input_size, generator=generator) + 0.5)
        self.c = torch.nn.Parameter(torch.rand(input_size, generator=generator) - 0.5)
        self.d = torch.nn.Parameter(torch.rand(input_size, generator=generator) - 0.5)
        self.log_scale = torch.nn.Parameter(torch.full((action_size,), -0.5))

    def initial_state(self, n, device=None):
        return torch.zeros((n, *self.state_shape), device=device)

    def step(self, inputs, state):
        h = torch.tanh(self.a * inputs + self.c * state[..., :-1] + self.d)
        count = state[..., -1:] + 1
        x = h[..., : self.action_size]
        distribution = Categorical(logits=2 * x) if self.discrete else Independent(Normal(x, self.log_scale.exp()
                                                                                            .expand_as(x)), 1)
        return distribution, torch.cat([h, count], -1)


class TaskByTaskRecurrentPolicy(CountingRecurrentPolicy):
    """The same, declared unable to take ``[K, B]`` batches: the sampler steps it task by task."""

    supports_task_batches = False


def trial_seeds_for(seed: int, call: int, num_slots: int, episodes: int) -> np.ndarray:
    first = np.random.SeedSequence([seed, call]).generate_state(num_slots).astype(np.uint64)
    if episodes == 1:
        return first[:, None]
    later = np.random.SeedSequence([seed, call, 3]).generate_state(num_slots * (episodes - 1)).astype(np.uint64)
    return np.concatenate([first[:, None], later.reshape(num_slots, episodes - 1)], axis=1)


def reference_trials(env_fn: Callable[[], Any], policy, tasks: Sequence[Any], batch_size: int, seed: int, call: int,
                     horizon: int, episodes: int, reward_scale: float = 1.0, rl2: bool = True,
                     start: Optional[dict] = None, mean: bool = False, autoreset: bool = False) -> list:
    """One dict per task: ``observations``, ``actions``, ``rewards``, ``dones`` ``[T, B]``,
    ``log_probs``, ``lengths`` ``[B]``, ``final_state`` ``[B, *state]``, ``states`` (the
    state before every step, ``[T, B, *state]``). ``autoreset``: the previous action, reward
    and done are none (zero) after an episode's end, as Meta-World's autoreset shows them."""
    num_slots = len(tasks) * batch_size
    seeds = trial_seeds_for(seed, call, num_slots, episodes)
    probe = env_fn()
    discrete = hasattr(probe.action_space, "n")
    action_shape = probe.action_space.shape
    num_categories = int(probe.action_space.n) if discrete else None
    probe.close()
    noise = noise_for(seed, call, horizon * episodes, num_slots, action_shape, discrete)
    slots = []
    for j in range(num_slots):
        env = env_fn()
        env.unwrapped.reset_task(tasks[j // batch_size])
        observation, _ = env.reset(seed=int(seeds[j, 0]))
        if start is None:
            state = policy.initial_state(1)[0]
            prev_action = torch.zeros(action_shape) if not discrete else None  # none yet
            prev_reward, prev_done = 0.0, 0.0
        else:
            state = torch.as_tensor(start["state"][j])
            prev_action = torch.as_tensor(start["actions"][j])
            prev_reward, prev_done = float(start["rewards"][j]), float(start["dones"][j] != 0)
            if autoreset and prev_done:  # a continuation of an ended episode starts afresh
                prev_action = torch.zeros(action_shape) if not discrete else None
                prev_reward, prev_done = 0.0, 0.0
        rows = {name: [] for name in ("observations", "actions", "rewards", "dones", "log_probs", "states")}
        episode, steps_in_episode = 0, 0
        for t in range(horizon * episodes):
            obs = torch.as_tensor(np.asarray(observation), dtype=torch.float32)
            if rl2:
                if not discrete:
                    action_features = prev_action.float().reshape(-1)
                elif prev_action is None:  # a trial's start: no previous action, all zeros
                    action_features = torch.zeros(num_categories)
                else:
                    action_features = torch.nn.functional.one_hot(prev_action.long(), num_categories).float()
                x = torch.cat([obs.reshape(-1), action_features,
                               torch.tensor([np.float32(prev_reward) * reward_scale], dtype=torch.float32),
                               torch.tensor([prev_done], dtype=torch.float32)])
            else:
                x = obs.reshape(-1)
            rows["states"].append(state)
            with torch.no_grad():
                distribution, next_state = policy.step(x.unsqueeze(0), state.unsqueeze(0))
            if discrete:
                probs = distribution.probs[0]
                if mean:  # the most probable action, the lowest index among ties
                    best = 0
                    for i in range(1, len(probs)):
                        if probs[i] > probs[best]:
                            best = i
                    action = torch.tensor(best)
                else:
                    cdf = probs.cumsum(-1)
                    action = torch.tensor(int((noise[t, j] >= cdf / cdf[-1]).sum()))
                env_action = np.int64(action)
                log_prob = distribution.log_prob(action.unsqueeze(0))[0]
            else:
                base = distribution.base_dist
                action = base.loc[0] if mean else base.loc[0] + base.scale[0] * noise[t, j]
                env_action = action.numpy()
                log_prob = distribution.log_prob(action.unsqueeze(0))[0]
            state = next_state[0]
            rows["observations"].append(obs)
            rows["actions"].append(action)
            rows["log_probs"].append(log_prob.float())
            observation, reward, terminated, truncated, _ = env.step(env_action)
            rows["rewards"].append(torch.tensor(reward, dtype=torch.float32))
            steps_in_episode += 1
            ended = terminated or truncated or steps_in_episode == horizon
            code = 0 if not ended else 2 if terminated else 3 if truncated else 1
            rows["dones"].append(torch.tensor(code, dtype=torch.uint8))
            prev_action, prev_reward, prev_done = action, float(np.float32(reward)), float(ended)
            if autoreset and ended:
                prev_action = torch.zeros(action_shape) if not discrete else None
                prev_reward, prev_done = 0.0, 0.0
            if ended:
                episode += 1
                if episode == episodes:
                    break
                observation, _ = env.reset(seed=int(seeds[j, episode]))
                steps_in_episode = 0
        env.close()
        rows["final_state"] = state
        slots.append(rows)
    longest = max(len(s["rewards"]) for s in slots)

    def padded(values: list) -> torch.Tensor:
        return torch.stack(values + [torch.zeros_like(values[0])] * (longest - len(values)))

    out = []
    for k, task in enumerate(tasks):
        mine = slots[k * batch_size:(k + 1) * batch_size]
        entry = {name: torch.stack([padded(s[name]) for s in mine], dim=1)
                 for name in ("observations", "actions", "rewards", "dones", "log_probs", "states")}
        entry["lengths"] = torch.tensor([len(s["rewards"]) for s in mine])
        entry["final_state"] = torch.stack([s["final_state"] for s in mine])
        entry["task"] = task
        out.append(entry)
    return out
