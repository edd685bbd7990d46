"""A step that never returns: ``MultiTaskSampler(..., step_timeout=SECONDS)``.

Without the option such a step blocks the rollout forever (only Ctrl-C gets out). With it, the call
raises ``StepTimeoutError`` naming the worker, its pid, the slot and the task; that worker is killed,
the others are ended, no named semaphore is left, and the next call starts new workers.
"""

import os
import time

import numpy as np
import pytest

from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler, StepTimeoutError

from helpers.bad_envs import make_hanging_env
from helpers.process_utils import mapped_semaphores, wait_until_gone

pytestmark = pytest.mark.processes

TIMEOUT = 1.0
# The timeout, the worker's answer (at most 1 s), its kill and the others' shutdown, with room for a loaded machine.
WITHIN = 20.0
FINE = {}


def hanging_sampler(**kwargs):
    kwargs = {"num_workers": 2, "step_timeout": TIMEOUT, **kwargs}
    return MultiTaskSampler(None, None, 2, NormalMLPPolicy(2, 1), None, env_fn=make_hanging_env, seed=0, **kwargs)


def time_out(sampler, tasks):
    """The error of a rollout of ``tasks`` that hangs, and how long it took to come."""
    start = time.monotonic()
    with pytest.raises(StepTimeoutError) as info:
        sampler.rollout(tasks)
    return info.value, time.monotonic() - start


@pytest.mark.parametrize("start_method, partial", [("fork", False), ("forkserver", True)],
                         ids=["fork-lockstep", "forkserver-partial"])
def test_a_hanging_step_raises_naming_the_slot_the_task_and_the_worker(start_method, partial):
    # 2 tasks x 2 episodes: worker 0 steps slots 0-1, worker 1 slots 2-3 (task 1), and hangs at slot 2.
    hang = {"hang_at": 2}
    with hanging_sampler(start_method=start_method, partial=partial) as sampler:
        sampler.rollout([FINE, FINE])
        pids = sampler.worker_pids
        names = mapped_semaphores([os.getpid(), *pids])
        assert bool(names) is (start_method != "fork")  # fork's semaphores have no names
        error, elapsed = time_out(sampler, [FINE, hang])
        message = str(error)
        assert TIMEOUT <= elapsed < WITHIN, elapsed
        assert f"ChildEnv worker 1 (pid {pids[1]})" in message, message
        assert "during step 2 in env slot 2 (task {'hang_at': 2})" in message, message
        assert "step_timeout=1 s" in message, message
        assert (error.worker, error.pid, error.slot, error.task) == (1, pids[1], 2, hang)
        assert wait_until_gone(pids) == []
        assert sorted(name for name in names if os.path.exists(name)) == []
        assert sampler.worker_pids == []
        # The sampler goes on with new workers.
        assert len(sampler.rollout([FINE, FINE])) == 2
        assert sampler.worker_pids and set(sampler.worker_pids).isdisjoint(pids)
        new_pids = sampler.worker_pids
    assert wait_until_gone(new_pids) == []


def test_a_worker_deaf_to_signals_is_named_with_its_slots_and_tasks():
    """An env stuck in C code cannot say which slot it is on: the message names the worker's slots."""
    hang = {"hang_at": 1, "deaf": True}
    with hanging_sampler(start_method="fork") as sampler:
        sampler.rollout([FINE, FINE])
        pids = sampler.worker_pids
        error, elapsed = time_out(sampler, [hang, FINE])
        message = str(error)
        assert TIMEOUT <= elapsed < WITHIN, elapsed
        assert f"ChildEnv worker 0 (pid {pids[0]}) hung during a step of env slots 0-1" in message, message
        assert repr([hang, hang]) in message and "did not say which slot" in message, message
        assert (error.worker, error.pid, error.slot, error.task) == (0, pids[0], None, None)
        assert wait_until_gone(pids) == []


def test_every_hanging_worker_is_named():
    with hanging_sampler(start_method="fork") as sampler:
        sampler.rollout([FINE, FINE])
        pids = sampler.worker_pids
        error, _ = time_out(sampler, [{"hang_at": 0}, {"hang_at": 0}])
        message = str(error)
        assert f"ChildEnv worker 0 (pid {pids[0]}) hung during step 0 in env slot 0" in message, message
        assert f"ChildEnv worker 1 (pid {pids[1]}) hung during step 0 in env slot 2" in message, message
        assert error.worker == 0
        assert wait_until_gone(pids) == []


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), True, "600"])
def test_a_bad_step_timeout_is_refused(value):
    with pytest.raises(ValueError, match="step_timeout must be a positive number of seconds"):
        hanging_sampler(step_timeout=value)


def test_without_worker_processes_the_timeout_is_kept_but_cannot_apply():
    with hanging_sampler(num_workers=0) as sampler:
        assert sampler.step_timeout == TIMEOUT
        assert len(sampler.rollout([FINE])) == 1


def test_train_and_test_scripts_pass_a_generous_timeout_and_zero_waits_forever():
    import argparse

    from maml_rl.app.command_line import DEFAULT_STEP_TIMEOUT, add_sampler_arguments, sampler_options

    parser = argparse.ArgumentParser()
    add_sampler_arguments(parser, 2)
    options = lambda *argv: sampler_options(parser, parser.parse_args(list(argv)))  # noqa: E731
    assert options()["step_timeout"] == DEFAULT_STEP_TIMEOUT == 600
    assert options("--step-timeout", "2.5")["step_timeout"] == 2.5
    assert options("--step-timeout", "0")["step_timeout"] is None
    for bad in ("-1", "nan", "inf"):
        with pytest.raises(SystemExit):
            options("--step-timeout", bad)


def test_a_hanging_step_of_the_vector_env_raises_naming_the_env_and_its_task():
    from maml_rl.samplers import MultiTaskVectorEnv
    from maml_rl.samplers.vector_env import VectorEnvClosedError

    envs = MultiTaskVectorEnv([make_hanging_env] * 4, num_workers=2, start_method="fork", step_timeout=TIMEOUT)
    try:
        pids = envs.worker_pids
        envs.reset_tasks([FINE, FINE, {"hang_at": 1}, FINE])
        envs.reset(seed=0)
        actions = np.zeros((4, 1), np.float32)
        envs.step(actions)
        start = time.monotonic()
        with pytest.raises(StepTimeoutError) as info:
            envs.step(actions)
        assert TIMEOUT <= time.monotonic() - start < WITHIN
        message = str(info.value)
        assert f"ChildEnv worker 1 (pid {pids[1]}) hung during step in env slot 2 (task {{'hang_at': 1}})" in message
        assert wait_until_gone(pids) == []
        with pytest.raises(VectorEnvClosedError):
            envs.step(actions)
    finally:
        envs.close()
