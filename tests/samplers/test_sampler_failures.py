"""MultiTaskSampler under failure: crashing envs, killed workers, signals, leaks."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
import weakref

import pytest

from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.samplers import SamplerClosedError, WorkerDiedError, WorkerError
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers import ROOT, TESTS
from helpers.process_utils import SAMPLING_SCRIPT, is_running, wait_or_explain, wait_until_gone

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("where", ["step", "reset_task"])
def test_env_exception_raises_with_traceback_slot_and_task(where, probe_sampler):
    sampler = probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=2)
    sampler.rollout([{"value": 0.0, "length": 5}] * 2)
    pids = sampler.worker_pids
    tasks = [{"value": 0.0, "length": 5}, {"value": 1.0, "length": 5, "fail": where}]
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        sampler.rollout(tasks)
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert f"told to fail in {where}" in message and "Traceback" in message
    assert f"during {where}" in message and "slot 2" in message and "'fail'" in message
    assert wait_until_gone(pids) == []
    # The sampler recovers with fresh workers.
    assert len(sampler.rollout(tasks[:1])) == 1
    sampler.close()


def test_env_exception_in_process_mode(probe_sampler):
    with probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=0) as sampler:
        with pytest.raises(WorkerError, match="slot 2.*told to fail in step"):
            sampler.rollout([{"value": 0.0, "length": 5}, {"value": 1.0, "length": 5, "fail": "step"}])


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_killed_worker_is_noticed(start_method, probe_sampler):
    sampler = probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=2, start_method=start_method)
    sampler.rollout([{"value": 0.0, "length": 5}])
    pids = sampler.worker_pids
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match="SIGKILL"):
        sampler.rollout([{"value": 0.0, "length": 5}, {"value": 0.0, "length": 5, "kill_at": 1}])
    assert time.monotonic() - start < 5
    assert wait_until_gone(pids) == []
    sampler.close()
    with pytest.raises(SamplerClosedError):
        sampler.rollout([{"value": 0.0, "length": 5}])


def test_workers_end_when_sampler_is_garbage_collected(probe_sampler):
    sampler = probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=2)
    sampler.rollout([{"value": 0.0, "length": 3}])
    pids = sampler.worker_pids
    buffers = weakref.ref(sampler.rollout_backend.pool.buffers.observations)
    del sampler
    gc.collect()
    assert wait_until_gone(pids) == []
    assert buffers() is None


def test_close_is_idempotent_and_releases_buffers(probe_sampler):
    with probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=2) as sampler:
        sampler.rollout([{"value": 0.0, "length": 3}])
        pids = sampler.worker_pids
        buffers = weakref.ref(sampler.rollout_backend.pool.buffers.observations)
    sampler.close()
    gc.collect()
    assert wait_until_gone(pids) == [] and buffers() is None


def open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
def test_many_calls_leak_no_fds_or_processes(probe_sampler):
    with probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=2) as sampler:
        tasks = [{"value": 0.5, "length": 3}, {"value": -0.5, "length": 4}]
        sample_adapt_sample(sampler, tasks, num_steps=1)
        fds, pids = open_fds(), sampler.worker_pids
        for _ in range(200):
            sample_adapt_sample(sampler, tasks, num_steps=1)
        assert open_fds() == fds
        assert sampler.worker_pids == pids and all(is_running(pid) for pid in pids)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_signal_while_sampling_exits_without_orphans(tmp_path, signum, start_method):
    script = tmp_path / "sample_forever.py"
    script.write_text(SAMPLING_SCRIPT.format(tests=str(TESTS), start_method=start_method))
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=ROOT)
    try:
        pids = [int(pid) for pid in process.stdout.readline().split()]
        assert len(pids) == 2, process.stderr.read()
        time.sleep(0.3)  # mid-rollout
        process.send_signal(signum)
        # The shutdown takes at most 2 * CLOSE_TIMEOUT (4 s) plus the exit; the
        # rest is room for a loaded machine. A hang fails with the stacks.
        wait_or_explain(process, 20, pids)
    finally:
        process.kill()
    assert wait_until_gone(pids) == []


def test_a_script_that_does_not_exit_is_reported_with_its_stacks(tmp_path):
    """What the test above reports on a hang, shown on a sampling script that ignores SIGINT."""
    script = tmp_path / "deaf.py"
    script.write_text(SAMPLING_SCRIPT.format(tests=str(TESTS), start_method="fork").replace(
        'if __name__ == "__main__":', 'signal.signal(signal.SIGINT, signal.SIG_IGN)\nif __name__ == "__main__":'))
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=ROOT)
    try:
        pids = [int(pid) for pid in process.stdout.readline().split()]
        assert len(pids) == 2, process.stderr.read()
        process.send_signal(signal.SIGINT)
        with pytest.raises(pytest.fail.Exception) as info:
            wait_or_explain(process, 1, pids)
    finally:
        process.kill()
    message = str(info.value)
    assert "did not exit within 1 s" in message
    assert "Current thread" in message and " in rollout" in message  # faulthandler's stack of the main thread
    # The kernel names a process after the file it ran (python, python3, ...: coverage's entry point runs python3).
    name = os.path.basename(sys.executable)[:15]
    assert all(f"{pid} ({name})" in message for pid in (process.pid, *pids))
    assert process.poll() is not None
    assert wait_until_gone(pids) == []  # the workers notice that the script is gone


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_script_without_main_guard_runs(tmp_path, start_method):
    """The workers do not run the main module again (the env factory travels
    by value), so a script without `if __name__ == "__main__":` works; a
    script whose envs need the main module is tested in test_sampler_processes."""
    script = tmp_path / "no_guard.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from maml_rl.policies import NormalMLPPolicy
        from maml_rl.samplers import MultiTaskSampler
        from helpers.sampler_envs import make_probe_env

        sampler = MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=make_probe_env,
                                   num_workers=1, start_method={start_method!r})
        print(len(sampler.rollout([{{"value": 0.0, "length": 3}}])))
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_interrupted_command_ends_the_workers_promptly(monkeypatch, start_method, probe_sampler):
    """Ctrl-C between waking a worker for a command and sending its payload left
    the worker waiting for the payload, deaf to CLOSE: each such worker cost
    the 2 s join timeout, then a SIGTERM (a shutdown past 10 s was seen under
    load). The worker now sees CLOSE while it waits, and ends by itself."""
    from maml_rl.samplers.workers import pools

    sampler = probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=2, start_method=start_method)
    tasks = [{"value": 0.0, "length": 3}] * 2
    sampler.rollout(tasks)
    pids = sampler.worker_pids

    class InterruptedPickle:
        @staticmethod
        def dumps(payload):
            raise KeyboardInterrupt  # as if Ctrl-C arrived after worker 0's wake-up, before its payload

    monkeypatch.setattr(pools, "cloudpickle", InterruptedPickle)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sampler.rollout(tasks)
    elapsed = time.monotonic() - start
    assert wait_until_gone(pids) == []
    assert elapsed < pools.CLOSE_TIMEOUT / 2, f"the workers took {elapsed:.2f} s to end"
    monkeypatch.undo()
    assert len(sampler.rollout(tasks)) == 2  # and the sampler starts new workers
    sampler.close()



@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("method", ["rollout", "rollout_transitions", "rollout_trials"])
def test_sampling_runs_no_python_code_inside_numpy_lookups(probe_sampler, num_workers, method):
    """Ctrl-C raises KeyboardInterrupt in whatever Python code runs when it arrives. numpy looks up
    ``__array_ufunc__`` and the like on the other operand's type and swallows what the lookup raises,
    so a Python ``__getattr__`` there (an IntEnum's, on Python 3.11) could eat the interrupt and sampling
    would go on (about one Ctrl-C in 60 did, before). No such lookup may reach Python code in the main
    process while sampling."""
    from maml_rl.policies import GRUPolicy, rl2_input_size

    lookups = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "__getattr__":
            name = frame.f_locals.get("name")
            if isinstance(name, str) and name.startswith("__array"):
                lookups.append((frame.f_code.co_filename, name))

    # Episodes that end before the horizon and episodes cut at it: every end reason is read back.
    tasks = [{"value": 0.5, "length": 3}, {"value": -0.5, "length": 9}]
    policy = GRUPolicy(rl2_input_size(3, 1), 1, (8,), 4) if method == "rollout_trials" else None
    with probe_sampler(2, policy, baseline=LinearFeatureBaseline(3), num_workers=num_workers) as sampler:
        run = {
            "rollout": lambda: sample_adapt_sample(sampler, tasks, num_steps=1),
            "rollout_transitions": lambda: sampler.rollout_transitions(tasks, episodes=2),
            "rollout_trials": lambda: sampler.rollout_trials(tasks, 2),
        }[method]
        run()  # the pool is built outside the profile: the sampling loop is what is checked
        sys.setprofile(profile)
        try:
            run()
        finally:
            sys.setprofile(None)
    assert lookups == []
