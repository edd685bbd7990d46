"""Worker processes stay quiet when the main process dies or gives up on them.

A worker that finds its main process gone exits without a traceback (nobody is left to read it),
with ``entry.MAIN_PROCESS_GONE``: when the main process was killed while the worker built its envs
(its hello met a closed pipe: ``BrokenPipeError``), when the semaphores it is started with were
already released (``FileNotFoundError`` in ``SemLock._rebuild``), and when the main process is
killed mid-rollout. A Ctrl-C while the workers start reaches them blocked (fork, spawn) and is ignored.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from helpers import ROOT, TESTS
from helpers.process_utils import SAMPLING_SCRIPT, wait_until_gone

pytestmark = pytest.mark.processes

START_UP_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from functools import partial
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.bad_envs import make_slow_start_env

if __name__ == "__main__":
    sampler = MultiTaskSampler(None, None, 2, NormalMLPPolicy(2, 1), None, num_workers=2,
                               env_fn=partial(make_slow_start_env, {folder!r}), start_method={start_method!r})
    sampler.rollout([{{}}, {{}}])
"""


def run_and_kill(args, ready, timeout=60.0):
    """Start ``args``, SIGKILL it once ``ready()`` returns worker pids, and return those pids and all the
    stderr of the script and its workers (read until every one of them has closed it: they have exited)."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + timeout
        while not (pids := ready(process)):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the workers did not start in time"
            time.sleep(0.05)
        process.kill()
        _, stderr = process.communicate(timeout=timeout)
    finally:
        process.kill()
    return pids, stderr


@pytest.mark.parametrize("start_method", [pytest.param("fork", marks=pytest.mark.slow), "forkserver",
                                          pytest.param("spawn", marks=pytest.mark.slow)])
def test_workers_of_a_main_process_killed_while_they_start_exit_quietly(tmp_path, start_method):
    folder = tmp_path / "workers"
    folder.mkdir()
    script = tmp_path / "start.py"
    script.write_text(START_UP_SCRIPT.format(tests=str(TESTS), folder=str(folder), start_method=start_method))
    pids, stderr = run_and_kill([sys.executable, str(script)],
                                lambda _: [int(name) for name in os.listdir(folder)] if len(os.listdir(folder)) == 2
                                else None)
    # Each worker wakes 2 s later to a dead main process; the stderr pipe closed once all had exited.
    assert wait_until_gone(pids) == []
    assert "Traceback" not in stderr and "Error" not in stderr, stderr


@pytest.mark.parametrize("start_method", ["forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
def test_workers_of_a_main_process_killed_mid_rollout_exit_quietly(tmp_path, start_method):
    script = tmp_path / "sample_forever.py"
    script.write_text(SAMPLING_SCRIPT.format(tests=str(TESTS), start_method=start_method))
    started = {}

    def ready(process):
        if "pids" not in started:
            started["pids"] = [int(pid) for pid in process.stdout.readline().split()]
            started["at"] = time.monotonic()
        return started["pids"] if time.monotonic() - started["at"] > 0.3 else None  # mid-rollout

    pids, stderr = run_and_kill([sys.executable, str(script)], ready)
    assert len(pids) == 2
    assert wait_until_gone(pids, timeout=10) == []
    assert "Traceback" not in stderr, stderr


FORKSERVER_SIGNALS_SCRIPT = """
import multiprocessing, signal
from maml_rl.samplers.workers.entry import WorkerHandles


def report(handles, conn):
    conn.send((handles is not None, signal.getsignal(signal.SIGINT) is signal.SIG_IGN))


if __name__ == "__main__":
    ctx = multiprocessing.get_context("forkserver")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=report, args=(WorkerHandles(None, None, None, None), child))
    process.start()
    print(parent.recv())
    process.join()
"""


def test_a_forkserver_worker_ignores_ctrl_c_once_its_handles_are_unpickled(tmp_path):
    """Its server hands a forkserver child the default SIGINT handler: a worker ignores SIGINT from the moment
    multiprocessing unpickles its handles, before its bootstrap, where a Ctrl-C printed "Process ChildEnv-0:" and
    a KeyboardInterrupt traceback (seen once in CI in test_quick_double_ctrl_c_in_train_py). Without the handles
    in its arguments, the same child's target sees the default handler."""
    script = tmp_path / "signals.py"
    script.write_text(FORKSERVER_SIGNALS_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "(True, True)", done.stdout + done.stderr
    plain = FORKSERVER_SIGNALS_SCRIPT.replace("args=(WorkerHandles(None, None, None, None), child)",
                                              "args=(object(), child)")
    script.write_text(plain)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "(True, False)", done.stdout + done.stderr


def test_a_worker_whose_semaphores_are_released_before_it_starts_exits_quietly():
    """What multiprocessing's bootstrap does under spawn and forkserver, in this process: the handles
    are pickled while a process is being started, and rebuilt after the main process let their names go."""
    import multiprocessing as mp
    from multiprocessing import context

    from maml_rl.samplers.workers import entry

    ctx = mp.get_context("spawn")
    wake, ready = ctx.Semaphore(0), ctx.Semaphore(0)
    context.set_spawning_popen(SimpleNamespace())  # as Process.start() does around the pickling
    try:
        rebuild, arguments = entry.WorkerHandles(None, wake, ready, None).__reduce__()
    finally:
        context.set_spawning_popen(None)
    # Rebuilding the handles and worker_main ignore Ctrl-C and SIGHUP, as a worker does: this process gets its own
    # handling back after them (the processes later tests start would otherwise inherit the signals ignored).
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGHUP)}
    try:
        assert isinstance(rebuild(*arguments), entry.WorkerHandles)  # the names exist: rebuilt
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # as a new worker does, before its bootstrap
        del wake, ready  # their names are released (SemLock's finalizer unlinks them)
        assert rebuild(*arguments) is None
        with pytest.raises(SystemExit) as exit_info:
            entry.worker_main(0, None, None)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert exit_info.value.code == entry.MAIN_PROCESS_GONE != 0
    assert all(signal.getsignal(signum) is handler for signum, handler in previous.items())


HELPERS_STARTED_SCRIPT = """
import multiprocessing, multiprocessing.forkserver as forkserver, os, signal, time
from maml_rl.samplers.workers import processes


def nap():
    try:
        time.sleep(30)
    except KeyboardInterrupt:  # Python's default SIGINT handling, as before
        raise SystemExit(7)


if __name__ == "__main__":  # the forkserver imports this file again

    processes.start_resource_tracker()
    os.kill(multiprocessing.resource_tracker._resource_tracker._pid, signal.SIGINT)  # while its interpreter starts
    processes.preload_worker_modules()
    processes.start_forkserver()
    os.kill(forkserver._forkserver._forkserver_pid, signal.SIGINT)
    time.sleep(1.5)
    for pid in (multiprocessing.resource_tracker._resource_tracker._pid, forkserver._forkserver._forkserver_pid):
        assert os.waitpid(pid, os.WNOHANG) == (0, 0), "a helper died of the Ctrl-C"
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # this thread's mask is restored
    process = multiprocessing.get_context("forkserver").Process(target=nap)
    process.start()
    time.sleep(1.0)
    with open(f"/proc/{process.pid}/status") as status:
        print(*(line.strip() for line in status if line.startswith(("SigBlk", "SigIgn"))))
    os.kill(process.pid, signal.SIGINT)
    process.join(10)
    print("exit", process.exitcode)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_ctrl_c_while_the_resource_tracker_and_forkserver_start_does_not_reach_them(tmp_path):
    """The two helper processes multiprocessing starts by exec ignore SIGINT only once their interpreter has
    started; both are started with it blocked (a Ctrl-C to the process group then printed "Fatal Python error:
    init_import_site" and a KeyboardInterrupt traceback). Here each gets a SIGINT right after it is started, in
    its interpreter's start: both live on, quietly, and a process the forkserver forks still gets Ctrl-C."""
    script = tmp_path / "helpers.py"
    script.write_text(HELPERS_STARTED_SCRIPT)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Fatal" not in result.stderr, result.stderr
    blocked, ignored = (int(field.split()[1], 16) for field in result.stdout.split("Sig")[1:3])
    assert not blocked >> (signal.SIGINT - 1) & 1 and not ignored >> (signal.SIGINT - 1) & 1, result.stdout
    assert result.stdout.split()[-1] == "7", result.stdout  # the child's KeyboardInterrupt
