"""How train.py and test.py run: errors, Ctrl-C, SIGTERM and SIGHUP end them cleanly.

A ``ConfigError`` prints ``error: ...`` and exits 2. Ctrl-C, SIGTERM (kill, a
job scheduler) and SIGHUP (the terminal closed) unwind the script like an
exception, so that every ``with`` block (the sampler's workers and shared
memory included) cleans up, then exit with the conventional status 128 + the
signal number.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, Callable

from maml_rl.config import ConfigError

__all__ = ["SignalExit", "run_script"]


class SignalExit(SystemExit):
    """Raised by SIGTERM or SIGHUP while a script runs."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name


def _raise_signal_exit(signum, frame):
    raise SignalExit(signum)


def _install_signal_handlers() -> None:
    # A signal already ignored (nohup) or handled by whoever embeds the script is left alone.
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _raise_signal_exit)


def _stopping(message: str) -> None:
    """The run is over and cleaned up: further signals must not interrupt the
    exit, and the terminal may be gone (SIGHUP)."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    try:
        print(message, file=sys.stderr)
    except OSError:
        pass


def run_script(main: Callable[[], Any], on_stop: str = "") -> None:
    """Run a script's ``main()`` and exit as described above.

    :param on_stop: appended to the message printed when a signal stops the run
        (e.g. how to continue it).
    """
    _install_signal_handlers()
    try:
        main()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        _stopping(f"interrupted{on_stop}")
        sys.exit(130)
    except SignalExit as stop:
        _stopping(f"stopped by {stop.signal_name}{on_stop}")
        sys.exit(stop.code)
