"""Signals while a script is still importing its modules (torch takes a second or more).

``run_script`` turns Ctrl-C, SIGTERM and SIGHUP into a clean exit once ``main()``
runs; before that, Python would print a traceback through torch's imports on
Ctrl-C, die without a word on SIGTERM or SIGHUP, and, in a background job of a
shell script (started with SIGINT ignored), lose a SIGINT altogether and run to
the end. This module imports nothing but the standard library, so that the
handlers are in place from a script's first lines, before those imports.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
from typing import Iterator

__all__ = ["SignalExit", "install_signal_handlers", "quiet_interrupt"]


class SignalExit(SystemExit):
    """Raised by SIGTERM or SIGHUP while a script runs."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name


def _already_stopping() -> bool:
    """Whether the exception of an earlier stop signal is being handled: the script is on its way to the exit."""
    error, seen = sys.exc_info()[1], set()
    while error is not None and id(error) not in seen:
        if isinstance(error, (KeyboardInterrupt, SignalExit)):
            return True
        seen.add(id(error))
        error = error.__context__
    return False


def _swallowed_in(frame) -> bool:
    """Whether an exception raised in ``frame`` would be printed as "Exception ignored" and lost: in a finalizer,
    or in the weakref callback that an import runs when it drops its module lock."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or (code.co_name == "cb" and code.co_filename == "<frozen importlib._bootstrap>"):
            return True
        frame = frame.f_back
    return False


#: Delay before a signal that met a finalizer is delivered again, in seconds: the finalizer has returned by then.
REDELIVERY_DELAY = 0.01


def _stop(signum, frame, error) -> None:
    # A second signal while the first one's exception unwinds (a double Ctrl-C) is dropped: the script is already
    # stopping, and its exit status is the first signal's. Raised, it would cut a clean-up short.
    if _already_stopping():
        return
    if _swallowed_in(frame):
        # Raised here it would print a traceback and be lost (the run going on): deliver it again once out.
        timer = threading.Timer(REDELIVERY_DELAY, _redeliver, args=(signum,))
        timer.daemon = True
        timer.start()
        return
    raise error


def _redeliver(signum: int) -> None:
    # To the main thread itself, as a signal: a sleep or a wait there wakes up (_thread.interrupt_main would only
    # set Python's flag, seen once the wait ends).
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(threading.main_thread().ident, signum)
    else:
        _thread.interrupt_main(signum)


def _raise_keyboard_interrupt(signum, frame):
    _stop(signum, frame, KeyboardInterrupt())


def _raise_signal_exit(signum, frame):
    _stop(signum, frame, SignalExit(signum))


def install_signal_handlers() -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP :class:`SignalExit`, each unless an earlier one is
    already being handled; idempotent."""
    # A shell starts a background job (`train.py &` in a script) with SIGINT ignored, and Python keeps that:
    # a run that cannot be interrupted. SIGINT is this script's way to stop, so it is always honoured.
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.default_int_handler):
        signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    # A SIGTERM or SIGHUP already ignored (nohup) or handled by whoever embeds the script is left alone.
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _raise_signal_exit)


@contextlib.contextmanager
def quiet_interrupt(script: str) -> Iterator[None]:
    """Around a script's imports: Ctrl-C exits with status 130, SIGTERM and SIGHUP with 128 + their number, each
    with one line, as they do once the script runs."""
    install_signal_handlers()
    try:
        yield
    except KeyboardInterrupt:
        _starting_stopped(f"interrupted while {script} was starting; nothing was done", 130)
    except SignalExit as stop:
        _starting_stopped(f"stopped by {stop.signal_name} while {script} was starting; nothing was done", stop.code)


def _starting_stopped(message: str, status: int) -> None:
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):  # a second signal must not cut the exit short
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    try:
        print(message, file=sys.stderr)
    except OSError:  # the terminal is gone (SIGHUP)
        pass
    sys.exit(status)
