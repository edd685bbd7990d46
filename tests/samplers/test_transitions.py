"""Transitions and conditioning of the sampler against a plain loop, on every local layout.

The reference replays each slot's recorded actions through a fresh env reset with the sampler's
seeds, one step at a time, and reads what ``env.step`` returned: the next observation (the final
one of a truncated or terminated episode included), the reward and the two flags.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Independent, Normal

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.policies import NormalMLPPolicy
from maml_rl.policies.tanh_gaussian import TanhGaussianPolicy
from maml_rl.samplers import MultiTaskSampler
from maml_rl.samplers.rollout.noise import trial_seeds

pytestmark = pytest.mark.processes

SEED = 5


def replay_through_envs(env_id, kwargs, tasks, batch_size, episodes, call, transitions):
    """Every transition against a plain loop replaying its actions; returns the episodes seen."""
    seeds = trial_seeds(SEED, call, len(tasks) * batch_size, episodes)
    seen = 0
    for k, (task, tr) in enumerate(zip(tasks, transitions)):
        row = 0
        for b in range(batch_size):
            env = gym.make(env_id, **kwargs)
            env.unwrapped.reset_task(task)
            for e in range(episodes):
                observation, _ = env.reset(seed=int(seeds[k * batch_size + b, e]))
                while True:
                    assert torch.equal(tr.observations[row], torch.as_tensor(observation, dtype=torch.float32))
                    nxt, reward, terminated, truncated, _ = env.step(tr.actions[row].numpy())
                    assert torch.equal(tr.next_observations[row], torch.as_tensor(nxt, dtype=torch.float32)), row
                    assert tr.rewards[row].item() == np.float32(reward)
                    assert bool(tr.terminated[row]) == bool(terminated)
                    assert bool(tr.truncated[row]) == (bool(truncated) and not terminated)
                    row += 1
                    observation = nxt
                    if terminated or truncated:
                        seen += 1
                        break
            env.close()
        assert row == len(tr)
    return seen


LAYOUTS = [
    pytest.param(dict(num_workers=0), id="in-process"),
    pytest.param(dict(num_workers=2, start_method="forkserver"), id="forkserver"),
    pytest.param(dict(num_workers=2, start_method="spawn", partial=True), id="spawn-partial"),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("env_id, kwargs", [
    ("2DNavigation-v0", {"max_episode_steps": 7}),  # truncated by its time limit
    ("HalfCheetahVel-v5", {"max_episode_steps": 9}),  # the MuJoCo fast path where MuJoCo 4 has it
    ("AntDir-v5", {"max_episode_steps": 30}),  # episodes that terminate early
])
def test_transitions_equal_a_plain_loop(env_id, kwargs, layout):
    env = gym.make(env_id, **kwargs)
    obs, act = env.observation_space.shape[0], env.action_space.shape[0]
    torch.manual_seed(0)
    policy = NormalMLPPolicy(obs, act, hidden_sizes=(8,), init_std=2.0)
    with MultiTaskSampler(env_id, kwargs, 3, policy, seed=SEED, **layout) as sampler:
        tasks = sampler.sample_tasks(2)
        two = sampler.rollout_transitions(tasks, episodes=2)
        one = sampler.rollout_transitions(tasks)  # a second call in a row
    seen = replay_through_envs(env_id, kwargs, tasks, 3, 2, 0, two)
    assert seen == 2 * 3 * 2
    replay_through_envs(env_id, kwargs, tasks, 3, 1, 1, one)
    rows = torch.cat([t.terminated | t.truncated for t in two])
    assert int(rows.sum()) == 12
    if env_id == "AntDir-v5":
        assert any(bool(t.terminated.any()) for t in two)  # a real termination, not a time limit
    else:
        assert not any(bool(t.terminated.any()) for t in two)


def test_the_degenerate_shapes_one_task_one_slot_horizon_one():
    torch.manual_seed(0)
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(4,))
    kwargs = {"max_episode_steps": 1}
    with MultiTaskSampler("2DNavigation-v0", kwargs, 1, policy, seed=SEED, num_workers=0) as sampler:
        tasks = sampler.sample_tasks(1)
        (tr,) = sampler.rollout_transitions(tasks, episodes=3)
    assert len(tr) == 3 and tr.truncated.all() and not tr.terminated.any()
    assert tr.episode_lengths().tolist() == [1, 1, 1]
    assert len(tr.split_episodes()) == 3
    replay_through_envs("2DNavigation-v0", kwargs, tasks, 1, 3, 0, [tr])


class Echo(torch.nn.Module):
    """The mean action is the conditioning the sampler appended to the observation."""

    def __init__(self, observation_size: int):
        super().__init__()
        self.observation_size = observation_size
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, params=None):
        z = x[..., self.observation_size:]
        return Independent(Normal(z + 0 * self.unused, torch.ones_like(z)), 1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_conditioning_reaches_the_policy_per_task_and_per_slot(layout):
    c = torch.rand(4, 3, 2) * 0.1 - 0.05
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, 3, Echo(2), seed=1, conditioning_size=2,
                          **layout) as sampler:
        tasks = sampler.sample_tasks(4)
        per_slot = sampler.rollout_transitions(tasks, conditioning=c, actions="mean")
        per_task = sampler.rollout(tasks, conditioning=c[:, 0], actions="mean")
        trials = sampler.rollout_trials(tasks, 2, conditioning=c, actions="mean")
    for k in range(4):
        assert torch.equal(per_slot[k].actions.view(3, 5, 2), c[k][:, None, :].expand(3, 5, 2))
        assert torch.equal(per_task[k].actions, c[k, 0].expand(5, 3, 2))
        assert torch.equal(trials[k].actions, c[k][None].expand(10, 3, 2))


def test_conditioning_is_checked():
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, 3, Echo(2), seed=1, conditioning_size=2,
                          num_workers=0) as sampler:
        tasks = sampler.sample_tasks(2)
        with pytest.raises(ValueError, match=r"reads 2 conditioning numbers after each observation"):
            sampler.rollout(tasks)
        with pytest.raises(ValueError, match=r"conditioning has shape \(2, 4\); 2 task\(s\) of 3 slot\(s\) need"):
            sampler.rollout_transitions(tasks, conditioning=torch.zeros(2, 4))
        with pytest.raises(ValueError, match="finite"):
            sampler.rollout_transitions(tasks, conditioning=torch.full((2, 2), float("nan")))
        # A refused call moves no counter: the next one is the first call's episodes.
        first = sampler.rollout_transitions(tasks, conditioning=torch.zeros(2, 2))
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, 3, Echo(2), seed=1, conditioning_size=2,
                          num_workers=0) as fresh:
        again = fresh.rollout_transitions(fresh.sample_tasks(2), conditioning=torch.zeros(2, 2))
    assert all(torch.equal(a.observations, b.observations) for a, b in zip(first, again))
    policy = NormalMLPPolicy(2, 2)
    with MultiTaskSampler("2DNavigation-v0", {}, 1, policy, seed=1, num_workers=0) as plain:
        with pytest.raises(ValueError, match="built without conditioning_size"):
            plain.rollout(plain.sample_tasks(1), conditioning=torch.zeros(1, 2))
    with pytest.raises(TypeError, match="failed when called on one observation"):
        MultiTaskSampler("2DNavigation-v0", {}, 1, policy, seed=1, num_workers=0, conditioning_size=3)


def test_a_squashed_gaussian_policy_gives_the_same_transitions_on_every_layout():
    torch.manual_seed(3)
    actor = TanhGaussianPolicy(20 + 5, 6, (16, 16))
    z = torch.randn(2, 2, 5)
    results = []
    for layout in ({"num_workers": 0}, {"num_workers": 2, "partial": True}):
        with MultiTaskSampler("HalfCheetahVel-v5", {"max_episode_steps": 12}, 2, actor, seed=4, conditioning_size=5,
                              **layout) as sampler:
            results.append(sampler.rollout_transitions(sampler.sample_tasks(2), conditioning=z))
    for a, b in zip(*results):
        assert torch.equal(a.actions, b.actions) and torch.equal(a.next_observations, b.next_observations)
    assert results[0][0].actions.abs().max() < 1
