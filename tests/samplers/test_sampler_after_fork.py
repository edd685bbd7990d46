"""A sampler in a child of the process that built it (``os.fork()``).

The child holds a copy of the sampler whose workers and shared memory are the parent's. Every call
there is refused with ``ForkedSamplerError``, and ``close()``, a garbage collection or the child's
exit leave the parent's workers alone: the parent samples on and closes cleanly. (Before, the child
drove the parent's workers, its ``close()`` raised ``AssertionError: can only test a child process``,
and parent and child together failed with ``ValueError: cannot reshape array of size 0``.)
"""

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import ROOT, TESTS
from helpers.process_utils import is_running, mapped_semaphores, wait_until_gone

pytestmark = pytest.mark.processes

TASKS = [{"value": 0.5, "length": 4}, {"value": -0.5, "length": 3}]


def wait_for_child(pid, timeout=60.0):
    """The exit code of the forked child ``pid``; killed, and the test failed, past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child did not exit within {timeout} s")
        time.sleep(0.05)


def in_child(work):
    """Run ``work()`` in a forked child; its result (JSON) or its exception's name and message, read
    back through a pipe. The child ends with os._exit: no test machinery runs twice."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            try:
                report = {"result": work()}
                code = 0
            except BaseException as error:
                report = {"error": f"{type(error).__name__}: {error}"}
            os.write(write, json.dumps(report).encode())
        finally:
            os._exit(code)
    os.close(write)
    code = wait_for_child(pid)
    with os.fdopen(read) as pipe:
        return code, json.loads(pipe.read() or "{}")


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_a_forked_child_is_refused_and_leaves_the_parents_sampler_working(start_method, probe_sampler):
    sampler = probe_sampler(num_workers=2, start_method=start_method)
    sampler.rollout(TASKS)
    pids = sampler.worker_pids
    names = mapped_semaphores([os.getpid(), *pids])
    assert bool(names) is (start_method != "fork")  # fork's semaphores have no names
    state = sampler.state_dict()

    def use_then_close():
        refused = {}
        for call, run in (("rollout", lambda: sampler.rollout(TASKS)),
                          ("rollout_transitions", lambda: sampler.rollout_transitions(TASKS)),
                          ("sample_tasks", lambda: sampler.sample_tasks(2)),
                          ("state_dict", sampler.state_dict)):
            try:
                run()
                refused[call] = "ran"
            except Exception as error:
                refused[call] = f"{type(error).__name__}: {error}"
        sampler.close()
        sampler.close()
        return refused

    code, report = in_child(use_then_close)
    assert code == 0 and "result" in report, report
    for call, outcome in report["result"].items():
        assert outcome.startswith(f"ForkedSamplerError: MultiTaskSampler.{call}() in process "), outcome
        assert f"a child (os.fork()) of process {os.getpid()}" in outcome, outcome

    # The child's garbage collection of its copy leaves the workers alone too.
    def collect():
        nonlocal sampler
        sampler = None
        gc.collect()
        return "collected"

    code, report = in_child(collect)
    assert (code, report) == (0, {"result": "collected"})

    assert sampler.worker_pids == pids and all(is_running(pid) for pid in pids)
    assert sampler.state_dict() == state
    batches = sampler.rollout(TASKS)
    assert [int(b.lengths.max()) for b in batches] == [4, 3]
    assert sampler.worker_pids == pids
    sampler.close()
    assert wait_until_gone(pids) == []
    assert sorted(name for name in names if os.path.exists(name)) == []


CHILD_EXITS_NORMALLY = """
import os, sys
sys.path.insert(0, {tests!r})
from helpers.samplers import probe_sampler

if __name__ == "__main__":
    tasks = [{{"value": 0.5, "length": 4}}]
    sampler = probe_sampler(num_workers=2, start_method="fork")
    sampler.rollout(tasks)
    pids = sampler.worker_pids
    child = os.fork()
    if child == 0:
        sys.exit(0)  # the interpreter's exit: atexit handlers, multiprocessing's and the finalizers', run here
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert sampler.worker_pids == pids, (sampler.worker_pids, pids)
    sampler.rollout(tasks)
    sampler.close()
    print("ok", *pids, flush=True)
"""


def test_a_forked_child_that_exits_normally_leaves_the_parents_workers_alone(tmp_path):
    """A normal exit runs multiprocessing's exit handler, which terminated every daemonic process it knew
    (the parent's workers, in the child's copy of its registry) and failed to join them."""
    script = tmp_path / "fork_and_exit.py"
    script.write_text(textwrap.dedent(CHILD_EXITS_NORMALLY.format(tests=str(TESTS))))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok "), result.stdout
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    assert wait_until_gone([int(pid) for pid in result.stdout.split()[1:]]) == []


def test_a_forked_child_of_a_vector_env_is_refused_and_leaves_its_workers_alone():
    import numpy as np

    from maml_rl.samplers import MultiTaskVectorEnv

    from helpers.bad_envs import make_bad_output_env

    envs = MultiTaskVectorEnv([make_bad_output_env] * 2, num_workers=2, start_method="fork")
    try:
        envs.reset(seed=0)
        pids = envs.worker_pids
        actions = np.zeros((2, 1), np.float32)

        def step_then_close():
            try:
                envs.step(actions)
                outcome = "ran"
            except Exception as error:
                outcome = f"{type(error).__name__}: {error}"
            envs.close()
            return outcome

        code, report = in_child(step_then_close)
        assert code == 0, report
        assert report["result"].startswith("ForkedSamplerError: MultiTaskVectorEnv.step_async() in process ")
        assert envs.worker_pids == pids and all(is_running(pid) for pid in pids)
        observations, *_ = envs.step(actions)
        assert observations.shape == (2, 2)
    finally:
        envs.close()
    assert wait_until_gone(pids) == []


INHERITED_GARBAGE = """
import gc, sys
sys.path.insert(0, {tests!r})
import mujoco, mujoco.batch
from maml_rl.samplers import MultiTaskSampler, MultiTaskVectorEnv
from maml_rl.policies import NormalMLPPolicy
from helpers.sampler_envs import ProbeEnv
from helpers.vector_envs import BoxEnv


class Collecting(BoxEnv):
    def step(self, action):
        gc.collect()  # what the worker's collector may do at any allocation
        return super().step(action)


class CollectingProbe(ProbeEnv):
    def step(self, action):
        gc.collect()
        return super().step(action)


model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>")
gc.disable()
cycle = [mujoco.batch.Batch(model, 4, nthread=2)]
cycle.append(cycle)  # garbage holding a MuJoCo thread pool, not yet collected when the workers fork
del cycle
gc.enable()
env = MultiTaskVectorEnv([Collecting, Collecting], num_workers=2, start_method="fork", step_timeout=20)
env.reset(seed=0)
for _ in range(3):
    env.step(env.action_space.sample())
env.close()
with MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=CollectingProbe, seed=0, num_workers=2,
                      start_method="fork", step_timeout=20) as sampler:
    sampler.rollout([{{"value": 0.0, "length": 3}}] * 2)
print("stepped")
"""


def test_a_forked_worker_does_not_collect_the_garbage_it_inherited(tmp_path):
    """A fork worker collecting its parent's uncollected garbage ran the destructor of a MuJoCo thread pool in
    it: ``pthread_cond_destroy`` waited for pool threads that exist only in the parent, and the worker hung in the
    middle of a step (seen in CI: a vector env's step after an earlier test's ``mujoco.batch`` in the same
    process). The workers fork with the collector's objects frozen."""
    script = tmp_path / "inherited_garbage.py"
    script.write_text(INHERITED_GARBAGE.format(tests=str(TESTS)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "stepped", done.stderr[-3000:]
