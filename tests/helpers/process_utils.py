"""Watching real processes from the tests: is one still running, wait until some are gone."""

import glob
import os
import signal
import subprocess
import time
from typing import Dict, Optional

import pytest


def _status(pid: int) -> Optional[Dict[str, str]]:
    """The fields of ``/proc/<pid>/status``; ``None`` once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return {key: value.strip() for key, _, value in (line.partition(":") for line in status)}
    except OSError:
        return None


def is_running(pid: int) -> bool:
    """Whether ``pid`` lives (a zombie, exited but not reaped, does not count)."""
    status = _status(pid)
    return status is not None and not status["State"].startswith("Z")


def wait_until_gone(pids, timeout=15.0):
    """Wait up to ``timeout`` seconds for ``pids`` to end; return those still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(is_running(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if is_running(pid)]


# A script that samples until it is stopped; it prints its workers' pids first.
SAMPLING_SCRIPT = """
import faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it stands, for a test that times out
sys.path.insert(0, {tests!r})
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import make_probe_env

if __name__ == "__main__":
    sampler = MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=make_probe_env,
                               num_workers=2, start_method={start_method!r})
    tasks = [{{"value": 0.0, "length": 6}}] * 4
    sampler.rollout(tasks)  # the same size as below, so the pool is not rebuilt
    print(*sampler.worker_pids, flush=True)
    while True:
        sampler.rollout(tasks)
"""


def _process_line(pid: int) -> str:
    status = _status(pid)
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            waits_in = wchan.read().strip()
    except OSError:
        status = None
    if status is None:
        return f"{pid}: gone"
    return f"{pid} ({status['Name']}): {status['State']}, parent {status['PPid']}, in {waits_in}"


def wait_or_explain(process: subprocess.Popen, timeout: float, pids=()) -> None:
    """Wait for ``process`` to exit; if it has not within ``timeout`` seconds,
    fail with where it stands: the Python stacks of its threads (the script
    registers faulthandler on SIGUSR1), the state of it and of ``pids``
    (its workers), and what it printed."""
    try:
        process.wait(timeout=timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    states = [_process_line(pid) for pid in (process.pid, *pids)]
    process.send_signal(signal.SIGUSR1)
    time.sleep(1.0)
    process.kill()
    _, stderr = process.communicate(timeout=10)
    pytest.fail(f"the process did not exit within {timeout} s.\nprocesses:\n" + "\n".join(states)
                + f"\nits stderr (with its threads' stacks at the time):\n{stderr}", pytrace=False)


def mapped_semaphores(pids):
    """Names of the POSIX named semaphores (``/dev/shm/sem.*``, used under spawn and forkserver) that
    ``pids`` map now. Other programs may create and remove semaphores meanwhile: check these names only.

    glibc creates a semaphore under a temporary name, links it to the real one and removes the temporary one, so
    ``/proc/PID/maps`` shows ``/dev/shm/sem.XXXXXX (deleted)``, a name that never exists afterwards: the real names
    are found by inode."""
    inodes = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps:
                for line in maps:
                    fields = line.split(None, 5)
                    if len(fields) == 6 and fields[5].startswith("/dev/shm/sem."):
                        inodes.add(int(fields[4]))
        except OSError:
            pass
    names = set()
    for path in glob.glob("/dev/shm/sem.*"):
        try:
            if os.stat(path).st_ino in inodes:
                names.add(path)
        except OSError:  # removed meanwhile
            pass
    return names
