"""Watching real processes from the tests: is one still running, wait until some are gone."""

import time


def is_running(pid: int) -> bool:
    """Whether ``pid`` lives (a zombie, exited but not reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return "\nState:\tZ" not in status.read()
    except FileNotFoundError:
        return False


def wait_until_gone(pids, timeout=15.0):
    """Wait up to ``timeout`` seconds for ``pids`` to end; return those still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(is_running(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if is_running(pid)]


# A script that samples until it is stopped; it prints its workers' pids first.
SAMPLING_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from sampler_envs import make_probe_env

if __name__ == "__main__":
    sampler = MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=make_probe_env,
                               num_workers=2, start_method={start_method!r})
    tasks = [{{"value": 0.0, "length": 6}}] * 4
    sampler.rollout(tasks)  # the same size as below, so the pool is not rebuilt
    print(*sampler.worker_pids, flush=True)
    while True:
        sampler.rollout(tasks)
"""
