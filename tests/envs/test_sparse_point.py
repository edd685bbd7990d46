"""The sparse-reward point robot: rewards computed by hand, the goal distribution, clipping, the horizon."""

import gymnasium as gym
import numpy as np
import pytest

from maml_rl.envs import SparsePointEnv


def walk(env, actions):
    env.reset(seed=0)
    return [env.step(np.asarray(a, dtype=np.float32)) for a in actions]


@pytest.mark.parametrize(
    "goal, actions, position, reward, success",
    [
        # 0.1 from the goal: inside, 1 - 0.1.
        ([0.0, 0.2], [[0.0, 0.1]], [0.0, 0.1], 0.9, 1.0),
        # 0.25 from the goal: outside, nothing.
        ([0.0, 0.35], [[0.0, 0.1]], [0.0, 0.1], 0.0, 0.0),
        # exactly on the radius (a 3-4-5 triangle scaled: 0.12, 0.16 -> 0.2): inside, 1 - 0.2.
        ([0.12, 0.16], [[0.0, 0.0]], [0.0, 0.0], 0.8, 1.0),
        # at the goal: 1.
        ([0.1, -0.1], [[0.1, -0.1]], [0.1, -0.1], 1.0, 1.0),
    ],
)
def test_reward_inside_outside_and_on_the_radius(goal, actions, position, reward, success):
    env = SparsePointEnv(task={"goal": goal})
    obs, r, terminated, truncated, info = walk(env, actions)[-1]
    np.testing.assert_allclose(obs, position, atol=1e-7)
    assert r == pytest.approx(reward, abs=1e-6) and info == {"success": success}
    assert (terminated, truncated) == (False, False)


def test_reward_follows_a_path_into_and_out_of_the_goal():
    # Goal (1, 0); steps of 0.1 along x: distances 0.9 .. 0.1, 0.0, then back out.
    env = SparsePointEnv(task={"goal": [1.0, 0.0]})
    rewards = [r for _, r, *_ in walk(env, [[0.1, 0.0]] * 10 + [[-0.1, 0.0]] * 3)]
    distances = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, 0.1, 0.2, 0.3]
    expected = [1 - d if d <= 0.2 + 1e-6 else 0.0 for d in distances]
    np.testing.assert_allclose(rewards, expected, atol=1e-6)
    assert sum(r > 0 for r in rewards) == 5


def test_goals_lie_on_the_upper_unit_half_circle_and_cover_it():
    env = SparsePointEnv()
    env.reset(seed=1)
    goals = np.array([t["goal"] for t in env.sample_tasks(2000)])
    np.testing.assert_allclose(np.hypot(goals[:, 0], goals[:, 1]), 1.0, atol=1e-12)
    angles = np.arctan2(goals[:, 1], goals[:, 0])
    assert angles.min() >= 0.0 and angles.max() <= np.pi
    # Uniform angle: each quarter of [0, pi] holds about a quarter of the goals.
    counts = np.histogram(angles, bins=4, range=(0, np.pi))[0]
    assert np.all(np.abs(counts - 500) < 80), counts


def test_actions_are_clipped_to_a_tenth_and_scaled():
    env = SparsePointEnv(task={"goal": [1.0, 0.0]})
    obs = walk(env, [[5.0, -0.03]])[-1][0]
    np.testing.assert_allclose(obs, [0.1, -0.03], atol=1e-7)
    scaled = SparsePointEnv(task={"goal": [1.0, 0.0]}, normalization_scale=1.0)
    assert scaled.action_space.high.tolist() == [1.0, 1.0]
    obs = walk(scaled, [[-3.0, 0.5]])[-1][0]
    np.testing.assert_allclose(obs, [-0.1, 0.05], atol=1e-7)


def test_horizon_truncates_after_20_steps_and_reset_returns_to_the_origin():
    env = gym.make("SparsePointRobot-v0")
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == [0.0, 0.0]
    flags = [env.step(env.action_space.sample())[2:4] for _ in range(20)]
    assert flags[:-1] == [(False, False)] * 19 and flags[-1] == (False, True)
    assert env.reset()[0].tolist() == [0.0, 0.0]
    longer = gym.make("SparsePointRobot-v0", max_episode_steps=100)
    assert longer.spec.max_episode_steps == 100


def test_the_same_seed_gives_the_same_tasks_and_episodes():
    def run(seed):
        env = gym.make("SparsePointRobot-v0", normalization_scale=1.0)
        env.reset(seed=seed)
        env.unwrapped.reset_task(env.unwrapped.sample_tasks(1)[0])
        env.action_space.seed(seed)
        return [env.step(env.action_space.sample())[:2] for _ in range(20)]

    first, again, other = run(5), run(5), run(6)
    assert all(np.array_equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(first, again))
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(first, other))


@pytest.mark.parametrize("radius", [0.0, -0.2, np.inf, np.nan])
def test_a_bad_goal_radius_is_refused(radius):
    with pytest.raises(ValueError, match="goal_radius"):
        SparsePointEnv(goal_radius=radius)


def test_bad_tasks_and_actions_are_refused():
    env = SparsePointEnv()
    with pytest.raises(ValueError, match="'goal'"):
        env.reset_task({"goal": [1.0, 0.0, 0.0]})
    with pytest.raises(ValueError, match="finite"):
        env.reset_task({"goal": [np.inf, 0.0]})
    with pytest.raises(ValueError, match="normalization_scale"):
        SparsePointEnv(normalization_scale=0.0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3))


def search(goal, start_angle, direction, steps, radius=0.85):
    """A scripted searcher: straight out towards ``start_angle`` to ``radius``, then along the arc in
    ``direction``; True if one of its ``steps`` steps is rewarded."""
    env = SparsePointEnv(task={"goal": [np.cos(goal), np.sin(goal)]})
    env.reset(seed=0)
    position, outward, found = np.zeros(2), True, False
    for _ in range(steps):
        outward = outward and np.linalg.norm(position) < radius - 0.02
        angle = start_angle if outward else np.arctan2(position[1], position[0]) + direction * 0.15
        target = radius * np.array([np.cos(angle), np.sin(angle)])
        position, _, _, _, info = env.step(np.clip(target - position, -0.1, 0.1).astype(np.float32))
        position = position.astype(np.float64)
        found |= info["success"] == 1.0
    return found


def test_one_20_step_attempt_searches_half_the_arc_and_two_search_all():
    """Why the horizon is 20 (the env's docstring): a later attempt must use what the first one searched."""
    goals = np.linspace(0, np.pi, 46)
    first = np.array([search(g, 0.0, +1, 20) for g in goals])
    second = np.array([search(g, np.pi, -1, 20) for g in goals])
    assert 0.45 < first.mean() < 0.6 and 0.45 < second.mean() < 0.6
    assert np.all(first | second)
    # In VariBAD's 100 steps one attempt sweeps the whole arc.
    assert all(search(g, 0.0, +1, 100) for g in goals)
