"""Signals are honoured from a script's first lines: a SIGINT to a background job of a shell script (started with
SIGINT ignored) while train.py still imports torch stops it, and SIGTERM or SIGHUP then end it with a message; a
signal once the script is done cannot turn a finished run's exit into a death by that signal."""

import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT

pytestmark = pytest.mark.processes


def importing_torch(pid):
    """Whether the process has begun loading torch's library (its imports are well under way, not over)."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return "libtorch" in maps.read()
    except OSError:
        return False


def signal_while_starting(tmp_path, small_config, signum):
    config = small_config(tmp_path, **{"num-batches": 2})
    # As a shell script's `python train.py ... &` starts it: SIGINT ignored, SIGTERM and SIGHUP at their defaults.
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), "--config", str(config), "--output-folder", str(tmp_path / "run"),
         "--num-workers", "0", "--seed", "1"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: [signal.signal(signal.SIGINT, signal.SIG_IGN),
                                       signal.signal(signal.SIGHUP, signal.SIG_DFL)])
    deadline = time.monotonic() + 60
    while not importing_torch(process.pid):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.005)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


def test_sigint_while_a_background_train_py_starts_stops_it(tmp_path, small_config):
    """It was lost: the run went on to the end and exited 0."""
    status, err = signal_while_starting(tmp_path, small_config, signal.SIGINT)
    assert (status, err.strip()) == (130, "interrupted while train.py was starting; nothing was done")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_while_train_py_starts_is_said(tmp_path, small_config, signum):
    """Either killed the process without a word (status -15, -1)."""
    status, err = signal_while_starting(tmp_path, small_config, signum)
    name = signal.Signals(signum).name
    assert (status, err.strip()) == (128 + signum, f"stopped by {name} while train.py was starting; nothing was done")
    assert not (tmp_path / "run").exists()


def test_a_signal_after_the_script_is_done_changes_nothing():
    """The handlers stayed after main() returned, and the interpreter's shutdown restores the default actions:
    3 of 60 finished runs exited -15 when a SIGTERM came then."""
    from maml_rl.app.command_line import run_script

    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        run_script(lambda: None)
        for signum in handlers:
            assert signal.getsignal(signum) is signal.SIG_IGN, signal.Signals(signum).name
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


DOUBLE_SIGNAL_SCRIPT = """
import signal, sys, weakref
from maml_rl.app.startup import install_signal_handlers

install_signal_handlers()
try:
    try:
        raise ValueError("an unrelated error being handled")
    except ValueError:
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C: raised, whatever else is being handled
except KeyboardInterrupt:
    # The clean-up meets a second Ctrl-C in a weakref callback (an import's module lock runs one), then a SIGTERM.
    class Thing:
        pass
    thing = Thing()
    ref = weakref.ref(thing, lambda _: signal.raise_signal(signal.SIGINT))
    del thing
    try:
        raise OSError("a clean-up step that failed")
    except OSError:
        signal.raise_signal(signal.SIGTERM)
    print("cleaned up")
    sys.exit(130)
"""


def test_a_second_signal_while_the_first_unwinds_is_dropped(tmp_path):
    """A second Ctrl-C, 50 ms after the first while train.py's workers started, landed in an import's weakref
    callback and printed "Exception ignored in: <function _get_module_lock.<locals>.cb>" and a traceback; a
    SIGTERM then would have cut the clean-up short."""
    done = subprocess.run([sys.executable, "-c", DOUBLE_SIGNAL_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "cleaned up\n", "")


SWALLOWED_SIGNAL_SCRIPT = """
import signal, sys, time, weakref
from maml_rl.app.startup import install_signal_handlers

install_signal_handlers()
# The callback an import runs when it drops its module lock, as importlib names it, and a finalizer: an exception
# raised in either is printed as "Exception ignored" and lost.
namespace = {{"signal": signal}}
exec(compile("def cb(ref):\\n    signal.raise_signal(signal.{name})\\n", "<frozen importlib._bootstrap>", "exec"),
     namespace)


class Thing:
    def __del__(self):
        signal.raise_signal(signal.{name})


thing = Thing()
ref = weakref.ref(thing, namespace["cb"]) if {callback} else None
try:
    del thing
    time.sleep(10)
    print("the signal was lost")
except (KeyboardInterrupt, SystemExit) as stop:
    print(type(stop).__name__)
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("callback", [True, False], ids=["module-lock-callback", "finalizer"])
def test_a_signal_that_lands_in_a_finalizer_is_delivered_after_it(name, callback):
    """Raised inside the callback, Ctrl-C printed "Exception ignored" and a traceback, and the run went on."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SWALLOWED_SIGNAL_SCRIPT.format(name=name, callback=callback)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    expected = "KeyboardInterrupt" if name == "SIGINT" else "SignalExit"
    assert (done.returncode, done.stdout, done.stderr) == (0, expected + "\n", "")
    assert time.monotonic() - started < 8  # not after the 10 s sleep
