"""Gymnasium API, registration and task protocol of every maml_rl environment."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import maml_rl.envs
from maml_rl.envs import ENV_IDS, MetaEnv

# Advice that check_env prints for the spaces the reference specifies
# (unbounded observations, the bandits' constant observation) and for
# checking a wrapped environment on purpose.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*A Box observation space:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*recommend using a symmetric and normalized:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version:UserWarning"),
]

MUJOCO_IDS = ["HalfCheetahVel-v5", "HalfCheetahDir-v5", "AntVel-v5", "AntDir-v5", "AntPos-v5"]
BANDIT_IDS = [i for i in ENV_IDS if "Bandit" in i]

HORIZONS = {"2DNavigation-v0": 100, "SparsePointRobot-v0": 20, "TabularMDP-v0": 10}
HORIZONS.update({i: 1 for i in BANDIT_IDS})
HORIZONS.update({i: 200 for i in MUJOCO_IDS})

# Per id: the task keys and their shapes, and a checker of the sampled values.
TASK_SHAPES = {
    "2DNavigation-v0": {"goal": (2,)},
    "SparsePointRobot-v0": {"goal": (2,)},
    "TabularMDP-v0": {"transitions": (10, 5, 10), "rewards_mean": (10, 5)},
    "HalfCheetahVel-v5": {"velocity": ()},
    "HalfCheetahDir-v5": {"direction": ()},
    "AntVel-v5": {"velocity": ()},
    "AntDir-v5": {"direction": ()},
    "AntPos-v5": {"position": (2,)},
}
for _id in BANDIT_IDS:
    TASK_SHAPES[_id] = {"mean": (int(_id.split("-K")[1].split("-")[0]),)}

IN_RANGE = {
    "2DNavigation-v0": lambda t: np.all(np.abs(t["goal"]) <= 0.5),
    "SparsePointRobot-v0": lambda t: np.isclose(np.hypot(*t["goal"]), 1.0) and t["goal"][1] >= 0,
    "TabularMDP-v0": lambda t: np.allclose(t["transitions"].sum(-1), 1.0)
    and np.all(t["transitions"] >= 0),
    "HalfCheetahVel-v5": lambda t: 0.0 <= t["velocity"] <= 2.0,
    "HalfCheetahDir-v5": lambda t: t["direction"] in (-1.0, 1.0),
    "AntVel-v5": lambda t: 0.0 <= t["velocity"] <= 3.0,
    "AntDir-v5": lambda t: t["direction"] in (-1.0, 1.0),
    "AntPos-v5": lambda t: np.all(np.abs(t["position"]) <= 3.0),
}
for _id in BANDIT_IDS:
    IN_RANGE[_id] = lambda t: np.all((t["mean"] >= 0) & (t["mean"] <= 1))


def tasks_equal(tasks_1, tasks_2):
    return len(tasks_1) == len(tasks_2) and all(
        t1.keys() == t2.keys() and all(np.array_equal(t1[k], t2[k]) for k in t1)
        for t1, t2 in zip(tasks_1, tasks_2)
    )


def test_env_ids_are_registered():
    assert len(ENV_IDS) == 14 and len(set(ENV_IDS)) == 14
    for env_id in ENV_IDS:
        assert env_id in gym.registry
        assert gym.spec(env_id).max_episode_steps == HORIZONS[env_id]


def test_registration_is_idempotent():
    maml_rl.envs.register_envs()
    assert gym.spec("AntPos-v5").max_episode_steps == 200


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env(env_id):
    env = gym.make(env_id)
    # Rendering needs an OpenGL context, which the tests do not assume.
    check_env(env.unwrapped, skip_render_check=True)
    if env_id not in BANDIT_IDS:  # the 1-step horizon truncates the checker's step
        check_env(env, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_observations_are_float32(env_id):
    env = gym.make(env_id)
    space = env.observation_space
    assert space.dtype == np.float32
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.shape == space.shape and obs in space
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs.dtype == np.float32 and obs.shape == space.shape and obs in space
        assert isinstance(reward, float) and isinstance(info, dict)
        if terminated or truncated:
            obs, _ = env.reset()
    assert isinstance(env.unwrapped, MetaEnv)
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_task_sampling_is_seeded(env_id):
    env = gym.make(env_id)
    other = gym.make(env_id)
    env.reset(seed=3)
    tasks = env.unwrapped.sample_tasks(20)
    env.reset(seed=3)
    assert tasks_equal(tasks, env.unwrapped.sample_tasks(20))
    other.reset(seed=3)
    assert tasks_equal(tasks, other.unwrapped.sample_tasks(20))
    other.reset(seed=4)
    assert not tasks_equal(tasks, other.unwrapped.sample_tasks(20))

    shapes = TASK_SHAPES[env_id]
    for task in tasks:
        assert set(task) == set(shapes)
        for key, shape in shapes.items():
            assert np.shape(task[key]) == shape
        assert IN_RANGE[env_id](task)
    assert env.unwrapped.sample_tasks(0) == []


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_task_and_get_task(env_id):
    env = gym.make(env_id)
    env.reset(seed=0)
    task = env.unwrapped.sample_tasks(1)[0]
    env.unwrapped.reset_task(task)
    current = env.unwrapped.get_task()
    assert tasks_equal([current], [task])
    # get_task returns a copy: mutating it does not change the environment.
    for value in current.values():
        if isinstance(value, np.ndarray):
            value[...] = 0.5
    assert tasks_equal([env.unwrapped.get_task()], [task])
    # The constructor accepts an initial task.
    made = gym.make(env_id, task=task)
    assert tasks_equal([made.unwrapped.get_task()], [task])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_malformed_tasks_raise(env_id):
    env = gym.make(env_id).unwrapped
    keys = list(TASK_SHAPES[env_id])
    good = env.get_task()

    bad_tasks = [{}, {"not_a_key": 1.0}, dict(good, extra=1.0), "not a dict"]
    for key, shape in TASK_SHAPES[env_id].items():
        bad_tasks.append(dict(good, **{key: np.zeros(shape + (2,))}))
        bad_tasks.append(dict(good, **{key: "text"}))
        bad_tasks.append({k: v for k, v in good.items() if k != key})
    for bad in bad_tasks:
        with pytest.raises(ValueError) as excinfo:
            env.reset_task(bad)
        assert all(repr(key) in str(excinfo.value) for key in keys), str(excinfo.value)
    with pytest.raises(ValueError):
        gym.make(env_id, task={"not_a_key": 1.0})
    # A failed reset_task leaves the task unchanged.
    assert tasks_equal([env.get_task()], [good])


def test_malformed_task_values_raise():
    with pytest.raises(ValueError, match="direction"):
        gym.make("HalfCheetahDir-v5", task={"direction": 0.5})
    with pytest.raises(ValueError, match="direction"):
        gym.make("AntDir-v5").unwrapped.reset_task({"direction": 2})
    with pytest.raises(ValueError, match="mean"):
        gym.make("Bandit-K5-v0", task={"mean": np.full(5, 1.5)})
    transitions = np.full((10, 5, 10), 0.2)
    with pytest.raises(ValueError, match="transitions"):
        gym.make("TabularMDP-v0", task={"transitions": transitions, "rewards_mean": np.zeros((10, 5))})
    with pytest.raises(ValueError, match="finite"):
        gym.make("2DNavigation-v0", task={"goal": [np.nan, 0.0]})


def test_invalid_actions_raise():
    with pytest.raises(ValueError):
        gym.make("Bandit-K5-v0").unwrapped.step(5)
    with pytest.raises(ValueError):
        gym.make("TabularMDP-v0").unwrapped.step(-1)
    env = gym.make("2DNavigation-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(np.zeros(3))
    env = gym.make("HalfCheetahVel-v5").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(np.zeros(5))
