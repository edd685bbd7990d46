"""One caller at a time: the sampler's guard against use from two threads."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

__all__ = ["OneCallAtATime"]


class OneCallAtATime:
    """Refuses a second concurrent call at once, saying which call is running and where.

    The sampler is not thread-safe by design (one shared set of buffers and
    workers): a second concurrent call is refused rather than left to corrupt both.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._lock = threading.Lock()
        self._busy_with = ""

    @contextlib.contextmanager
    def __call__(self, call: str) -> Iterator[None]:
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
