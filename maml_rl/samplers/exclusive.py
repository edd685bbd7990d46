"""One caller at a time: the sampler's guard against use from two threads, or from a forked child."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator

from .errors import ForkedSamplerError

__all__ = ["OneCallAtATime"]


class OneCallAtATime:
    """Refuses a second concurrent call at once, saying which call is running and where;
    and refuses every call in a child process (``os.fork()``) of the process that built it.

    The sampler is not thread-safe by design (one shared set of buffers and
    workers): a second concurrent call is refused rather than left to corrupt both.
    A forked child holds a copy of the sampler whose workers and shared memory are
    still the parent's: driving them from the child would corrupt the parent's calls.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._lock = threading.Lock()
        self._busy_with = ""
        #: The process that built the owner: the only one whose calls go through.
        self.owner_pid = os.getpid()

    @property
    def in_owner_process(self) -> bool:
        return os.getpid() == self.owner_pid

    def check_process(self, call: str) -> None:
        """:class:`ForkedSamplerError` unless this is the process that built the owner."""
        if not self.in_owner_process:
            raise ForkedSamplerError(
                f"{self.owner}.{call}() in process {os.getpid()}, a child (os.fork()) of process {self.owner_pid}, "
                f"which built the {self.owner}: its worker processes and shared memory are that process's. "
                f"Create a new {self.owner} in this process (close() here does nothing, and leaves the parent's "
                "workers alone)."
            )

    @contextlib.contextmanager
    def __call__(self, call: str) -> Iterator[None]:
        self.check_process(call)
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                f"{self.owner}.{call}() was called while {self._busy_with} is still running: "
                f"the {self.owner} is not thread-safe. Use one per thread, or a lock around its calls."
            )
        self._busy_with = f"{call}() in thread {threading.current_thread().name!r}"
        try:
            yield
        finally:
            self._lock.release()
