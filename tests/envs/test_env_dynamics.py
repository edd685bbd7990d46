"""Rewards, transitions and terminations checked against values computed by hand."""

import copy

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import maml_rl.envs  # noqa: F401

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*A Box observation space maximum and minimum values are equal:UserWarning"
)


# --------------------------------------------------------------------------
# 2D navigation
# --------------------------------------------------------------------------


def test_navigation_reward_and_clipping():
    env = gym.make("2DNavigation-v0", task={"goal": [0.05, -0.03]}).unwrapped
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, np.zeros(2, np.float32))
    obs, reward, terminated, truncated, _ = env.step(np.array([0.2, -0.02], np.float32))
    np.testing.assert_allclose(obs, [0.1, -0.02], rtol=0, atol=1e-7)
    assert reward == pytest.approx(-np.hypot(0.1 - 0.05, -0.02 + 0.03), abs=1e-6)
    assert not terminated and not truncated
    obs, reward, *_ = env.step(np.array([-1.0, 1.0]))
    np.testing.assert_allclose(obs, [0.0, 0.08], rtol=0, atol=1e-7)
    assert reward == pytest.approx(-np.hypot(0.05, 0.11), abs=1e-6)


@pytest.mark.parametrize(
    "action, terminated",
    [([0.1, 0.1], True), ([0.095, 0.105], True), ([0.085, 0.1], False), ([0.1, 0.089], False), ([0.2, 0.2], True)],
)
def test_navigation_terminates_within_tolerance(action, terminated):
    env = gym.make("2DNavigation-v0", task={"goal": [0.1, 0.1]}).unwrapped
    env.reset(seed=0)
    # Two moves, the first one far from the goal.
    assert env.step(np.array([-0.1, 0.0]))[2] is False
    env.step(np.array([0.1, 0.0]))
    assert env.step(np.array(action, np.float32))[2] is terminated


def test_navigation_horizon():
    env = gym.make("2DNavigation-v0", task={"goal": [0.5, 0.5]})
    env.reset(seed=0)
    for t in range(100):
        _, _, terminated, truncated, _ = env.step(np.array([0.0, 0.0]))
        assert not terminated
    assert truncated and t == 99



@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_navigation_normalization_scale(scale):
    env = gym.make("2DNavigation-v0", task={"goal": [0.3, 0.0]}, normalization_scale=scale).unwrapped
    assert env.action_space == gym.spaces.Box(-scale, scale, (2,), np.float32)
    env.reset(seed=0)
    # Half the scale moves half the maximal step; beyond the scale is clipped.
    obs, reward, *_ = env.step(np.array([0.5 * scale, -2.0 * scale], np.float32))
    np.testing.assert_allclose(obs, [0.05, -0.1], rtol=0, atol=1e-7)
    assert reward == pytest.approx(-np.hypot(0.25, 0.1), abs=1e-6)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan")])
def test_navigation_rejects_bad_scale(scale):
    with pytest.raises(ValueError, match="normalization_scale must be positive"):
        gym.make("2DNavigation-v0", normalization_scale=scale)

# --------------------------------------------------------------------------
# Bandits
# --------------------------------------------------------------------------


@pytest.mark.parametrize("k", [5, 10, 50])
def test_bernoulli_bandit_rewards(k):
    means = np.linspace(0.0, 1.0, k)
    means[1] = 0.3
    env = gym.make(f"Bandit-K{k}-v0", task={"mean": means})
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, np.zeros(1, np.float32))
    for arm, expected in [(0, 0.0), (k - 1, 1.0)]:
        obs, reward, terminated, truncated, _ = env.step(arm)
        assert reward == expected and terminated and truncated
        np.testing.assert_array_equal(obs, np.zeros(1, np.float32))
        env.reset()
    rewards = [env.unwrapped.step(1)[1] for _ in range(4000)]
    assert set(rewards) <= {0.0, 1.0}
    assert np.mean(rewards) == pytest.approx(0.3, abs=0.03)


@pytest.mark.parametrize("k", [5, 10, 50])
def test_gaussian_bandit_rewards(k):
    means = np.linspace(0.0, 1.0, k)
    env = gym.make(f"GaussianBandit-K{k}-v0", task={"mean": means}).unwrapped
    env.reset(seed=0)
    for arm in (0, k - 1):
        rewards = np.array([env.step(arm)[1] for _ in range(4000)])
        assert rewards.mean() == pytest.approx(means[arm], abs=0.06)
        assert rewards.std() == pytest.approx(1.0, abs=0.05)
    assert env.step(0)[2] is True


def test_bandit_rewards_follow_the_seed():
    env = gym.make("GaussianBandit-K5-v0").unwrapped
    env.reset(seed=11)
    first = [env.step(2)[1] for _ in range(5)]
    env.reset(seed=11)
    assert first == [env.step(2)[1] for _ in range(5)]


# --------------------------------------------------------------------------
# Tabular MDP
# --------------------------------------------------------------------------


def test_tabular_mdp_transitions_and_rewards():
    S, A = 10, 5
    transitions = np.zeros((S, A, S))
    for s in range(S):
        for a in range(A):
            transitions[s, a, (s + a + 1) % S] = 1.0
    rewards_mean = np.arange(S * A, dtype=float).reshape(S, A)
    env = gym.make("TabularMDP-v0", task={"transitions": transitions, "rewards_mean": rewards_mean})
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, np.eye(S, dtype=np.float32)[0])
    state, residuals = 0, []
    for t, a in enumerate([1, 4, 0, 3, 2, 2, 1, 0, 4, 3]):
        obs, reward, terminated, truncated, _ = env.step(a)
        residuals.append(reward - rewards_mean[state, a])
        state = (state + a + 1) % S
        np.testing.assert_array_equal(obs, np.eye(S, dtype=np.float32)[state])
        assert not terminated
        assert truncated == (t == 9)
    # Rewards are N(mean, 1): the residuals are small, not exactly zero.
    assert np.all(np.abs(residuals) < 6) and np.std(residuals) > 0


def test_tabular_mdp_samples_next_state_from_transitions():
    S, A = 10, 5
    transitions = np.zeros((S, A, S))
    transitions[:, :, 2] = 0.25
    transitions[:, :, 7] = 0.75
    rewards_mean = np.full((S, A), -2.0)
    env = gym.make("TabularMDP-v0", task={"transitions": transitions, "rewards_mean": rewards_mean}).unwrapped
    env.reset(seed=0)
    states, rewards = [], []
    for _ in range(4000):
        obs, reward, *_ = env.step(3)
        states.append(int(np.argmax(obs)))
        rewards.append(reward)
    assert set(states) == {2, 7}
    assert np.mean(np.array(states) == 7) == pytest.approx(0.75, abs=0.03)
    assert np.mean(rewards) == pytest.approx(-2.0, abs=0.06)
    assert np.std(rewards) == pytest.approx(1.0, abs=0.05)


# --------------------------------------------------------------------------
# MuJoCo
# --------------------------------------------------------------------------


def _body_id(model, name):
    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)


def _set_known_state(env, seed, torso_height=None, torso_vz=None):
    """Put the simulation in a reproducible, non-trivial state."""
    rng = np.random.default_rng(seed)
    qpos = env.init_qpos + rng.uniform(-0.1, 0.1, size=env.model.nq)
    qvel = rng.normal(0.0, 0.5, size=env.model.nv)
    if torso_height is not None:
        qpos[2] = torso_height
    if torso_vz is not None:
        qvel[2] = torso_vz
    env.set_state(qpos, qvel)


def _step_by_hand(env, ctrl):
    """Step a copy of the simulation with ``ctrl``, independently of the env."""
    data = copy.copy(env.data)
    data.ctrl[:] = ctrl
    mujoco.mj_step(env.model, data, nstep=5)
    return data


def test_mujoco_timestep():
    for env_id in ["HalfCheetahVel-v5", "AntVel-v5"]:
        env = gym.make(env_id).unwrapped
        assert env.frame_skip == 5 and env.dt == pytest.approx(0.05)


@pytest.mark.parametrize(
    "env_id, task",
    [("HalfCheetahVel-v5", {"velocity": 1.3}), ("HalfCheetahDir-v5", {"direction": -1})],
)
def test_half_cheetah_reward(env_id, task):
    env = gym.make(env_id, task=task).unwrapped
    env.reset(seed=0)
    torso = _body_id(env.model, "torso")
    action = np.array([0.5, -0.3, 0.9, -1.0, 0.2, 0.7], np.float32)
    for seed in range(3):
        _set_known_state(env, seed)
        x_before = env.data.qpos[0]
        expected = _step_by_hand(env, action.astype(np.float64))
        obs, reward, terminated, truncated, info = env.step(action)

        np.testing.assert_array_equal(env.data.qpos, expected.qpos)
        v_x = (expected.qpos[0] - x_before) / 0.05
        ctrl_cost = 0.05 * np.sum(np.square(action.astype(np.float64)))
        if "velocity" in task:
            expected_reward = -abs(v_x - task["velocity"]) - ctrl_cost
        else:
            expected_reward = task["direction"] * v_x - ctrl_cost
        assert reward == pytest.approx(expected_reward, rel=1e-9, abs=1e-9)
        assert info["forward_velocity"] == pytest.approx(v_x, rel=1e-9, abs=1e-9)
        assert not terminated and not truncated
        expected_obs = np.concatenate(
            [expected.qpos[1:], expected.qvel, expected.xpos[torso]]
        ).astype(np.float32)
        np.testing.assert_array_equal(obs, expected_obs)


def test_half_cheetah_never_terminates():
    env = gym.make("HalfCheetahDir-v5", max_episode_steps=30)
    env.reset(seed=0)
    for t in range(30):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        assert not terminated
    assert truncated


@pytest.mark.parametrize(
    "env_id, task",
    [
        ("AntVel-v5", {"velocity": 2.1}),
        ("AntDir-v5", {"direction": -1}),
        ("AntPos-v5", {"position": [1.5, -2.0]}),
    ],
)
def test_ant_reward(env_id, task):
    env = gym.make(env_id, task=task).unwrapped
    env.reset(seed=0)
    torso = _body_id(env.model, "torso")
    action = np.array([0.5, -0.3, 0.9, -1.0, 0.2, 0.7, 0.0, -0.6], np.float32)
    for seed in range(3):
        _set_known_state(env, seed, torso_height=0.6)
        xy_before = env.data.xpos[torso, :2].copy()
        # The model's probe sensor makes mj_step compute cfrc_ext itself
        # (test_ant_contact_forces_are_those_of_the_last_substep checks them).
        expected = _step_by_hand(env, action.astype(np.float64))
        obs, reward, terminated, truncated, info = env.step(action)

        np.testing.assert_array_equal(env.data.qpos, expected.qpos)
        xy_after = expected.xpos[torso, :2]
        v_x = (xy_after[0] - xy_before[0]) / 0.05
        contact = np.clip(expected.cfrc_ext, -1.0, 1.0)
        costs = 0.005 * np.sum(np.square(action.astype(np.float64))) + 0.0005 * np.sum(
            np.square(contact)
        )
        if env_id == "AntVel-v5":
            expected_reward = -abs(v_x - task["velocity"]) + 1.0 + 0.05 - costs
        elif env_id == "AntDir-v5":
            expected_reward = task["direction"] * v_x + 0.05 - costs
        else:
            expected_reward = -np.sum(np.abs(xy_after - task["position"])) + 4.0 + 0.05 - costs
        assert reward == pytest.approx(expected_reward, rel=1e-9, abs=1e-9)
        assert terminated is not (0.2 <= expected.qpos[2] <= 1.0)
        assert not truncated
        expected_obs = np.concatenate(
            [
                expected.qpos,
                expected.qvel,
                contact.ravel(),
                expected.xmat[torso],
                expected.xpos[torso],
            ]
        ).astype(np.float32)
        assert obs.shape == (125,)
        np.testing.assert_array_equal(obs, expected_obs)


@pytest.mark.parametrize(
    "torso_height, torso_vz, terminated",
    [(0.6, 0.0, False), (1.2, 0.0, True), (0.75, -30.0, True)],
)
def test_ant_terminates_when_torso_leaves_height_range(torso_height, torso_vz, terminated):
    env = gym.make("AntPos-v5").unwrapped
    env.reset(seed=0)
    _set_known_state(env, 0, torso_height=torso_height, torso_vz=torso_vz)
    env.data.qvel[:2] = 0.0
    env.data.qvel[3:] = 0.0
    _, _, done, _, _ = env.step(np.zeros(8, np.float32))
    height = env.data.qpos[2]
    # Above 1.0, resp. slammed below 0.2 (the torso sphere cannot rest there).
    assert (not 0.2 <= height <= 1.0) is terminated
    assert done is terminated


def test_ant_contact_forces_are_observed():
    env = gym.make("AntVel-v5").unwrapped
    env.reset(seed=0)
    nq, nv, nbody = env.model.nq, env.model.nv, env.model.nbody
    steps_in_contact = 0
    for _ in range(20):
        obs, reward, terminated, truncated, info = env.step(np.zeros(8, np.float32))
        contact_obs = obs[nq + nv : nq + nv + 6 * nbody]
        np.testing.assert_array_equal(
            contact_obs, np.clip(env.data.cfrc_ext, -1, 1).ravel().astype(np.float32)
        )
        assert np.all(np.abs(contact_obs) <= 1.0)
        if env.data.ncon > 0:  # the ant touches the ground
            steps_in_contact += 1
            assert np.count_nonzero(contact_obs) > 0
            assert info["reward_contact"] < 0.0
    # The ant falls onto the floor after the reset and stays on it.
    assert steps_in_contact >= 10


@pytest.mark.parametrize("env_id", ["HalfCheetahVel-v5", "AntDir-v5"])
@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_normalization_scale_maps_onto_control_range(env_id, scale):
    env = gym.make(env_id, normalization_scale=scale).unwrapped
    low, high = env.model.actuator_ctrlrange.T
    nu = env.model.nu
    assert env.action_space.dtype == np.float32
    np.testing.assert_array_equal(env.action_space.low, np.full(nu, -scale, np.float32))
    np.testing.assert_array_equal(env.action_space.high, np.full(nu, scale, np.float32))

    np.testing.assert_allclose(env.action_to_control(np.full(nu, -scale)), low)
    np.testing.assert_allclose(env.action_to_control(np.full(nu, scale)), high)
    np.testing.assert_allclose(env.action_to_control(np.zeros(nu)), (low + high) / 2)
    np.testing.assert_allclose(env.action_to_control(np.full(nu, 0.5 * scale)), low + 0.75 * (high - low))
    # Out of range actions are clipped to [-scale, scale] first.
    np.testing.assert_allclose(env.action_to_control(np.full(nu, 3 * scale)), high)
    np.testing.assert_allclose(env.action_to_control(np.full(nu, -3 * scale)), low)

    # step applies the mapped control and charges the cost on it.
    env.reset(seed=0)
    action = np.linspace(-2 * scale, 2 * scale, nu).astype(np.float32)
    clipped = np.clip(action.astype(np.float64), -scale, scale)
    ctrl = low + (clipped + scale) * (high - low) / (2 * scale)
    _, _, _, _, info = env.step(action)
    np.testing.assert_allclose(env.data.ctrl, ctrl, rtol=1e-12, atol=1e-12)
    weight = 0.05 if env_id.startswith("HalfCheetah") else 0.005
    assert info["reward_ctrl"] == pytest.approx(-weight * np.sum(ctrl**2), rel=1e-9)


def test_shipped_config_kwargs():
    env = gym.make(
        "HalfCheetahVel-v5", max_episode_steps=100, normalization_scale=10.0, low=0.0, high=2.0
    )
    assert env.spec.max_episode_steps == 100
    assert env.action_space == gym.spaces.Box(-10.0, 10.0, (6,), np.float32)
    env.reset(seed=0)
    tasks = env.unwrapped.sample_tasks(50)
    assert all(0.0 <= t["velocity"] <= 2.0 for t in tasks)
    env.unwrapped.reset_task(tasks[0])
    for t in range(100):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    assert truncated and not terminated


def test_mujoco_reset_noise_is_seeded():
    env = gym.make("AntVel-v5").unwrapped
    obs_1, _ = env.reset(seed=5)
    qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
    assert np.all(np.abs(qpos - env.init_qpos) <= 0.1)
    assert not np.array_equal(qvel, env.init_qvel)
    obs_2, _ = env.reset(seed=5)
    np.testing.assert_array_equal(obs_1, obs_2)
    obs_3, _ = env.reset(seed=6)
    assert not np.array_equal(obs_1, obs_3)


def test_ant_contact_forces_are_those_of_the_last_substep():
    """The contact forces an Ant step observes and pays for are
    mj_rnePostConstraint's at the state of the step's last substep, computed
    here on gymnasium's own model (no probe sensor), by hand."""
    env = gym.make("AntVel-v5").unwrapped
    env.reset(seed=0)
    plain = mujoco.MjModel.from_xml_path(env.fullpath)
    assert env.model.nsensor == plain.nsensor + 1
    action = np.array([0.5, -0.3, 0.9, -1.0, 0.2, 0.7, 0.0, -0.6], np.float32)
    nq, nv, nbody = env.model.nq, env.model.nv, env.model.nbody
    touched = 0
    for _ in range(15):
        data = mujoco.MjData(plain)
        data.qpos[:], data.qvel[:], data.qacc_warmstart[:] = env.data.qpos, env.data.qvel, env.data.qacc_warmstart
        data.ctrl[:] = action
        mujoco.mj_step(plain, data, nstep=4)
        mujoco.mj_forward(plain, data)
        mujoco.mj_rnePostConstraint(plain, data)
        expected = np.clip(data.cfrc_ext, -1.0, 1.0)
        obs, reward, terminated, _, info = env.step(action)
        np.testing.assert_array_equal(obs[nq + nv : nq + nv + 6 * nbody], expected.ravel().astype(np.float32))
        assert info["reward_contact"] == -0.0005 * np.sum(np.square(expected))
        touched += np.count_nonzero(expected) > 0
    assert touched >= 10  # on the ground, with real contact forces
