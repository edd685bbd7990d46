"""The sampler's worker processes seen from outside: what they import, and how
a run ends on Ctrl-C (twice), SIGTERM and SIGHUP.

Every test runs a real script in a subprocess and checks the processes it
left and the named semaphores (``/dev/shm/sem.mp-*``, used under spawn and
forkserver) that it had mapped. Other programs on the machine may create
and remove semaphores at the same time, so only the names found in the
maps of the script's own processes are checked.
"""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings

import pytest

from maml_rl.samplers.workers import processes

from helpers import ROOT, TESTS
from helpers.process_utils import SAMPLING_SCRIPT, is_running, mapped_semaphores, wait_until_gone

pytestmark = pytest.mark.processes

TIMEOUT = 60
MARKER = "MAML_RL_TEST_SCRIPT"

# train.py on 2D navigation, shrunk to a fraction of a second per iteration.
TRAIN_ARGS = [
    "--num-workers", "2", "--num-batches", "1000",
    "--set", "fast-batch-size=4", "--set", "meta-batch-size=3", "--set", "hidden-sizes=[16, 16]",
    "--set", "env-kwargs.max_episode_steps=10", "--set", "first-order=true", "--set", "cg-iters=2",
    "--set", "ls-max-steps=2",
]


# -- processes and semaphores ------------------------------------------------


def descendants(pid: int):
    """Every live process below ``pid``: workers, forkserver, resource tracker."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def leftover_semaphores(names):
    return sorted(name for name in names if os.path.exists(name))


# A test runner started under nohup (SIGHUP ignored) or in a non-interactive shell's background (SIGINT
# ignored) passes the ignored signals on through fork and exec, and train.py rightly keeps an ignored
# SIGHUP ignored; so each script starts with both at their defaults, as a terminal's process does.
DEFAULT_SIGNALS = ("import os, signal, sys; "
                   "[signal.signal(s, signal.SIG_DFL) for s in (signal.SIGHUP, signal.SIGINT)]; "
                   "os.execv(sys.executable, [sys.executable] + sys.argv[1:])")


class Script:
    """A Python script in a subprocess, its stdout read line by line and its
    stderr gathered in the background as it comes (progress bars end their
    lines with a bare carriage return, which line reading would hold back)."""

    def __init__(self, args, new_session=False, cwd=ROOT):
        # Inherited by every process the script starts, even one orphaned later.
        self.marker = f"{MARKER}={uuid.uuid4().hex}".encode()
        self.process = subprocess.Popen(
            [sys.executable, "-c", DEFAULT_SIGNALS, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, start_new_session=new_session, env={**os.environ, MARKER: self.marker.split(b"=")[1].decode()},
        )
        self._stderr = []
        self._reader = threading.Thread(target=self._read_stderr)
        self._reader.start()

    def _read_stderr(self):
        fd = self.process.stderr.fileno()
        while chunk := os.read(fd, 65536):
            self._stderr.append(chunk)

    @property
    def pid(self):
        return self.process.pid

    def line(self):
        line = self.process.stdout.readline().decode()
        assert line, f"the script ended early:\n{self.stderr()}"
        return line.strip()

    def stderr(self):
        return b"".join(self._stderr).decode(errors="replace")

    def processes(self):
        """Every live process started by the script (itself included), wherever it is now."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/environ", "rb") as environ:
                        if self.marker in environ.read().split(b"\0") and is_running(int(entry)):
                            found.append(int(entry))
                except OSError:
                    pass
        return found

    def left_behind(self, timeout=15.0):
        """The script's processes still alive after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (found := self.processes()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return found

    def signal(self, signum, group=False):
        if self.process.poll() is None:
            (os.killpg if group else os.kill)(self.pid, signum)

    def wait(self):
        try:
            self.process.wait(timeout=TIMEOUT)
        finally:
            self.process.kill()
            self.process.wait()
            self._reader.join()
            self.process.stdout.close()
            self.process.stderr.close()
        return self.process.returncode


def start_train(tmp_path, new_session=False):
    output = tmp_path / "run"
    script = Script([ROOT / "train.py", "--output-folder", output, *TRAIN_ARGS], new_session=new_session)
    return script, output / "metrics.jsonl"


def wait_for_first_iteration(script, metrics):
    """Until the workers are up and one iteration is done."""
    deadline = time.monotonic() + TIMEOUT
    while not (metrics.exists() and metrics.read_text().strip()):
        assert script.process.poll() is None, f"train.py ended early:\n{script.stderr()}"
        assert time.monotonic() < deadline, "train.py did no iteration in time"
        time.sleep(0.05)


def assert_quiet(stderr):
    assert "Exception ignored" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
    assert "leaked" not in stderr, stderr  # the resource tracker's "leaked semaphore objects"


# -- 1. workers and torch ----------------------------------------------------

TORCH_SCRIPT = """
import torch  # first, as train.py does: the workers must not get it
import os, sys
sys.path.insert(0, {tests!r})
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import make_probe_env


def rss_mb(pid):
    with open(f"/proc/{{pid}}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


if __name__ == "__main__":
    with MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=make_probe_env, seed=0,
                          num_workers=2, start_method={start_method!r}) as sampler:
        batches = sampler.rollout([{{"value": 0.0, "length": 3}}] * 2)
        pids = sampler.worker_pids
        print(*[int(flag) for batch in batches for flag in batch.observations[0, :, 2]])
        print("worker VmRSS MB:", *[rss_mb(pid) for pid in pids], file=sys.stderr)
"""


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_workers_import_no_torch_when_the_main_module_does(tmp_path, start_method):
    script_path = tmp_path / "torch_first.py"
    script_path.write_text(TORCH_SCRIPT.format(tests=str(TESTS), start_method=start_method))
    script = Script([script_path])
    torch_loaded = [int(flag) for flag in script.line().split()]
    assert script.wait() == 0, script.stderr()
    assert len(torch_loaded) == 4
    if start_method == "fork":
        # A forked worker is a copy of the main process, torch included: nothing to check.
        return
    # Under spawn and forkserver the workers do not run the main module again.
    assert torch_loaded == [0, 0, 0, 0], script.stderr()


PRELOAD_SCRIPT = """
import multiprocessing, multiprocessing.forkserver, sys
sys.path.insert(0, {tests!r})
multiprocessing.set_forkserver_preload(["__main__", "json"])  # the user's own, set before the sampler
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import make_probe_env


def report_sigint(queue):
    import signal
    queue.put(signal.getsignal(signal.SIGINT) is signal.default_int_handler)


if __name__ == "__main__":
    out, policy = [], NormalMLPPolicy(3, 1)
    for method in ("forkserver", "forkserver", "spawn"):
        with MultiTaskSampler(None, None, 2, policy, None, env_fn=make_probe_env, seed=0,
                              num_workers=2, start_method=method) as sampler:
            batch = sampler.rollout([{{"value": 0.5, "length": 3}}] * 3)[2]
            # The probe's observations say whether torch is loaded (0 here): the policy sees them.
            out.append(b"".join(x.numpy().tobytes() for x in (batch.observations, batch.actions, batch.rewards)))
    print(multiprocessing.forkserver._forkserver._preload_modules)
    print(len(set(out)))
    # A process of the user's own from the same server still gets Ctrl-C as a KeyboardInterrupt.
    ctx = multiprocessing.get_context("forkserver")
    queue = ctx.Queue()
    process = ctx.Process(target=report_sigint, args=(queue,))
    process.start()
    print(queue.get(timeout=60))
    process.join()
"""


def test_the_forkserver_preloads_the_worker_modules_and_keeps_the_users_list(tmp_path):
    """A forkserver sampler has the server import the worker's modules once (each worker it forks then skips
    ~0.4 CPU-s of imports): added to the user's own preload list, once for any number of samplers, the workers
    still without torch, the episodes spawn's bit for bit, and the server's other children keep Ctrl-C's default
    handling (the preload ignores SIGINT while it imports)."""
    script_path = tmp_path / "preload.py"
    script_path.write_text(PRELOAD_SCRIPT.format(tests=str(TESTS)))
    done = subprocess.run([sys.executable, str(script_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    preload, distinct, users_sigint = done.stdout.split("\n")[:3]
    assert preload == str(["__main__", "json", *processes.WORKER_MODULES])
    assert distinct == "1"
    assert users_sigint == "True"


MAIN_ENV_SCRIPT = """
import torch
import dataclasses, sys
import gymnasium as gym
import numpy as np
sys.path.insert(0, {tests!r})
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import ProbeEnv


@dataclasses.dataclass
class Task:
    value: float
    length: int


class MainEnv(ProbeEnv):
    \"\"\"Defined in the main module, with tasks of a class defined there too.\"\"\"

    def sample_tasks(self, num_tasks):
        return [Task(float(k + 1), 3) for k in range(num_tasks)]

    def reset_task(self, task):
        assert isinstance(task, Task), task
        super().reset_task({{"value": task.value, "length": task.length}})

    def _observation(self):
        observation = super()._observation()
        observation[1] = float(hasattr(sys.modules["__main__"], "MAIN_MODULE_RAN"))  # run again here?
        return observation


MAIN_MODULE_RAN = True


if __name__ == "__main__":
    with MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=lambda: gym.wrappers.TimeLimit(MainEnv(), 3),
                          seed=0, num_workers=2, start_method={start_method!r}) as sampler:
        batches = sampler.rollout(sampler.sample_tasks(2))
        for batch in batches:
            print(*batch.observations[0].flatten().tolist())
"""


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_env_and_tasks_defined_in_the_main_module(tmp_path, start_method):
    """cloudpickle sends the factory, the env class and the tasks by value:
    the workers build the env without running the main module again."""
    script_path = tmp_path / "main_env.py"
    script_path.write_text(MAIN_ENV_SCRIPT.format(tests=str(TESTS), start_method=start_method))
    script = Script([script_path])
    rows = [[float(x) for x in script.line().split()] for _ in range(2)]
    assert script.wait() == 0, script.stderr()
    for k, row in enumerate(rows):
        # [value, main module run again, torch loaded] for each of 2 episodes
        assert row == [k + 1.0, 0.0, 0.0] * 2, script.stderr()


REGISTERED_IN_MAIN_SCRIPT = """
import sys
import gymnasium as gym
sys.path.insert(0, {tests!r})
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import ProbeEnv

gym.register("MainRegisteredProbe-v0", entry_point=ProbeEnv, max_episode_steps=4)
{body}
"""

REGISTERED_IN_MAIN_BODY = """
def run():
    with MultiTaskSampler("MainRegisteredProbe-v0", {}, 2, NormalMLPPolicy(3, 1), None, seed=0,
                          num_workers=1, start_method="spawn") as sampler:
        print(len(sampler.rollout([{"value": 0.0, "length": 3}])))
"""


@pytest.mark.slow
def test_env_registered_in_the_main_module_makes_workers_import_it(tmp_path):
    """A factory that needs the main module (an env id registered there) still
    works: a worker that cannot build its envs imports the main module and
    tries again."""
    script_path = tmp_path / "registered.py"
    body = REGISTERED_IN_MAIN_BODY + '\nif __name__ == "__main__":\n    run()\n'
    script_path.write_text(REGISTERED_IN_MAIN_SCRIPT.format(tests=str(TESTS), body=body))
    script = Script([script_path])
    assert script.line() == "1"
    assert script.wait() == 0, script.stderr()


@pytest.mark.slow
def test_missing_main_guard_needed_by_the_envs_is_explained(tmp_path):
    """Without the guard, the worker importing the main module for its envs
    would run the script again; it fails and the error says why."""
    script_path = tmp_path / "registered_no_guard.py"
    body = REGISTERED_IN_MAIN_BODY + "\nrun()\n"
    script_path.write_text(REGISTERED_IN_MAIN_SCRIPT.format(tests=str(TESTS), body=body))
    result = subprocess.run([sys.executable, str(script_path)], capture_output=True, text=True, timeout=TIMEOUT,
                            cwd=ROOT)
    assert result.returncode != 0
    assert "WorkerError" in result.stderr and 'if __name__ == "__main__":' in result.stderr, result.stderr
    assert "MainRegisteredProbe" in result.stderr  # the first error, the one that made it import the module


# -- 2. Ctrl-C twice -----------------------------------------------------------


@pytest.mark.slow
def test_quick_double_ctrl_c_in_train_py(tmp_path):
    """Twice Ctrl-C while the first iteration starts its workers: one message,
    no traceback from a finalizer, nothing left behind."""
    script, metrics = start_train(tmp_path, new_session=True)
    deadline = time.monotonic() + TIMEOUT
    while "batch" not in script.stderr():  # the progress bar: the sampler exists, its workers start now
        assert script.process.poll() is None and time.monotonic() < deadline, script.stderr()
        time.sleep(0.02)
    time.sleep(0.3)
    processes = descendants(script.pid)
    names = mapped_semaphores([script.pid, *processes])
    assert names  # train.py's default start method, forkserver, names its semaphores
    script.signal(signal.SIGINT, group=True)
    time.sleep(0.05)
    script.signal(signal.SIGINT, group=True)
    returncode = script.wait()
    stderr = script.stderr()
    assert returncode == 130, stderr
    assert "interrupted: continue with --resume" in stderr
    assert_quiet(stderr)
    assert script.left_behind() == []
    assert leftover_semaphores(names) == []


SLOW_STEP_SCRIPT = """
import sys, time
import gymnasium as gym
sys.path.insert(0, {tests!r})
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import ProbeEnv


class SlowEnv(ProbeEnv):
    def step(self, action):
        time.sleep(self.task.get("sleep", 0.0))
        return super().step(action)


if __name__ == "__main__":
    sampler = MultiTaskSampler(None, None, 1, NormalMLPPolicy(3, 1), None, env_fn=lambda: gym.wrappers.TimeLimit(SlowEnv(), 4),
                               num_workers=1, start_method={start_method!r})
    sampler.rollout([{{"value": 0.0, "length": 2}}])
    print(*sampler.worker_pids, flush=True)
    sampler.rollout([{{"value": 0.0, "length": 2, "sleep": 60.0}}])  # a step the worker will not finish
"""


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_second_ctrl_c_during_shutdown_does_not_abandon_it(tmp_path, start_method):
    """The first Ctrl-C ends the workers; the worker is busy in a long step, so
    that takes a while, and the second Ctrl-C comes meanwhile: it must neither
    abandon the shutdown nor add a second traceback."""
    script_path = tmp_path / "slow_step.py"
    script_path.write_text(SLOW_STEP_SCRIPT.format(tests=str(TESTS), start_method=start_method))
    script = Script([script_path], new_session=True)
    workers = [int(pid) for pid in script.line().split()]
    time.sleep(1.0)  # the worker is in its long step
    processes = descendants(script.pid)
    assert set(workers) <= set(processes)
    names = mapped_semaphores([script.pid, *processes])
    assert names  # spawn and forkserver semaphores have names
    script.signal(signal.SIGINT)
    time.sleep(0.3)
    script.signal(signal.SIGINT)
    script.wait()
    stderr = script.stderr()
    assert stderr.count("Traceback") == 1 and "KeyboardInterrupt" in stderr, stderr
    assert "During handling of the above exception" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
    assert script.left_behind() == []
    assert leftover_semaphores(names) == []


SLOW_START_SCRIPT = """
import multiprocessing, sys, time
import gymnasium as gym
sys.path.insert(0, {tests!r})
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import ProbeEnv


class SlowStartEnv(ProbeEnv):
    def __init__(self):
        super().__init__()
        if multiprocessing.parent_process() is not None:
            time.sleep(60)  # a worker building an env that takes long


if __name__ == "__main__":
    sampler = MultiTaskSampler(None, None, 1, NormalMLPPolicy(3, 1), None, env_fn=lambda: gym.wrappers.TimeLimit(SlowStartEnv(), 4),
                               num_workers=2, start_method="spawn")
    print("starting", flush=True)
    try:
        sampler.rollout([{{"value": 0.0, "length": 2}}] * 2)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        time.sleep(60)
"""


@pytest.mark.slow
def test_ctrl_c_while_workers_start_ends_them_at_once(tmp_path):
    """Workers interrupted while they start are ended by the interrupted call,
    not by a finalizer at some later garbage collection (where a second
    Ctrl-C printed "Exception ignored in: <finalize object>")."""
    script_path = tmp_path / "slow_start.py"
    script_path.write_text(SLOW_START_SCRIPT.format(tests=str(TESTS)))
    script = Script([script_path], new_session=True)
    try:
        assert script.line() == "starting"
        deadline = time.monotonic() + TIMEOUT
        workers = []
        while len(workers) < 2:
            assert time.monotonic() < deadline, "the workers did not start"
            workers = [pid for pid in descendants(script.pid) if "spawn_main" in command_line(pid)]
            time.sleep(0.05)
        time.sleep(0.5)
        script.signal(signal.SIGINT)
        assert script.line() == "interrupted"
        assert script.process.poll() is None  # still in its `except` block, holding the traceback
        assert wait_until_gone(workers) == []
    finally:
        script.process.kill()
        script.wait()


# -- 3. SIGTERM and SIGHUP -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_train_py_ends_cleanly_on_sigterm_and_sighup(tmp_path, signum):
    """SIGTERM to train.py, or SIGHUP to its whole process group (what a
    closing terminal does): a message, exit status 128 + signal, no worker
    or semaphore left."""
    script, metrics = start_train(tmp_path, new_session=True)
    wait_for_first_iteration(script, metrics)
    processes = descendants(script.pid)
    names = mapped_semaphores([script.pid, *processes])
    assert names  # train.py's default start method, forkserver, names its semaphores
    script.signal(signum, group=signum == signal.SIGHUP)
    returncode = script.wait()
    stderr = script.stderr()
    assert returncode == 128 + signum, stderr
    assert f"stopped by {signum.name}: continue with --resume" in stderr
    assert_quiet(stderr)
    assert script.left_behind() == []
    assert leftover_semaphores(names) == []


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_hangup_of_a_script_without_handlers_leaves_nothing(tmp_path, start_method):
    """A script that does not handle SIGHUP dies of it with its terminal. Its
    workers, which ignore SIGHUP, notice and exit; the resource tracker,
    which the sampler starts immune to SIGHUP, unlinks the semaphores."""
    script_path = tmp_path / "sample_forever.py"
    script_path.write_text(SAMPLING_SCRIPT.format(tests=str(TESTS), start_method=start_method))
    script = Script([script_path], new_session=True)
    workers = [int(pid) for pid in script.line().split()]
    time.sleep(0.3)  # mid-rollout
    processes = descendants(script.pid)
    assert set(workers) <= set(processes)
    names = mapped_semaphores([script.pid, *processes])
    assert bool(names) is (start_method != "fork")  # fork's semaphores have no names
    script.signal(signal.SIGHUP, group=True)
    assert script.wait() == -signal.SIGHUP
    assert script.left_behind() == []
    assert leftover_semaphores(names) == []


# -- 4. more workers than CPUs -------------------------------------------------


def test_more_than_twice_as_many_workers_as_cpus_warns(monkeypatch, probe_sampler):
    monkeypatch.setattr(processes, "usable_cpus", lambda: 1)
    with probe_sampler(num_workers=3, start_method="fork") as sampler:
        with pytest.warns(RuntimeWarning, match=r"3 env worker processes for 1 usable CPU.*slows down") as record:
            sampler.rollout([{"value": 0.0, "length": 2}] * 2)
    assert record[0].filename == __file__  # points at the call that started the workers
    with probe_sampler(num_workers=2, start_method="fork") as sampler, warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler.rollout([{"value": 0.0, "length": 2}] * 2)


def test_usable_cpus_follows_the_affinity_mask():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    assert processes.usable_cpus() == len(os.sched_getaffinity(0)) >= 1
