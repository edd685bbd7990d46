"""MultiTaskVectorEnv under a caller's mistakes, against gymnasium's own vector envs: it raises what
``SyncVectorEnv`` raises (the same type; an env's own error with its message, its traceback below), before any env
steps, and stays usable: the next correct step gives ``SyncVectorEnv``'s bits, in every layout."""

import pickle
import traceback
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from maml_rl.envs import make_env
from maml_rl.samplers.vector_env import MultiTaskVectorEnv
from maml_rl.samplers.workers.vector_mistakes import EnvTraceback

from helpers.process_utils import wait_until_gone
from helpers.vector_envs import BoxEnv, StructuredEnv, assert_same

pytestmark = pytest.mark.processes

LAYOUTS = pytest.mark.parametrize("num_workers", [2, 0], ids=["2 workers", "in process"])
BOX_FNS = [partial(BoxEnv, max_length=50)] * 4  # episodes long enough not to end in these tests


def raised_by(mistake, vector_env) -> Exception:
    with pytest.raises(Exception) as info:
        mistake(vector_env)
    return info.value


def step_both(ours, reference, steps=2):
    for t in range(steps):
        actions = reference.action_space.sample()
        assert_same(ours.step(actions), reference.step(actions), f"step {t} after the mistake")


def assert_raised_as(error, expected):
    """The same exception as SyncVectorEnv's, its type and message the last line of the traceback."""
    assert type(error) is type(expected), f"{type(error).__name__}: {error} instead of {type(expected).__name__}"
    assert traceback.format_exception(error)[-1] == traceback.format_exception_only(expected)[-1]


@LAYOUTS
def test_a_batch_of_the_wrong_number_of_rows_is_refused_before_any_env_steps(num_workers):
    ours = MultiTaskVectorEnv(BOX_FNS, num_workers=num_workers, start_method="fork")
    reference, mistaken = SyncVectorEnv(BOX_FNS), SyncVectorEnv(BOX_FNS)
    try:
        for vector_env in (ours, reference, mistaken):
            vector_env.reset(seed=1)
        reference.action_space.seed(2)
        step_both(ours, reference)
        mistakes = {"3 rows": np.ones((3, 2), np.float32), "5 rows": np.ones((5, 2), np.float32),
                    "8 numbers": np.ones(8, np.float32), "3 rows of float64": np.ones((3, 2)),
                    "a list of 3 rows": [np.ones(2, np.float32)] * 3}
        for label, actions in mistakes.items():
            expected = raised_by(lambda v: v.step(actions), mistaken)
            error = raised_by(lambda v: v.step(actions), ours)
            assert type(error) is type(expected) is ValueError, label
            assert f"shape {np.shape(actions)}" in str(error) and "for 4 envs" in str(error), (label, str(error))
            step_both(ours, reference)  # no env stepped: the next steps are SyncVectorEnv's own
    finally:
        for vector_env in (ours, reference, mistaken):
            vector_env.close()


@LAYOUTS
def test_wrong_rows_of_dict_actions_are_refused_as_sync_vector_env_refuses_them(num_workers):
    fns = [partial(StructuredEnv, max_length=50)] * 3
    ours = MultiTaskVectorEnv(fns, num_workers=num_workers, start_method="fork")
    reference, mistaken = SyncVectorEnv(fns), SyncVectorEnv(fns)
    try:
        for vector_env in (ours, reference, mistaken):
            vector_env.reset(seed=4)
        reference.action_space.seed(5)
        for actions in ({"move": np.zeros((2, 2), np.float32), "choose": np.zeros(3, np.int64)},
                        {"move": np.zeros((3, 3), np.float32), "choose": np.zeros(3, np.int64)}):
            expected = raised_by(lambda v: v.step(actions), mistaken)
            error = raised_by(lambda v: v.step(actions), ours)
            assert type(error) is type(expected) is ValueError
            assert f"actions['move'] of shape {actions['move'].shape}" in str(error)
            step_both(ours, reference)
    finally:
        for vector_env in (ours, reference, mistaken):
            vector_env.close()


@LAYOUTS
def test_caller_mistakes_raise_the_plain_error_and_leave_the_env_usable(num_workers):
    ours = MultiTaskVectorEnv(BOX_FNS, num_workers=num_workers, start_method="fork")
    pids = ours.worker_pids
    reference, mistaken = SyncVectorEnv(BOX_FNS), SyncVectorEnv(BOX_FNS)
    try:
        for vector_env in (ours, reference, mistaken):
            vector_env.reset(seed=3)
        reference.action_space.seed(4)
        # The batch's shape, not a worker's slice of it (2 rows of 4).
        for actions, shape in ((np.ones((4, 3), np.float32), "(4, 3)"), (np.ones(2, np.float32), "(2,)")):
            expected = raised_by(lambda v: v.step(actions), mistaken)
            error = raised_by(lambda v: v.step(actions), ours)
            assert type(error) is type(expected) is ValueError
            assert f"actions of shape {shape}" in str(error) and "expected (4, 2)" in str(error)
            step_both(ours, reference)
        # An env's own error, raised by each env as SyncVectorEnv raises it (they change no env).
        for mistake in (lambda v: v.get_attr("no_such_attribute"), lambda v: v.call("no_such_method", 1),
                        lambda v: v.call("double", 1, 2)):
            expected = raised_by(mistake, reference)
            error = raised_by(mistake, ours)
            assert_raised_as(error, expected)
            if num_workers:  # the env's traceback, from its worker, as the cause
                assert isinstance(error.__cause__, EnvTraceback)
                assert "in env 0 (in worker 0)" in str(error.__cause__) and "Traceback" in str(error.__cause__)
            step_both(ours, reference)
        assert ours.worker_pids == pids and not ours.closed
    finally:
        for vector_env in (ours, reference, mistaken):
            vector_env.close()
    assert wait_until_gone(pids) == []


@LAYOUTS
def test_render_without_a_render_mode_and_a_task_an_env_refuses_raise_as_sync_vector_env(num_workers):
    """HalfCheetahVel (on the MuJoCo fast path where there is one): its renderer refuses ``render_mode=None``, and
    its ``reset_task`` a malformed task. Envs 0 and 1 take their tasks before env 2 refuses its own, in both."""
    fns = [make_env("HalfCheetahVel-v5", max_episode_steps=20)] * 4
    ours = MultiTaskVectorEnv(fns, num_workers=num_workers, start_method="fork")
    reference = SyncVectorEnv(fns)
    tasks = [{"velocity": 0.5}, {"velocity": 1.5}, {"velocity": "fast"}, {"velocity": 2.5}]
    try:
        for vector_env in (ours, reference):
            vector_env.reset(seed=6)
        reference.action_space.seed(7)
        step_both(ours, reference)
        assert_raised_as(raised_by(lambda v: v.render(), ours), raised_by(lambda v: v.render(), reference))
        step_both(ours, reference)
        with pytest.raises(ValueError, match=r"actions of shape \(3, 6\), expected \(4, 6\)"):
            ours.step(np.ones((3, 6), np.float32))  # (SyncVectorEnv steps envs 0-2 before it finds the 4th missing)
        step_both(ours, reference)

        def reset_tasks(vector_env):
            if vector_env is reference:
                for env, task in zip(reference.envs, tasks, strict=True):
                    env.unwrapped.reset_task(task)
            else:
                vector_env.reset_tasks(tasks)

        assert_raised_as(raised_by(reset_tasks, ours), raised_by(reset_tasks, reference))
        assert ours.call("get_task") == reference.call("get_task")
        for vector_env in (ours, reference):
            vector_env.reset(seed=8)
        step_both(ours, reference)
    finally:
        ours.close()
        reference.close()


@LAYOUTS
def test_np_random_seed_is_each_envs_as_in_sync_vector_env(num_workers):
    ours = MultiTaskVectorEnv(BOX_FNS[:3], num_workers=num_workers, start_method="fork")
    reference = SyncVectorEnv(BOX_FNS[:3])
    try:
        assert_same(ours.reset(seed=11), reference.reset(seed=11))
        assert ours.np_random_seed == reference.np_random_seed == (11, 12, 13)
        assert [g.bit_generator.state for g in ours.np_random] == [g.bit_generator.state for g in reference.np_random]
    finally:
        ours.close()
        reference.close()


def test_async_vector_env_refuses_pickling_with_a_type_error_too():
    # Spawned, not forked: a child forked from a test runner's thread-holding worker (pytest-xdist's) hung in
    # gymnasium's first command, unpickling the spaces.
    theirs = AsyncVectorEnv(BOX_FNS[:2], context="spawn")
    try:
        with pytest.raises(TypeError):
            pickle.dumps(theirs)
    finally:
        theirs.close()


@LAYOUTS
def test_pickling_is_refused_with_a_type_error_that_says_why(num_workers):
    ours = MultiTaskVectorEnv(BOX_FNS[:2], num_workers=num_workers, start_method="fork")
    try:
        with pytest.raises(TypeError, match="cannot be pickled: it holds worker processes"):
            pickle.dumps(ours)
        ours.reset(seed=0)
        ours.step(ours.action_space.sample())
    finally:
        ours.close()


def test_make_vec_takes_vector_kwargs_as_gymnasium_takes_them_for_its_own_vector_entry_points():
    """gymnasium refuses ``vector_kwargs`` for every env with a ``vector_entry_point`` (its CartPole-v1 too),
    before the entry point runs: the vector env's arguments go among the keyword arguments there, and
    ``vector_kwargs`` with ``vectorization_mode="sync"`` or ``"async"``, as for any env."""
    errors = []
    for env_id in ("CartPole-v1", "2DNavigation-v0"):
        with pytest.raises(gym.error.Error) as info:
            gym.make_vec(env_id, num_envs=2, vector_kwargs={"copy": False})
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "only through kwargs" in errors[0]
    envs = gym.make_vec("2DNavigation-v0", num_envs=2, num_workers=0, copy=False)
    assert isinstance(envs, MultiTaskVectorEnv) and envs.num_workers == 0 and envs.copy is False
    envs.close()
    envs = gym.make_vec("2DNavigation-v0", num_envs=2, vectorization_mode="sync", vector_kwargs={"copy": False})
    assert isinstance(envs, SyncVectorEnv) and envs.copy is False
    envs.close()
