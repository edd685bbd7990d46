"""The Meta-World fast path (``maml_rl.envs.metaworld_fast``) against Meta-World's own envs.

The independent truth is Meta-World's own class, as installed, stepped with
the same actions from the same task: every v3 class (ML10's and ML45's train
and test classes are all among them) must give the same observations, rewards
(type and bits), terminations, truncations and info values (type and bits) over
resets, goal changes and 500-step episodes, under random actions and under
Meta-World's scripted policies (which grasp, push and succeed, so the contact
and reward branches are taken). The helpers are checked against NumPy and
SciPy on random and edge inputs, and Meta-World itself must stay unmodified.
"""

import inspect
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

if os.environ.get("MAML_RL_REQUIRE_METAWORLD"):
    import metaworld  # CI installs the extra: a missing Meta-World fails here instead of skipping
else:
    metaworld = pytest.importorskip("metaworld")
import metaworld.env_dict
import mujoco
import metaworld.sawyer_xyz_env
from metaworld.policies import ENV_POLICY_MAP
from metaworld.utils import reward_utils as metaworld_reward_utils
from scipy.spatial.transform import Rotation

from maml_rl.envs import make_env
from maml_rl.envs import metaworld as ours
from maml_rl.envs.metaworld import MetaWorldEnv, _metaworld_task
from maml_rl.envs.metaworld_fast import base, classes, fast_class
from maml_rl.envs.metaworld_fast.numpy_norm import norm
from maml_rl.envs.metaworld_fast.reward_utils import tolerance
from maml_rl.envs.metaworld_fast.rotation import EXACT, FastRotation, quat_from_matrix
from maml_rl.samplers import MultiTaskSampler

from helpers.metaworld_classes import by_class, first_goals
from helpers.naive_sampler import ElementwisePolicy

# A few cases run in the quick tier (ML1's reach, push and pick-place classes, one sampler comparison); the rest
# are slow.
pytestmark = pytest.mark.metaworld

ALL_CLASSES = list(metaworld.env_dict.ALL_V3_ENVIRONMENTS)
QUICK_CLASSES = ("reach-v3", "push-v3", "pick-place-v3")


def same(a, b) -> bool:
    """Equal type and bits (NaN equals NaN)."""
    return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_every_ml10_and_ml45_class_is_covered():
    for benchmark in ("ML10_V3", "ML45_V3"):
        for split in ("train", "test"):
            assert set(getattr(metaworld.env_dict, benchmark)[split]) <= set(ALL_CLASSES)
    assert len(ALL_CLASSES) == 50


# The fast path drives the installed MuJoCo's own calls and fields: its bits are checked under each version CI
# installs (the mujoco_version marker), for every class.
@pytest.mark.mujoco_version
@pytest.mark.parametrize("name", by_class(ALL_CLASSES, slow=lambda name: name not in QUICK_CLASSES))
def test_the_fast_class_steps_like_metaworlds_own(name):
    """Three episodes on two goals: random actions to the 500-step truncation; the scripted policy from a
    reset made after 100 steps and another right after it; the scripted policy with noise."""
    compare_episodes(name, "v2", (500, 100, 200, 200))


@pytest.mark.slow
@pytest.mark.parametrize("name", by_class(ALL_CLASSES))
def test_the_fast_class_steps_like_metaworlds_own_with_v1_rewards(name):
    """The original paper's rewards (each class's other branch of compute_reward), shorter episodes."""
    compare_episodes(name, "v1", (120, 40, 60, 60), truncation=False)


def compare_episodes(name, version, lengths, truncation=True):
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
    fast_cls = fast_class(cls)
    assert fast_cls is not None and issubclass(fast_cls, cls) and fast_cls.__name__ == cls.__name__
    goals = first_goals(name, 2)
    theirs, mine = cls(reward_function_version=version), fast_cls(reward_function_version=version)
    assert mine.task_name == theirs.task_name
    policy = ENV_POLICY_MAP[name]()
    rng = np.random.default_rng(ALL_CLASSES.index(name))
    counts = {"steps": 0, "success": 0}

    def reset_both():
        (o1, i1), (o2, i2) = theirs.reset(), mine.reset()
        assert same(o1, o2) and i1.keys() == i2.keys()
        return o1

    def step_both(action, t):
        r1, r2 = theirs.step(action.copy()), mine.step(action.copy())
        for k, (a, b) in enumerate(zip(r1[:4], r2[:4])):
            assert same(a, b), f"{name} step {t}: {('observation', 'reward', 'terminated', 'truncated')[k]}"
        assert r1[4].keys() == r2[4].keys()
        for key in r1[4]:
            assert same(r1[4][key], r2[4][key]), f"{name} step {t}: info[{key!r}] {r1[4][key]} != {r2[4][key]}"
        counts["steps"] += 1
        counts["success"] += bool(r1[4]["success"])
        return r1

    def scripted(observation, noise):
        observation = observation.copy()
        observation[-3:] = theirs._get_pos_goal()  # the policies read the goal, which the observation hides
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Constant(s) may be too high": clipped by the env, as intended
            action = np.asarray(policy.get_action(observation))
        return (action + noise * rng.normal(size=4)).astype(np.float32)

    for env in (theirs, mine):
        env.set_task(_metaworld_task(name, goals[0]))
    reset_both()
    for t in range(lengths[0]):
        observation, _, _, truncated, _ = step_both(rng.uniform(-1, 1, 4).astype(np.float32), t)
    assert truncated == truncation  # Meta-World's own truncation at max_path_length
    for env in (theirs, mine):
        env.set_task(_metaworld_task(name, goals[1]))
    observation = reset_both()
    for t in range(lengths[1]):
        observation = step_both(scripted(observation, 0.0), t)[0]
    reset_both()
    observation = reset_both()  # two resets in a row
    for t in range(lengths[2]):
        observation = step_both(scripted(observation, 0.0), t)[0]
    observation = reset_both()
    for t in range(lengths[3]):
        observation = step_both(scripted(observation, 0.3), t)[0]
    assert counts["steps"] == sum(lengths)
    theirs.close()
    mine.close()


@pytest.mark.slow
def test_a_new_env_gets_a_fresh_model_whatever_earlier_envs_did_to_theirs():
    """Fast envs copy one compiled model per file; a reset writes into an env's model (the goal site): the next
    env's model must still equal the one Meta-World's own class compiles from the XML, byte for byte."""
    def saved(model):
        buffer = np.zeros(mujoco.mj_sizeModel(model), np.uint8)
        mujoco.mj_saveModel(model, None, buffer)
        return buffer.tobytes()

    name = "push-v3"
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
    first = fast_class(cls)()
    first.set_task(_metaworld_task(name, first_goals(name, 6)[5]))
    first.reset()
    second, own = fast_class(cls)(), cls()
    assert saved(first.model) != saved(own.model)  # the reset did write into the first env's model
    assert saved(second.model) == saved(own.model)
    assert second.model is not first.model


@pytest.mark.slow
def test_the_scripted_episodes_reach_the_contact_and_success_branches():
    """The class test is not vacuous: on a pick-and-place class the fast path sees grasps and successes."""
    name = "pick-place-v3"
    env = fast_class(metaworld.env_dict.ALL_V3_ENVIRONMENTS[name])()
    env.set_task(_metaworld_task(name, first_goals(name, 2)[1]))
    policy = ENV_POLICY_MAP[name]()
    observation, _ = env.reset()
    grasps = successes = 0
    for _ in range(300):
        view = observation.copy()
        view[-3:] = env._get_pos_goal()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            observation, _, _, _, info = env.step(np.asarray(policy.get_action(view), dtype=np.float32))
        grasps += info["grasp_success"] > 0
        successes += info["success"] > 0
    assert grasps > 0 and successes > 0


@pytest.mark.slow
def test_contacts_and_the_grasp_reward_equal_metaworlds_on_the_same_states():
    """On each state of scripted grasps, the fast ``touching_object`` and ``_gripper_caging_reward`` against
    ``SawyerXYZEnv``'s own functions called on the same env, over geoms and argument sets no task uses."""
    sawyer = metaworld.sawyer_xyz_env.SawyerXYZEnv
    rng = np.random.default_rng(4)
    touching = {True: 0, False: 0}
    one_pad_only = 0
    for name in ("pick-place-v3", "push-v3"):
        env = fast_class(metaworld.env_dict.ALL_V3_ENVIRONMENTS[name])()
        env.set_task(_metaworld_task(name, first_goals(name, 3)[2]))
        policy = ENV_POLICY_MAP[name]()
        observation, _ = env.reset()
        pads = [env.data.geom(g).id for g in ("leftpad_geom", "rightpad_geom")]
        for t in range(250):
            view = observation.copy()
            view[-3:] = env._get_pos_goal()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                action = (np.asarray(policy.get_action(view)) + 0.2 * rng.normal(size=4)).astype(np.float32)
            observation, *_ = env.step(action)
            for geom in {env._get_id_main_object(), *rng.integers(0, env.model.ngeom, 3).tolist()}:
                want = sawyer.touching_object(env, geom)
                assert same(env.touching_object(geom), want), (name, t, geom)
                touching[bool(want)] += 1
                forces = [sum(env.data.efc_force[c.efc_address] for c in env.data.contact
                              if pad in (c.geom1, c.geom2) and geom in (c.geom1, c.geom2)) for pad in pads]
                one_pad_only += (forces[0] > 0) != (forces[1] > 0)
            for density in ({}, {"high_density": True}, {"medium_density": True}):
                kwargs = dict(obj_radius=rng.choice([0.015, 0.02]), pad_success_thresh=rng.choice([0.05, 0.03]),
                              object_reach_radius=rng.choice([0.01, 0.02]), xz_thresh=rng.choice([0.005, 0.01]),
                              desired_gripper_effort=rng.choice([1.0, 0.7]), **density)
                obj = observation[4:7]
                assert same(sawyer._gripper_caging_reward(env, action, obj, **kwargs),
                            base.FAST_METHODS["_gripper_caging_reward"](env, action, obj, **kwargs)), (name, t)
        env.close()
    assert touching[True] > 0 and touching[False] > 0 and one_pad_only > 0


@pytest.mark.slow
def test_metaworld_itself_is_left_unmodified():
    """Building and stepping fast classes changes nothing of Meta-World: its modules keep their own helpers,
    and a plain Meta-World env here steps like one in a process that never imported maml_rl."""
    name = "push-v3"
    fast = fast_class(metaworld.env_dict.ALL_V3_ENVIRONMENTS[name])()
    fast.set_task(_metaworld_task(name, first_goals(name, 1)[0]))
    fast.reset()
    module = sys.modules[metaworld.env_dict.ALL_V3_ENVIRONMENTS[name].__module__]
    assert module.reward_utils is metaworld_reward_utils and module.Rotation is Rotation and module.np is np
    assert metaworld_reward_utils.tolerance.__module__ == "metaworld.utils.reward_utils"
    for attr in base.FAST_METHODS:  # the base class keeps its own methods
        method = inspect.getattr_static(metaworld.sawyer_xyz_env.SawyerXYZEnv, attr)
        assert getattr(method, "fget", method).__module__.split(".")[0] in ("metaworld", "gymnasium"), attr

    script = textwrap.dedent(f"""
        import pickle, sys, numpy as np, mujoco, metaworld, metaworld.env_dict, metaworld.sawyer_xyz_env as sx
        assert "maml_rl" not in sys.modules
        if mujoco.mjNEQDATA != 11:  # MuJoCo >= 3.17 has 12 weld numbers: Meta-World's reset needs this
            def welds(self):
                for i in range(self.model.eq_data.shape[0]):
                    if self.model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
                        self.model.eq_data[i, :11] = [0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5]
            sx.SawyerMocapBase.reset_mocap_welds = welds
        bench = metaworld.ML1({name!r}, seed=0)
        env = bench.train_classes[{name!r}]()
        env.set_task(bench.train_tasks[0])
        out = [env.reset()[0]]
        for a in np.random.default_rng(3).uniform(-1, 1, (150, 4)).astype(np.float32):
            o, r, _, _, info = env.step(a)
            out += [o, np.array([r, info["success"], info["grasp_reward"]])]
        sys.stdout.buffer.write(pickle.dumps(out))
    """)
    env = os.environ | {"PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120, env=env, cwd="/")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    expected = pickle.loads(result.stdout)
    here = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]()
    here.set_task(_metaworld_task(name, first_goals(name, 1)[0]))
    got = [here.reset()[0]]
    for a in np.random.default_rng(3).uniform(-1, 1, (150, 4)).astype(np.float32):
        o, r, _, _, info = here.step(a)
        got += [o, np.array([r, info["success"], info["grasp_reward"]])]
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.tobytes() == b.tobytes()


# -- the helpers against NumPy and SciPy -------------------------------------------------

@pytest.mark.slow
def test_quaternions_equal_scipys():
    assert EXACT  # checked at import against the installed SciPy
    rng = np.random.default_rng(0)
    matrices = list(Rotation.from_quat(rng.normal(size=(3000, 4))).as_matrix())
    matrices += [np.eye(3), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])]
    for axis in np.eye(3):  # near 180 degrees: the m00 / m11 / m22 branches
        matrices += list(Rotation.from_rotvec(np.outer(np.pi - rng.uniform(0, 1e-3, 50), axis)).as_matrix())
    matrices += [1.001 * np.eye(3), np.eye(3) + 1e-9 * rng.normal(size=(3, 3))]  # not orthogonal: SciPy's SVD
    for m in matrices:
        assert quat_from_matrix(m).tobytes() == Rotation.from_matrix(m).as_quat().tobytes()
        assert FastRotation.from_matrix(m).as_quat().tobytes() == Rotation.from_matrix(m).as_quat().tobytes()
    m = matrices[0]
    assert FastRotation.from_matrix(m).as_quat(canonical=True).tobytes() == \
        Rotation.from_matrix(m).as_quat(canonical=True).tobytes()
    assert np.array_equal(FastRotation.from_matrix(m).as_matrix(), Rotation.from_matrix(m).as_matrix())
    assert FastRotation.from_euler is Rotation.from_euler
    with pytest.raises(ValueError, match="Non-positive determinant"):  # SciPy's own error
        quat_from_matrix(np.diag([1.0, 1.0, -1.0]))


def test_tolerance_equals_metaworlds():
    rng = np.random.default_rng(1)
    cases = [(0.0, (0, 0), 0.0), (0.05, (0, 0.05), 0.3), (0.0500001, (0, 0.05), 0.3), (-1.0, (0, 0.05), 0.0),
             (float("nan"), (0, 0.05), 0.3), (float("inf"), (0, 0.05), 0.3), (0.2, (0.015, 0.05), np.float64(0.7))]
    for _ in range(20000):
        lower = rng.choice([0, 0.0, 0.015, -0.02])
        cases.append((rng.normal() * rng.choice([1e-3, 0.05, 1.0, 10.0]), (lower, lower + rng.choice([0, 0.05])),
                      rng.choice([0.0, 0.3, abs(rng.normal())])))
    for k, (x, bounds, margin) in enumerate(cases):
        x = np.float64(x) if k % 2 else float(x)
        for sigmoid, value in (("long_tail", 0.1), ("gaussian", 0.1), ("long_tail", 0.5), ("gaussian", 0.01)):
            kwargs = dict(bounds=bounds, margin=margin, sigmoid=sigmoid, value_at_margin=value)
            assert same(tolerance(x, **kwargs), metaworld_reward_utils.tolerance(x, **kwargs)), (x, kwargs)
    # Arrays and other sigmoids are Meta-World's own function's.
    xs = rng.normal(size=5)
    assert np.array_equal(tolerance(xs, (0, 0.1), 0.5, "long_tail"),
                          metaworld_reward_utils.tolerance(xs, (0, 0.1), 0.5, "long_tail"))
    assert same(tolerance(0.3, (0, 0.1), 0.5, "linear"), metaworld_reward_utils.tolerance(0.3, (0, 0.1), 0.5, "linear"))
    for bad in (dict(bounds=(1, 0)), dict(margin=-1.0)):
        with pytest.raises(ValueError):
            tolerance(0.3, **({"bounds": (0, 0.1), "margin": 0.5, "sigmoid": "long_tail"} | bad))


def test_norm_equals_numpys():
    rng = np.random.default_rng(2)
    for n in (1, 2, 3, 7):
        for scale in (1e-8, 1.0, 1e8):
            for _ in range(2000):
                v = rng.normal(size=n) * scale
                assert same(norm(v), np.linalg.norm(v))
                assert same(norm(v, ord=2), np.linalg.norm(v, ord=2))
    for args in ((np.ones((2, 3)),), (np.ones(3, dtype=np.float32),), (np.arange(3),), ([3.0, 4.0],),
                 (np.ones(3), 1), (np.ones((2, 3)), None, 1)):
        assert np.array_equal(norm(*args), np.linalg.norm(*args))


# -- the env and the sampler --------------------------------------------------------------

@pytest.mark.slow
def test_fast_is_the_default_and_false_steps_metaworlds_classes():
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS["push-v3"]
    env = MetaWorldEnv("ML1", "push-v3")
    env.reset(seed=0)
    assert type(env._env) is fast_class(cls)
    plain = MetaWorldEnv("ML1", "push-v3", fast=False)
    plain.reset(seed=0)
    assert type(plain._env) is cls
    with pytest.raises(ValueError, match="fast must be true or false"):
        MetaWorldEnv("ML1", "push-v3", fast="yes")


@pytest.mark.slow
def test_fast_envs_pickle_as_metaworlds_do():
    """Meta-World's envs pickle (their model file, attributes and qpos/qvel); a fast env is found again by
    pickle, and its copy steps as the copy of Meta-World's own env does."""
    name = "pick-place-v3"
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
    task = _metaworld_task(name, first_goals(name, 1)[0])
    copies = []
    for make in (cls, fast_class(cls)):
        env = make()
        env.set_task(task)
        env.reset()
        for action in np.random.default_rng(0).uniform(-1, 1, (20, 4)).astype(np.float32):
            env.step(action)
        copy = pickle.loads(pickle.dumps(env))
        assert type(copy) is make
        copies.append(copy)
    for action in np.random.default_rng(1).uniform(-1, 1, (20, 4)).astype(np.float32):
        (o1, r1, *_), (o2, r2, *_) = copies[0].step(action.copy()), copies[1].step(action.copy())
        assert same(o1, o2) and same(r1, r2)
    assert copies[0].reset()[0].tobytes() == copies[1].reset()[0].tobytes()
    with pytest.raises(AttributeError, match="no Meta-World v3 task class"):
        classes.BY_NAME.NotAClass


@pytest.mark.slow
def test_an_unchecked_metaworld_version_falls_back_with_one_log_line(monkeypatch, caplog):
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS["reach-v3"]
    monkeypatch.setattr(classes, "CHECKED_VERSIONS", ("0.0.1",))
    for cached in (classes.unavailable_reason, classes.fast_class, ours._log_fast_path_off):
        cached.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="maml_rl.envs.metaworld"):
            for _ in range(2):
                env = MetaWorldEnv("ML1", "reach-v3")
                env.reset(seed=0)
                assert type(env._env) is cls
        lines = [r.getMessage() for r in caplog.records if "fast path off" in r.getMessage()]
        assert len(lines) == 1 and "is not one of the versions" in lines[0] and "0.0.1" in lines[0]
    finally:
        for cached in (classes.unavailable_reason, classes.fast_class, ours._log_fast_path_off):
            cached.cache_clear()


def rollouts_on_both_paths(env_name, horizon, batch_size, num_tasks, calls, seed, num_workers):
    """``calls`` rollouts of the same tasks through the sampler, on the fast path and on Meta-World's classes."""
    runs = []
    for fast in (True, False):
        env_fn = make_env(env_name, max_episode_steps=horizon, fast=fast)
        with MultiTaskSampler(None, None, batch_size, ElementwisePolicy(4, discrete=False), None, env_fn=env_fn,
                              seed=seed, num_workers=num_workers) as sampler:
            tasks = sampler.sample_tasks(num_tasks)
            runs.append([sampler.rollout(tasks) for _ in range(calls)])
    return runs


def assert_same_episodes(got, want):
    for name in ("observations", "actions", "rewards", "lengths"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    assert torch.equal(got.infos["success"], want.infos["success"])


@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_sampler_episodes_are_the_same_on_both_paths(num_workers):
    """ML10 through the sampler (slots switch classes), fast and plain: the same episodes, bit for bit."""
    fast, plain = rollouts_on_both_paths("MetaWorld-ML10-v3", 60, 2, 6, 1, 3, num_workers)
    for got, want in zip(fast[0], plain[0]):
        assert_same_episodes(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("num_workers", [0, 2])
def test_horizon_one_one_task_two_calls_in_a_row_are_the_same_on_both_paths(num_workers):
    """Degenerate shapes: one task, one episode per task, episodes that end at their first step, two calls."""
    runs = rollouts_on_both_paths("MetaWorld-ML1-push-v3", 1, 1, 1, 2, 8, num_workers)
    for calls in zip(*runs):
        for got, want in zip(*calls):
            assert got.lengths.tolist() == [1]
            assert_same_episodes(got, want)
    assert not torch.equal(runs[0][0][0].actions, runs[0][1][0].actions)  # the second call is a new draw
