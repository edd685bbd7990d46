"""Meta-World ML1/ML10/ML45 with real Meta-World envs.

The independent truth is Meta-World's own API: its benchmark objects
(``metaworld.ML1(name, seed)``, ``ML10(seed)``) for the goal lists and the
train/test splits, and its ``Task`` objects set on its own envs for the
dynamics; the sampler's episodes (success included) must equal the naive
reference's plain loop over ``gymnasium.make`` envs bit for bit.
"""

import os
import pickle

import numpy as np
import pytest
import torch

if os.environ.get("MAML_RL_REQUIRE_METAWORLD"):
    import metaworld  # CI installs the extra: a missing Meta-World fails here instead of skipping
else:
    metaworld = pytest.importorskip("metaworld")
import gymnasium as gym
import metaworld.env_dict
import mujoco

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.envs import make_env
from maml_rl.envs.metaworld import WELD_SHIM, MetaWorldEnv, benchmark_tasks
from maml_rl.envs.registration import METAWORLD_IDS, METAWORLD_TASK_NAMES
from maml_rl.samplers import MultiTaskSampler, WorkerError

from helpers.metaworld_classes import by_class, first_goals
from helpers.naive_sampler import ElementwisePolicy, reference_rollout
from helpers.scripts import evaluate, train

# A few cases run in the quick tier (the ids, the splits, one sampler comparison); the rest are slow.
pytestmark = pytest.mark.metaworld


def goals(tasks):
    """Meta-World Task objects -> the set of (class, goal) pairs, from Meta-World's own data."""
    return {(t.env_name, tuple(pickle.loads(t.data)["rand_vec"])) for t in tasks}


def ours(tasks):
    return {(t["env_name"], tuple(t["rand_vec"])) for t in tasks}


@pytest.fixture(scope="module")
def ml1_reach():
    return metaworld.ML1("reach-v3", seed=0)


@pytest.fixture(scope="module")
def ml10():
    return metaworld.ML10(seed=0)


def test_registered_names_are_metaworlds():
    assert METAWORLD_TASK_NAMES == tuple(metaworld.env_dict.ALL_V3_ENVIRONMENTS)
    assert len(METAWORLD_IDS) == 52 and "MetaWorld-ML1-push-v3" in METAWORLD_IDS
    assert {"MetaWorld-ML10-v3", "MetaWorld-ML45-v3"} <= set(METAWORLD_IDS)


def test_the_weld_shim_is_on_exactly_when_mujoco_has_12_weld_numbers():
    assert WELD_SHIM == (mujoco.mjNEQDATA != 11)
    env = gym.make("MetaWorld-ML1-reach-v3")
    env.reset(seed=0)  # crashed on MuJoCo >= 3.17 without the shim
    model = env.unwrapped._env.model
    weld = model.eq_type == mujoco.mjtEq.mjEQ_WELD
    np.testing.assert_array_equal(model.eq_data[weld][:, :11],
                                  [[0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5]] * int(weld.sum()))
    env.close()


def test_ml1_splits_are_metaworlds_train_and_test_goals(ml1_reach):
    """Would catch make_vec's bug (train tasks silently taken from the test goals)."""
    train_goals, test_goals = goals(ml1_reach.train_tasks), goals(ml1_reach.test_tasks)
    assert len(train_goals) == len(test_goals) == 50 and not train_goals & test_goals
    for split, expected in (("train", train_goals), ("test", test_goals)):
        env = MetaWorldEnv("ML1", "reach-v3", split=split)
        env.reset(seed=3)
        sampled = env.sample_tasks(30)
        assert ours(sampled) <= expected
        assert len(ours(sampled)) == 30  # without replacement
        assert ours(env.all_tasks()) == expected
        assert all(t["split"] == split for t in sampled)
        env.close()


def test_the_tests_first_goals_are_ml1s_train_goals(ml1_reach):
    """The comparison tests take their goals from helpers.metaworld_classes.first_goals, which must be Meta-World's
    own ML1 train goals, in order, and leave NumPy's global random state as it found it."""
    before = np.random.get_state()[1].copy()
    expected = [pickle.loads(task.data)["rand_vec"] for task in ml1_reach.train_tasks]
    got = first_goals("reach-v3", 50)
    assert np.array_equal(np.random.get_state()[1], before)
    assert len(got) == 50 and all(g.tobytes() == np.asarray(e, np.float64).tobytes() for g, e in zip(got, expected))
    assert [g.tobytes() for g in first_goals("reach-v3", 3)] == [g.tobytes() for g in got[:3]]


@pytest.mark.slow
@pytest.mark.parametrize("name, seed", [("pick-place-v3", 0), ("door-open-v3", 0), ("push-v3", 7)])
def test_the_tests_first_goals_are_ml1s_for_other_classes_and_seeds(name, seed):
    bench = metaworld.ML1(name, seed=seed)
    expected = [np.asarray(pickle.loads(task.data)["rand_vec"], np.float64) for task in bench.train_tasks[:10]]
    assert [g.tobytes() for g in first_goals(name, 10, seed)] == [e.tobytes() for e in expected]


@pytest.mark.slow
def test_ml10_splits_are_metaworlds_classes_and_goals(ml10):
    env = MetaWorldEnv("ML10")
    env.reset(seed=0)
    train_tasks, test_tasks = env.all_tasks("train"), env.all_tasks("test")
    assert ours(train_tasks) == goals(ml10.train_tasks) and ours(test_tasks) == goals(ml10.test_tasks)
    assert {t["env_name"] for t in train_tasks} == set(ml10.train_classes)
    assert {t["env_name"] for t in test_tasks} == set(ml10.test_classes)
    assert not set(ml10.train_classes) & set(ml10.test_classes)
    assert {t["env_name"] for t in env.sample_tasks(40)} <= set(ml10.train_classes)
    env.close()


@pytest.mark.slow
def test_task_sampling_is_reproducible_from_the_seed():
    def draw(seed):
        env = MetaWorldEnv("ML1", "push-v3")
        env.reset(seed=seed)
        out = [(t["index"], t["rand_vec"].tolist()) for t in env.sample_tasks(5) + env.sample_tasks(5)]
        env.close()
        return out

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)
    # More tasks than goals: with replacement.
    env = MetaWorldEnv("ML1", "push-v3")
    env.reset(seed=0)
    assert len(env.sample_tasks(60)) == 60


def rollout_of(env, actions):
    """Observations, rewards, truncations and every info value, as arrays, over a reset and ``actions``."""
    observations, rewards, truncations, infos = [env.reset()[0]], [], [], {}
    for action in actions:
        observation, reward, _, truncated, info = env.step(action)
        observations.append(observation)
        rewards.append(reward)
        truncations.append(truncated)
        for key, value in info.items():
            infos.setdefault(key, []).append(value)
    return {"observations": np.array(observations), "rewards": np.array(rewards),
            "truncations": np.array(truncations), **{f"info {k}": np.array(v) for k, v in infos.items()}}


# Every class of ML10 (train and test) and ML45's test classes, each in its class's xdist group.
DYNAMICS_CLASSES = [pytest.param(name, 3 * k % 50, marks=case.marks, id=f"{name}-{3 * k % 50}")
                    for k, case in enumerate(by_class(sorted(set(metaworld.env_dict.ML10_V3["train"])
                                                             | set(metaworld.env_dict.ML10_V3["test"])
                                                             | set(metaworld.env_dict.ML45_V3["test"]))))
                    for name in case.values]


@pytest.mark.slow
@pytest.mark.parametrize("name, index", DYNAMICS_CLASSES)
def test_our_tasks_give_metaworlds_own_dynamics(name, index, monkeypatch):
    """Our task dict set on our env (the fast path, the default) == Meta-World's Task set on its own env,
    200 random steps, every info key, bit for bit."""
    bench = metaworld.ML1(name, seed=0)
    # Our env's task lists come from this very benchmark object (its seeded ML1 built a second time gave the same
    # lists: Meta-World's determinism, 1.4-2.5 s of this test per class, not our conversion, which is what is
    # checked). A process that has them already builds none.
    built = []
    monkeypatch.setattr(metaworld, "ML1", lambda *args, **kwargs: built.append((args, kwargs)) or bench)
    actions = np.random.default_rng(index).uniform(-1, 1, (200, 4)).astype(np.float32)
    theirs = bench.train_classes[name]()
    theirs.set_task(bench.train_tasks[index])
    expected = rollout_of(theirs, actions)
    theirs.close()
    env = MetaWorldEnv("ML1", name)
    assert built in ([], [((name,), {"seed": 0})])
    env.reset_task(env.all_tasks()[index])
    got = rollout_of(env, actions)
    assert got.keys() == expected.keys() and "info success" in got
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
        assert got[key].dtype == expected[key].dtype, key
    env.close()


@pytest.mark.slow
def test_a_slot_switches_classes_with_bounded_memory(ml10):
    env = MetaWorldEnv("ML10", max_cached_envs=2)
    env.reset(seed=0)
    tasks = {t["env_name"]: t for t in env.all_tasks("train")}
    actions = np.random.default_rng(0).uniform(-1, 1, (30, 4)).astype(np.float32)
    fresh = {}
    for name in ("reach-v3", "push-v3", "door-open-v3"):
        single = MetaWorldEnv("ML10")
        single.reset_task(tasks[name])
        fresh[name] = rollout_of(single, actions)
        single.close()
    for name in ("reach-v3", "push-v3", "door-open-v3", "reach-v3", "door-open-v3", "push-v3"):
        env.reset_task(tasks[name])
        assert len(env._envs) <= 2 and type(env._env).__name__ == type(ml10.train_classes[name]()).__name__
        got = rollout_of(env, actions)
        assert got.keys() == fresh[name].keys()
        for key, want in fresh[name].items():
            np.testing.assert_array_equal(got[key], want, err_msg=key)  # nothing carried over from the other classes
        assert env.get_task()["env_name"] == name
    assert list(env._envs) == ["door-open-v3", "push-v3"]  # least recently used evicted
    env.close()


@pytest.mark.slow
def test_reward_versions_differ_and_are_selectable():
    actions = np.random.default_rng(1).uniform(-1, 1, (20, 4)).astype(np.float32)
    rewards = {}
    for version in ("v1", "v2"):
        env = MetaWorldEnv("ML1", "push-v3", reward_function_version=version)
        env.reset_task(env.all_tasks()[0])
        rewards[version] = rollout_of(env, actions)["rewards"]
        env.close()
    assert not np.array_equal(rewards["v1"], rewards["v2"])


@pytest.mark.parametrize("kwargs, message", [
    ({"benchmark": "ML5"}, "benchmark must be one of"),
    ({"benchmark": "ML1"}, "ML1 needs env_name"),
    ({"benchmark": "ML1", "env_name": "psh-v3"}, r"Did you mean \['push-v3'"),
    ({"benchmark": "ML10", "env_name": "push-v3"}, "env_name applies to ML1 only"),
    ({"benchmark": "ML10", "split": "valid"}, "split must be 'train' or 'test'"),
    ({"benchmark": "ML10", "reward_function_version": "v3"}, "reward_function_version"),
    ({"benchmark": "ML10", "max_cached_envs": 0}, "max_cached_envs"),
])
def test_bad_arguments_say_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MetaWorldEnv(**kwargs)


@pytest.mark.slow
def test_bad_tasks_say_what_is_wrong():
    env = MetaWorldEnv("ML1", "reach-v3")
    task = env.all_tasks()[0]
    with pytest.raises(ValueError, match="dict with keys"):
        env.reset_task({"goal": 1})
    with pytest.raises(ValueError, match="task of ML10 given to a ML1 env"):
        env.reset_task({**task, "benchmark": "ML10"})
    with pytest.raises(ValueError, match="'push-v3' is not part of ML1"):
        env.reset_task({**task, "env_name": "push-v3"})
    with pytest.raises(ValueError, match="finite"):
        env.reset_task({**task, "rand_vec": task["rand_vec"] * np.nan})
    env.close()


@pytest.mark.slow
def test_env_name_typos_list_the_metaworld_ids():
    with pytest.raises(ValueError, match="MetaWorld-ML1-<task>-v3"):
        make_env("MetaWorld-ML1-pussh-v3")


@pytest.mark.parametrize("num_workers, partial", [(0, False), pytest.param(2, False, marks=pytest.mark.slow),
                                                   pytest.param(2, True, marks=pytest.mark.slow)])
def test_sampler_episodes_and_success_equal_the_naive_reference(num_workers, partial):
    """ML10 (several classes per call, so slots switch classes), 40 steps, the sampler vs plain loops."""
    env_fn = make_env("MetaWorld-ML10-v3", max_episode_steps=40)
    policy = ElementwisePolicy(4, discrete=False)
    with MultiTaskSampler(None, None, 2, policy, None, env_fn=env_fn, seed=5, num_workers=num_workers,
                          partial=partial) as sampler:
        assert sampler.info_keys == ("success",)
        calls = []
        for call in range(2):
            tasks = sampler.sample_tasks(5)
            calls.append((tasks, sampler.rollout(tasks)))
    successes = 0
    for call, (tasks, batches) in enumerate(calls):
        reference = reference_rollout(env_fn, policy, tasks, 2, 5, call, 40)
        for got, want in zip(batches, reference):
            for name in ("observations", "actions", "rewards", "lengths"):
                assert torch.equal(getattr(got, name), want[name]), name
            assert torch.equal(got.infos["success"], want["infos"]["success"])
            successes += int(got.success().sum())
    assert len({t["env_name"] for tasks, _ in calls for t in tasks}) > 3
    assert successes > 0  # some ML10 tasks succeed under random actions: the values are not all zero


@pytest.mark.slow
def test_an_error_inside_metaworld_is_a_worker_error_with_the_task():
    env_fn = make_env("MetaWorld-ML1-reach-v3", max_episode_steps=5)
    with MultiTaskSampler(None, None, 1, ElementwisePolicy(4, False), None, env_fn=env_fn, seed=0,
                          num_workers=1) as sampler:
        task = sampler.sample_tasks(1)[0]
        with pytest.raises(WorkerError, match=r"(?s)during reset_task in env slot 0.*push-v3.*not part of ML1"):
            sampler.rollout([{**task, "env_name": "push-v3"}])


# Building ML45's task lists takes about a minute (Meta-World's resets); the process keeps them (benchmark_tasks),
# so the tests that build them share one xdist worker.
@pytest.mark.slow
@pytest.mark.xdist_group("metaworld-ML45")
def test_ml45_builds_and_samples_its_splits():
    env = gym.make("MetaWorld-ML45-v3", max_episode_steps=5)
    env.reset(seed=0)
    tasks = benchmark_tasks("ML45", None, 0)
    assert len(tasks["train"]) == 45 * 50 and len(tasks["test"]) == 5 * 50
    assert not {n for n, _ in tasks["train"]} & {n for n, _ in tasks["test"]}
    for task in env.unwrapped.sample_tasks(3):
        env.unwrapped.reset_task(task)
        env.reset()
        assert env.step(np.zeros(4, np.float32))[0].shape == (39,)
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("config", ["ml1-reach", "ml10"])
def test_tiny_training_run_and_held_out_evaluation(tmp_path, config, capsys):
    """train.py logs success before/after; test.py evaluates the test split and reports success."""
    import json

    folder = tmp_path / "run"
    train.main(["--config", f"configs/maml/metaworld/{config}.yaml", "--output-folder", str(folder), "--seed", "1",
                "--num-workers", "2", "--set", "num-batches=2", "--set", "meta-batch-size=3",
                "--set", "fast-batch-size=2", "--set", "env-kwargs.max_episode_steps=20",
                "--set", "hidden-sizes=[16]"])
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [0, 1]
    for row in rows:
        assert 0.0 <= row["success_before"] <= 1.0 and 0.0 <= row["success_after"] <= 1.0
        assert row["env_steps"] == 3 * 2 * 20 * 2
    results = evaluate.main(["--config", str(folder / "config.json"), "--meta-batch-size", "2", "--num-workers", "0"])
    test_names = set(metaworld.env_dict.ML10_V3["test"]) if config == "ml10" else {"reach-v3"}
    assert {t["split"] for t in results["tasks"]} == {"test"}
    assert {t["env_name"] for t in results["tasks"]} <= test_names
    assert results["success_per_step"].shape == (2, 2) and results["valid_success"].shape == (2, 2)
    assert np.array_equal(results["success_per_step"][-1], results["valid_success"].mean(axis=1))
    if config == "ml10":
        # Meta-World's protocol: every test goal once, in Meta-World's order, mean actions after adaptation.
        results = evaluate.main(["--config", str(folder / "config.json"), "--all-tasks", "--eval-actions", "mean",
                                 "--meta-batch-size", "50", "--fast-batch-size", "1", "--num-workers", "2"])
        want = metaworld.ML10(seed=0).test_tasks
        assert [t["env_name"] for t in results["tasks"]] == [t.env_name for t in want]
        assert all(np.array_equal(t["rand_vec"], pickle.loads(w.data)["rand_vec"])
                   for t, w in zip(results["tasks"], want))
        table = capsys.readouterr().out.split("task class")[-1].splitlines()
        assert [line.split("|")[1].strip() for line in table[1:6]] == ["50"] * 5
        assert table[6].startswith("mean over classes")
