"""MultiTaskVectorEnv against gymnasium's own SyncVectorEnv: the same env_fns, seeds and
actions give the same observations, rewards, flags and infos, bit for bit, in every autoreset
mode; spaces, metadata, call/get_attr/set_attr and the degenerate layouts likewise."""

import functools
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from maml_rl.envs import make_env
from maml_rl.envs.registration import ENV_IDS, METAWORLD_IDS, VectorEntryPoint, register_envs
from maml_rl.samplers.vector_env import MultiTaskVectorEnv, VectorResetNeeded
from maml_rl.samplers.workers.processes import usable_cpus
from maml_rl.samplers.workers.batched_child_env import mujoco_batch
from maml_rl.samplers.workers.vector_child_env import InfoColumns

from helpers.vector_envs import BoxEnv, DiscreteEnv, StructuredEnv, TextOneOfEnv, assert_same

pytestmark = pytest.mark.processes

MODES = list(AutoresetMode)


def drive(env_fns, mode, *, steps=30, seed=5, tasks=None, actions_dtype=None, **kwargs):
    """Run both vector envs side by side; the number of episodes that ended."""
    kwargs.setdefault("num_workers", 2)
    kwargs.setdefault("start_method", "fork")
    ours = MultiTaskVectorEnv(env_fns, autoreset_mode=mode, **kwargs)
    reference = SyncVectorEnv(env_fns, autoreset_mode=mode)
    ended = 0
    try:
        for name in ("single_observation_space", "observation_space", "single_action_space", "action_space",
                     "metadata", "num_envs", "render_mode"):
            assert getattr(ours, name) == getattr(reference, name), name
        if tasks is not None:
            ours.reset_tasks(tasks)
            for env, task in zip(reference.envs, tasks):
                env.unwrapped.reset_task(task)
        assert_same(ours.reset(seed=seed), reference.reset(seed=seed), "reset")
        space = reference.action_space
        space.seed(seed)
        done = np.zeros(len(env_fns), dtype=bool)
        for t in range(steps):
            if mode == AutoresetMode.DISABLED and done.any():
                seeds = [seed + 100 * (t + 1) + i for i in range(len(env_fns))]
                assert_same(ours.reset(seed=seeds, options={"reset_mask": done.copy(), "tag": t}),
                            reference.reset(seed=seeds, options={"reset_mask": done.copy(), "tag": t}),
                            f"reset with a mask before step {t}")
            actions = space.sample()
            if actions_dtype is not None:
                actions = actions.astype(actions_dtype)
            result = ours.step(actions)
            expected = reference.step(actions)
            assert_same(result, expected, f"step {t}")
            done = expected[2] | expected[3]
            ended += int(done.sum())
    finally:
        ours.close()
        reference.close()
    return ended


LAYOUTS = pytest.mark.parametrize("num_workers", [2, 0], ids=["2 workers", "in process"])


@LAYOUTS
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("env_class", [BoxEnv, DiscreteEnv, StructuredEnv, TextOneOfEnv], ids=lambda c: c.__name__)
def test_same_as_sync_vector_env(env_class, mode, num_workers):
    ended = drive([env_class] * 5, mode, num_workers=num_workers)
    assert ended > 10  # the autoresets were exercised


def test_actions_of_another_dtype_reach_the_envs_unchanged():
    """float64 actions for a float32 space travel pickled, so the envs get them as SyncVectorEnv gives them."""
    drive([BoxEnv] * 3, AutoresetMode.NEXT_STEP, actions_dtype=np.float64, steps=10)


@pytest.mark.parametrize("num_envs, num_workers", [(1, 1), (3, 3), (2, 5), (1, 0)],
                         ids=["one env", "one worker per env", "more workers than envs", "one env in process"])
def test_layouts(num_envs, num_workers):
    drive([BoxEnv] * num_envs, AutoresetMode.SAME_STEP, num_workers=num_workers, steps=15)


def test_more_workers_than_envs_start_one_per_env():
    envs = MultiTaskVectorEnv([BoxEnv] * 2, num_workers=5, start_method="fork")
    try:
        assert envs.num_workers == 2 and len(envs.worker_pids) == 2
    finally:
        envs.close()


@LAYOUTS
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_episodes_that_end_at_the_first_step(mode, num_workers):
    ended = drive([partial(BoxEnv, max_length=1)] * 3, mode, steps=6, num_workers=num_workers)
    assert ended >= 6


def test_different_env_fns_each_build_their_own_env():
    fns = [partial(BoxEnv, max_length=n) for n in (1, 2, 8, 3)]
    drive(fns, AutoresetMode.NEXT_STEP, num_workers=3)


@LAYOUTS
def test_two_resets_in_a_row_and_resets_mid_episode(num_workers):
    fns = [BoxEnv] * 4
    ours = MultiTaskVectorEnv(fns, num_workers=num_workers, start_method="fork")
    reference = SyncVectorEnv(fns)
    try:
        assert_same(ours.reset(seed=1), reference.reset(seed=1))
        assert_same(ours.reset(seed=[7, 8, 3, 9], options={"tag": "again"}),
                    reference.reset(seed=[7, 8, 3, 9], options={"tag": "again"}))
        for t in range(3):
            actions = reference.action_space.sample()
            assert_same(ours.step(actions), reference.step(actions), f"step {t}")
        # Mid-episode, and with seed=None: the envs go on from their own generators.
        assert_same(ours.reset(), reference.reset())
        actions = reference.action_space.sample()
        assert_same(ours.step(actions), reference.step(actions), "step after the third reset")
    finally:
        ours.close()
        reference.close()


def test_step_before_reset_is_refused():
    envs = MultiTaskVectorEnv([BoxEnv] * 2, num_workers=1, start_method="fork")
    try:
        with pytest.raises(VectorResetNeeded, match="before `reset`") as info:
            envs.step(envs.action_space.sample())
        assert isinstance(info.value, ResetNeeded)
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
    finally:
        envs.close()


def test_disabled_autoreset_refuses_to_step_an_ended_env():
    envs = MultiTaskVectorEnv([partial(BoxEnv, max_length=1)] * 2, num_workers=1, start_method="fork",
                              autoreset_mode=AutoresetMode.DISABLED)
    try:
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        with pytest.raises(VectorResetNeeded, match="DISABLED"):
            envs.step(envs.action_space.sample())
    finally:
        envs.close()


def test_call_get_attr_set_attr_and_render():
    fns = [partial(BoxEnv, render_mode="rgb_array")] * 3
    ours = MultiTaskVectorEnv(fns, num_workers=2, start_method="fork")
    reference = SyncVectorEnv(fns)
    try:
        assert_same(ours.reset(seed=3), reference.reset(seed=3))
        assert_same(ours.call("double", 4), reference.call("double", 4))
        assert_same(ours.get_attr("length"), reference.get_attr("length"))
        assert_same(ours.get_attr("np_random_seed"), reference.get_attr("np_random_seed"))
        for values in (2.5, [1.0, -1.0, 3.0], (0.5, 0.5, 0.5)):
            ours.set_attr("scale", values)
            reference.set_attr("scale", values)
            assert_same(ours.get_attr("scale"), reference.get_attr("scale"))
            actions = reference.action_space.sample()
            assert_same(ours.step(actions), reference.step(actions))
        assert_same(ours.render(), reference.render())
        with pytest.raises(ValueError, match="length equal to the number of environments"):
            ours.set_attr("scale", [1.0])
    finally:
        ours.close()
        reference.close()


def test_copy_false_returns_the_shared_buffer():
    envs = MultiTaskVectorEnv([BoxEnv] * 2, num_workers=1, start_method="fork", copy=False)
    try:
        first, _ = envs.reset(seed=0)
        kept = first.copy()
        second = envs.step(envs.action_space.sample())[0]
        assert second is first and not np.array_equal(first, kept)
    finally:
        envs.close()


FAST_PATH = pytest.mark.skipif(mujoco_batch is None, reason="the MuJoCo fast path needs mujoco.batch (MuJoCo >= 4)")


@functools.lru_cache(maxsize=None)
def _seeded_tasks(env_id, fast):
    """Three tasks drawn by a vector env of ``env_id`` on the fast path or off it, checked to follow the seed; the
    same for every mode and layout below, so drawn once per process."""
    probe = MultiTaskVectorEnv([make_env(env_id, max_episode_steps=4)] * 3, num_workers=2, start_method="fork",
                               mujoco_batch=fast or False)
    try:
        assert probe.mujoco_batch is fast
        tasks = probe.sample_tasks(3, seed=11)
        same, other = repr(probe.sample_tasks(3, seed=11)), repr(probe.sample_tasks(3, seed=12))
        assert repr(tasks) == same and repr(tasks) != other  # (AntPos's tasks hold arrays)
        return tasks
    finally:
        probe.close()


@pytest.mark.mujoco_version
@LAYOUTS
@pytest.mark.parametrize("fast", [pytest.param(True, marks=FAST_PATH), False], ids=["fast path", "per env"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", ["HalfCheetahVel-v5", "AntDir-v5", "AntPos-v5"])
def test_mujoco_envs_with_tasks_from_reset_tasks(env_id, mode, fast, num_workers):
    """Observations, rewards, flags and every step info (reward_ctrl included) of SyncVectorEnv, bit for bit, on
    the fast path and off it, in worker processes and in this process (the fast path on 2 mujoco.batch threads);
    wide actions make the Ants fall (terminations) besides the 4-step time limit, and in the steps between,
    the whole range steps at once and its infos travel as one array (InfoColumns)."""
    env_fn = make_env(env_id, max_episode_steps=4)
    tasks = _seeded_tasks(env_id, fast)
    threads = {"batch_threads": 2} if num_workers == 0 else {}
    ended = drive([env_fn] * 3, mode, tasks=tasks, steps=12, mujoco_batch=fast or False, num_workers=num_workers,
                  **threads)
    assert ended >= 6  # every env ended an episode at least twice


@FAST_PATH
def test_the_fast_path_is_taken_where_it_can_be_and_refused_where_asked_for_and_impossible():
    cheetah, navigation = make_env("HalfCheetahDir-v5"), make_env("2DNavigation-v0")
    for env_fns, expected in (([cheetah] * 2, True), ([navigation] * 2, False)):
        env = MultiTaskVectorEnv(env_fns, num_workers=1, start_method="fork")
        try:
            assert env.mujoco_batch is expected
        finally:
            env.close()
    with pytest.raises(ValueError, match="mujoco_batch=True, but the MuJoCo fast path cannot step these envs: "
                                         "Navigation2DEnv does not implement VectorisedMujocoEnv"):
        MultiTaskVectorEnv([navigation] * 2, num_workers=1, start_method="fork", mujoco_batch=True)
    # A worker whose envs differ in class steps them one at a time, with the same bits.
    drive([cheetah, make_env("HalfCheetahVel-v5")], AutoresetMode.NEXT_STEP, steps=5, num_workers=1)


@FAST_PATH
def test_a_call_on_the_fast_path_sees_each_envs_state_as_it_is():
    """The batch steps the simulations; before a call, each env's own MjData is given its simulation's state."""
    env_fn = make_env("AntVel-v5", max_episode_steps=50)
    ours = MultiTaskVectorEnv([env_fn] * 3, num_workers=2, start_method="fork", mujoco_batch=True)
    reference = SyncVectorEnv([env_fn] * 3)
    try:
        assert_same(ours.reset(seed=2), reference.reset(seed=2))
        reference.action_space.seed(2)
        for _ in range(3):
            actions = reference.action_space.sample()
            assert_same(ours.step(actions), reference.step(actions))
            assert_same(ours.call("state_vector"), reference.call("state_vector"), "state_vector()")
    finally:
        ours.close()
        reference.close()



def test_reset_tasks_changes_the_rewards():
    """The comparison above can fail: with the tasks set on one side only, the rewards differ."""
    env_fn = make_env("HalfCheetahVel-v5", max_episode_steps=4)
    ours = MultiTaskVectorEnv([env_fn] * 2, num_workers=1, start_method="fork")
    reference = SyncVectorEnv([env_fn] * 2)
    try:
        ours.reset_tasks([{"velocity": 0.3}, {"velocity": 1.7}])
        assert_same(ours.reset(seed=0), reference.reset(seed=0), "reset")
        actions = reference.action_space.sample()
        with pytest.raises(AssertionError, match="rewards"):
            assert_same(ours.step(actions)[1], reference.step(actions)[1], "rewards")
    finally:
        ours.close()
        reference.close()


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
@pytest.mark.slow
def test_same_under_every_start_method(start_method):
    drive([StructuredEnv] * 4, AutoresetMode.SAME_STEP, start_method=start_method, steps=10)
    drive([BoxEnv] * 4, AutoresetMode.NEXT_STEP, start_method=start_method, steps=10)


def test_every_registered_meta_env_has_a_vector_entry_point():
    register_envs()
    for env_id in ENV_IDS + METAWORLD_IDS:
        assert isinstance(gym.spec(env_id).vector_entry_point, VectorEntryPoint), env_id


@pytest.mark.parametrize("env_id", ["2DNavigation-v0", "Bandit-K5-v0", "TabularMDP-v0"])
def test_make_vec_builds_one_equal_to_sync(env_id):
    register_envs()
    kwargs = {"num_envs": 3, "max_episode_steps": 4}
    ours = gym.make_vec(env_id, vectorization_mode="vector_entry_point", num_workers=2, start_method="fork",
                        autoreset_mode=AutoresetMode.SAME_STEP, **kwargs)
    reference = gym.make_vec(env_id, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "SameStep"},
                             **kwargs)
    try:
        assert isinstance(ours, MultiTaskVectorEnv) and ours.num_workers == 2
        assert ours.spec.id == env_id and ours.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        default = gym.make_vec(env_id, num_envs=1, start_method="fork")  # make_vec's default mode is ours now
        assert isinstance(default, MultiTaskVectorEnv)
        default.close()
        tasks = ours.sample_tasks(3, seed=4)
        ours.reset_tasks(tasks)
        for env, task in zip(reference.envs, tasks):
            env.unwrapped.reset_task(task)
        assert_same(ours.reset(seed=2), reference.reset(seed=2))
        reference.action_space.seed(0)
        for t in range(9):
            actions = reference.action_space.sample()
            assert_same(ours.step(actions), reference.step(actions), f"step {t}")
    finally:
        ours.close()
        reference.close()


def test_reset_async_and_call_async_as_async_vector_env_has_them():
    """Code written for AsyncVectorEnv's split calls runs unchanged, with gymnasium's errors for a wrong order."""
    from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError

    env_fns = [partial(BoxEnv, max_length=3)] * 3
    ours = MultiTaskVectorEnv(env_fns, num_workers=2, start_method="fork")
    reference = SyncVectorEnv(env_fns)
    try:
        with pytest.raises(NoAsyncCallError, match="without any prior call to `reset_async`"):
            ours.reset_wait()
        ours.reset_async(seed=4, options={"tag": 1})
        with pytest.raises(AlreadyPendingCallError, match="pending call to `reset`"):
            ours.reset_async(seed=4)
        with pytest.raises(AlreadyPendingCallError, match="pending call to `reset`"):
            ours.step(reference.action_space.sample())
        with pytest.raises(NoAsyncCallError, match="without any prior call to `call_async`"):
            ours.call_wait()
        with pytest.raises(NotImplementedError, match="timeout=None"):
            ours.reset_wait(timeout=1.0)
        assert_same(ours.reset_wait(), reference.reset(seed=4, options={"tag": 1}), "reset_wait")
        actions = reference.action_space.sample()
        assert_same(ours.step(actions), reference.step(actions), "step after reset_wait")
        ours.call_async("double", 3)
        assert_same(ours.call_wait(), reference.call("double", 3), "call_wait")
        ours.step_async(actions)
        with pytest.raises(AlreadyPendingCallError, match="pending call to `step`"):
            ours.call_async("double", 3)
        assert_same(ours.step_wait(), reference.step(actions), "step_wait")
    finally:
        ours.close()
        reference.close()


def test_info_columns_build_what_add_info_builds_env_by_env():
    """InfoColumns.add_to against gymnasium's own _add_info over the same values: after infos of other envs
    (a key of another type, keys first seen later), for a range in the middle, twice in a row."""
    reference_env = SyncVectorEnv([BoxEnv] * 6)
    values = np.array([[0.1, -2.5], [np.nan, 1e-300], [3.0, -0.0]])  # b: into the int array of env 0's b
    earlier = [(0, {"b": 7, "z": 1.5}), (5, {"a": 2.0, "final_info": {"x": 1.0}})]
    for repeat in (1, 2):
        reference, ours = {}, {}
        for env_index, info in earlier:
            reference = reference_env._add_info(reference, info, env_index)
            ours = reference_env._add_info(ours, info, env_index)
        for _ in range(repeat):
            for i in range(3):
                reference = reference_env._add_info(reference, {"a": float(values[i, 0]), "b": float(values[i, 1])},
                                                    2 + i)
            InfoColumns(2, ("a", "b"), values).add_to(ours, 6)
        assert_same(ours, reference, f"infos after {repeat} add(s)")
    reference_env.close()


@FAST_PATH
def test_the_default_layout_is_the_samplers():
    """As the sampler: envs on the fast path step in this process on a thread per CPU, unless a step_timeout
    asks for processes; the rest get a worker process per CPU. Contradictory settings are refused."""
    cheetah, navigation = make_env("HalfCheetahVel-v5"), make_env("2DNavigation-v0")
    cpus = usable_cpus()
    for env_fns, kwargs, workers in (([cheetah] * 3, {}, 0), ([cheetah] * 3, {"step_timeout": 30.0}, min(cpus, 3)),
                                     ([navigation] * 3, {}, 0 if cpus == 1 else min(cpus, 3))):
        envs = MultiTaskVectorEnv(env_fns, start_method="fork", **kwargs)
        try:
            assert envs.num_workers == workers and len(envs.worker_pids) == workers
        finally:
            envs.close()
    for kwargs, message in (({"num_workers": 2, "batch_threads": 2}, "batch_threads applies when the envs step in "
                                                                     "this process"),
                            ({"num_workers": 0, "step_timeout": 5.0}, "step_timeout needs worker processes"),
                            ({"num_workers": -1}, "num_workers must be an int >= 0"),
                            ({"num_workers": 0, "batch_threads": 0}, "batch_threads must be an int >= 1")):
        with pytest.raises(ValueError, match=message):
            MultiTaskVectorEnv([cheetah] * 2, start_method="fork", **kwargs)
