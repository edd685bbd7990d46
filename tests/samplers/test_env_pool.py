"""The env pool protocol: every backend refuses an illegal order of calls at
once (a wait on a worker never asked to step would block forever), and
stays usable after the refusal."""

from __future__ import annotations

import threading

import cloudpickle
import numpy as np
import pytest

from maml_rl.samplers import EnvPool, PoolStateError, SamplerClosedError
from maml_rl.samplers.workers.buffers import BufferSpec
from maml_rl.samplers.workers.pools import ChildEnvPool, InProcessPool

from helpers.differential_envs import factory

HORIZON = 4
SLOTS = 4


def make_pool(kind):
    env_fn = factory(False, HORIZON)
    env = env_fn()
    spec = BufferSpec.for_spaces(env.observation_space, env.action_space, HORIZON)
    if kind == "in-process":
        return InProcessPool(env_fn, SLOTS, spec)
    return ChildEnvPool(cloudpickle.dumps(env_fn), 2, SLOTS, spec, "fork")


@pytest.fixture(params=["in-process", "processes"])
def pool(request):
    pool = make_pool(request.param)
    yield pool
    pool.close()


TASKS = [{"offset": 0.1, "length": 3}] * SLOTS
SEEDS = list(range(SLOTS))


def run_to_end(pool, t=0):
    """A legal rollout from step ``t``: every worker steps until its slots have ended."""
    workers = [w for w, r in enumerate(pool.ranges) if len(r)]
    while workers:
        pool.step(workers, t)
        pool.wait(workers)
        workers = [w for w in workers if pool.views.active[w]]
        t += 1
    return t


def guarded(call):
    """Run ``call``; fail instead of hanging if it blocks."""
    outcome = {}

    def target():
        try:
            call()
        except BaseException as error:  # noqa: BLE001  (reported below)
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the call blocked instead of raising"
    return outcome.get("error")


def test_both_pools_implement_the_protocol():
    assert issubclass(InProcessPool, EnvPool) and issubclass(ChildEnvPool, EnvPool)


def test_a_legal_rollout_twice_in_a_row(pool):
    for _ in range(2):
        pool.assign(SLOTS)
        pool.reset_task(TASKS)
        pool.reset(SEEDS)
        assert run_to_end(pool) == 3
        assert pool.views.lengths[:SLOTS].tolist() == [3] * SLOTS


@pytest.mark.parametrize("misuse, message", [
    (lambda p: p.wait([0]), "not asked to step"),
    (lambda p: p.wait_any(), "no worker stepping"),
    (lambda p: p.step([0], 0), "before reset"),
    (lambda p: p.reset(SEEDS), "before reset_task"),
    (lambda p: p.reset_task(TASKS[:2]), "2 tasks for the 4 slots"),
])
def test_out_of_order_before_the_rollout(pool, misuse, message):
    pool.assign(SLOTS)
    error = guarded(lambda: misuse(pool))
    assert isinstance(error, PoolStateError) and message in str(error), error
    # Refused before anything was done: the pool still works.
    pool.reset_task(TASKS)
    pool.reset(SEEDS)
    assert run_to_end(pool) == 3


def test_out_of_order_during_the_rollout(pool):
    pool.assign(SLOTS)
    pool.reset_task(TASKS)
    with pytest.raises(PoolStateError, match="3 seeds for the 4 slots"):
        pool.reset(SEEDS[:3])
    pool.reset(SEEDS)
    workers = [w for w, r in enumerate(pool.ranges) if len(r)]
    with pytest.raises(PoolStateError, match="step\\(1\\) on worker 0, which is at step 0"):
        pool.step([0], 1)
    with pytest.raises(PoolStateError, match="has no slots in this call"):
        pool.step([7], 0)
    pool.step(workers, 0)
    for misuse, message in [
        (lambda: pool.step([workers[0]], 1), "previous step is not collected"),
        (lambda: pool.reset_task(TASKS), "are stepping"),
        (lambda: pool.reset(SEEDS), "are stepping"),
        (lambda: pool.assign(SLOTS), "are stepping"),
    ]:
        with pytest.raises(PoolStateError, match=message):
            misuse()
    pool.wait(workers)
    with pytest.raises(PoolStateError, match="not asked to step"):
        pool.wait(workers)
    # The rollout goes on where it was.
    assert run_to_end(pool, 1) == 3
    assert pool.views.lengths[:SLOTS].tolist() == [3] * SLOTS


def test_a_closed_pool_refuses_every_call(pool):
    pool.close()
    pool.close()  # idempotent
    for call in (lambda: pool.assign(SLOTS), lambda: pool.reset_task(TASKS), lambda: pool.reset(SEEDS),
                 lambda: pool.step([0], 0), lambda: pool.wait([0]), lambda: pool.wait_any()):
        error = guarded(call)
        assert isinstance(error, SamplerClosedError), error


def test_assign_checks_the_capacity(pool):
    with pytest.raises(ValueError, match="1 to 4"):
        pool.assign(SLOTS + 1)
    with pytest.raises(ValueError, match="1 to 4"):
        pool.assign(0)
    pool.assign(2)
    pool.reset_task(TASKS[:2])
    pool.reset(SEEDS[:2])
    assert run_to_end(pool) == 3
    np.testing.assert_array_equal(pool.views.lengths[:2], [3, 3])
