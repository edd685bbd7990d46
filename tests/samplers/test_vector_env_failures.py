"""MultiTaskVectorEnv under failure: envs that raise, killed workers, misuse, signals, spaces it refuses."""

import gc
import signal
import subprocess
import sys
import threading
import time
from functools import partial

import gymnasium as gym
import pytest
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError

from maml_rl.samplers import WorkerDiedError, WorkerError
from maml_rl.samplers.vector_env import MultiTaskVectorEnv, VectorEnvClosedError

from helpers import TESTS
from helpers.process_utils import wait_until_gone
from helpers.vector_envs import BoxEnv, KillerEnv, OddSpaceEnv, SequenceEnv

pytestmark = pytest.mark.processes


def _fails_at_env(index, num_envs, **kwargs):
    return [partial(BoxEnv, **kwargs) if i == index else BoxEnv for i in range(num_envs)]


@pytest.mark.parametrize("where", ["step", "reset"])
def test_env_exception_names_the_env_and_carries_the_traceback(where):
    envs = MultiTaskVectorEnv(_fails_at_env(3, 4, fail_in=where, fail_at=2, max_length=1), num_workers=2,
                              start_method="fork")
    pids = envs.worker_pids
    envs.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        for _ in range(5):  # episodes of one step: env 3 resets (and fails there) after its second step
            envs.step(envs.action_space.sample())
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert f"told to fail in {where}" in message and "Traceback" in message and "in env 3" in message
    assert "worker 1" in message
    assert wait_until_gone(pids) == []
    with pytest.raises(VectorEnvClosedError):
        envs.step(envs.action_space.sample())
    envs.close()
    envs.close()


def test_reset_option_error_is_reported():
    envs = MultiTaskVectorEnv([BoxEnv] * 2, num_workers=2, start_method="fork")
    with pytest.raises(WorkerError, match="told to fail in reset"):
        envs.reset(seed=0, options={"fail": True})
    assert envs.worker_pids == []
    envs.close()


def test_env_that_cannot_be_built_is_reported():
    def broken():
        raise RuntimeError("no such env here")

    with pytest.raises(WorkerError, match="no such env here"):
        MultiTaskVectorEnv([BoxEnv, BoxEnv, broken], num_workers=2, start_method="fork")


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_killed_worker_raises_within_seconds(start_method):
    envs = MultiTaskVectorEnv([partial(KillerEnv, kill_at=3)] + [BoxEnv] * 2, num_workers=2,
                              start_method=start_method)
    pids = envs.worker_pids
    envs.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match="SIGKILL"):
        for _ in range(5):
            envs.step(envs.action_space.sample())
    assert time.monotonic() - start < 3
    assert wait_until_gone(pids) == []
    with pytest.raises(VectorEnvClosedError):
        envs.reset()
    envs.close()


def test_close_is_idempotent_and_a_closed_env_refuses_every_call():
    envs = MultiTaskVectorEnv([BoxEnv] * 3, num_workers=2, start_method="fork")
    pids = envs.worker_pids
    envs.reset(seed=0)
    envs.close()
    envs.close()
    assert envs.closed and wait_until_gone(pids) == []
    for call in (lambda: envs.step(envs.action_space.sample()), lambda: envs.reset(seed=0),
                 lambda: envs.call("double", 1), lambda: envs.reset_tasks([{}] * 3)):
        with pytest.raises(VectorEnvClosedError, match="closed MultiTaskVectorEnv") as info:
            call()
        assert isinstance(info.value, ClosedEnvironmentError)  # what gymnasium's AsyncVectorEnv raises


def test_async_calls_out_of_order_are_refused():
    envs = MultiTaskVectorEnv([BoxEnv] * 2, num_workers=1, start_method="fork")
    try:
        envs.reset(seed=0)
        with pytest.raises(NoAsyncCallError):
            envs.step_wait()
        envs.step_async(envs.action_space.sample())
        with pytest.raises(AlreadyPendingCallError):
            envs.step_async(envs.action_space.sample())
        with pytest.raises(AlreadyPendingCallError):
            envs.reset()
        observations = envs.step_wait()[0]
        assert observations.shape == (2, 3)
    finally:
        envs.close()


class SlowEnv(BoxEnv):
    def __init__(self, seconds: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return super().step(action)


def test_a_second_thread_is_refused():
    envs = MultiTaskVectorEnv([SlowEnv] * 2, num_workers=1, start_method="fork")
    try:
        envs.reset(seed=0)
        actions = envs.action_space.sample()
        envs.step_async(actions)  # the other thread's step_wait then holds the guard for 0.2 s
        thread = threading.Thread(target=envs.step_wait)
        thread.start()
        deadline = time.monotonic() + 5
        while not envs._guard._lock.locked() and time.monotonic() < deadline:
            time.sleep(0.001)
        with pytest.raises(RuntimeError, match="not thread-safe"):
            envs.step(actions)
        thread.join()
        envs.step(actions)  # and the env goes on
    finally:
        envs.close()


def test_spaces_are_refused_as_async_vector_env_refuses_them():
    for env_class, error in ((SequenceEnv, TypeError), (OddSpaceEnv, ValueError)):
        with pytest.raises(error) as theirs:
            gym.vector.AsyncVectorEnv([env_class] * 2, shared_memory=True, context="fork")
        with pytest.raises(error) as ours:
            MultiTaskVectorEnv([env_class] * 2, start_method="fork")
        if error is TypeError:
            assert str(ours.value) == str(theirs.value)


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_signal_ends_the_program_and_its_workers(signal_name):
    script = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from maml_rl.samplers.vector_env import MultiTaskVectorEnv
from helpers.vector_envs import BoxEnv

if __name__ == "__main__":
    envs = MultiTaskVectorEnv([BoxEnv] * 4, num_workers=2)
    envs.reset(seed=0)
    print(*envs.worker_pids, flush=True)
    while True:
        envs.step(envs.action_space.sample())
"""
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        pids = [int(pid) for pid in process.stdout.readline().split()]
        assert len(pids) == 2, process.stderr.read()
        time.sleep(0.3)
        process.send_signal(getattr(signal, signal_name))
        process.wait(timeout=15)
        assert process.returncode != 0
        assert wait_until_gone(pids) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_dropped_env_ends_its_workers():
    envs = MultiTaskVectorEnv([BoxEnv] * 2, num_workers=2, start_method="fork")
    pids = envs.worker_pids
    envs.reset(seed=0)
    del envs
    gc.collect()
    assert wait_until_gone(pids) == []


def interrupt_during(call):
    """``call()`` with a KeyboardInterrupt raised in it 50 ms in (a SIGALRM), as Ctrl-C would; it must raise it."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_ctrl_c_while_waiting_closes_the_env_and_ends_its_workers():
    envs = MultiTaskVectorEnv([partial(SlowEnv, seconds=1.0)] * 2, num_workers=2, start_method="fork")
    pids = envs.worker_pids
    envs.reset(seed=0)
    envs.step_async(envs.action_space.sample())
    interrupt_during(envs.step_wait)
    assert wait_until_gone(pids) == []
    with pytest.raises(VectorEnvClosedError):
        envs.reset()
    envs.close()


def test_in_process_env_exception_names_the_env_and_closes_the_vector_env():
    """num_workers=0: the workers' error, with the env, the operation and the traceback; then closed."""
    envs = MultiTaskVectorEnv(_fails_at_env(1, 2, fail_in="step", fail_at=2), num_workers=0)
    envs.reset(seed=0)
    with pytest.raises(WorkerError) as info:
        for _ in range(5):
            envs.step(envs.action_space.sample())
    message = str(info.value)
    assert "told to fail in step" in message and "Traceback" in message and "in env 1" in message
    with pytest.raises(VectorEnvClosedError):
        envs.reset(seed=0)
    envs.close()

    def broken():
        raise RuntimeError("no such env here")

    with pytest.raises(WorkerError, match="while starting: RuntimeError\\('no such env here'\\)"):
        MultiTaskVectorEnv([BoxEnv, broken], num_workers=0)


def test_in_process_ctrl_c_during_a_step_closes_the_vector_env():
    """A step cut short leaves its envs half-stepped: the vector env closes rather than go on from there."""
    envs = MultiTaskVectorEnv([partial(SlowEnv, seconds=1.0)] * 2, num_workers=0)
    envs.reset(seed=0)
    interrupt_during(lambda: envs.step(envs.action_space.sample()))
    with pytest.raises(VectorEnvClosedError):
        envs.reset()
    envs.close()
