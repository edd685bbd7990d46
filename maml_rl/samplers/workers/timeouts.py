"""A worker past the sampler's ``step_timeout``: where it hangs, and the error that says so.

The pool (``pools.ChildEnvPool``) notices the timeout where it already waits for its workers'
reports, so a step that finishes in time costs nothing more. It then asks each worker still busy
where it is (``entry.POSITION_SIGNAL``, answered through the worker's pipe by a signal handler),
kills it, and raises :func:`step_timeout_error`'s error. Torch-free.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import StepTimeoutError
from .entry import POSITION_SIGNAL, RESET, RESET_TASK, STEP

# How long the busy workers get, together, to say where they are before they are killed.
POSITION_TIMEOUT = 1.0

Position = Tuple[str, Optional[int], Any]  # operation, slot (None between slots), task


def ask_positions(pids: Dict[int, int], connections: Sequence[Any]) -> Dict[int, Position]:
    """``{worker: (operation, slot, task)}`` of the workers of ``pids`` (``{worker: pid}``) that
    answer :data:`~.entry.POSITION_SIGNAL` within ``POSITION_TIMEOUT``: an env stuck in C code
    (or blocking the signal) cannot, and is named by its slots instead."""
    if POSITION_SIGNAL is None:
        return {}
    for pid in pids.values():
        try:
            os.kill(pid, POSITION_SIGNAL)
        except OSError:
            pass
    positions, deadline = {}, time.monotonic() + POSITION_TIMEOUT
    for w in pids:
        try:
            if connections[w].poll(max(0.0, deadline - time.monotonic())):
                kind, position = connections[w].recv()
                if kind == "position":
                    positions[w] = position
        except (EOFError, OSError, ValueError, TypeError):
            pass
    return positions


def step_timeout_error(workers: List[int], pids: List[int], positions: Dict[int, Position], timeout: float,
                       ranges: List[range], commands: List[int], tasks: Sequence[Any],
                       first_slot: int) -> StepTimeoutError:
    """The error for ``workers`` (with their ``pids``, slot ``ranges`` and ``commands``), killed after
    ``timeout`` seconds; ``tasks`` are the call's per slot, numbered in messages from ``first_slot``."""
    described = []
    for w, pid, r, command in zip(workers, pids, ranges, commands):
        if w in positions:
            operation, slot, task = positions[w]
            where = f"during {operation}" + ("" if slot is None else f" in env slot {slot} (task {task!r})")
        else:
            what = {STEP: "a step", RESET: "a reset", RESET_TASK: "reset_task"}.get(command, "a command")
            slot_tasks = [tasks[s] for s in r if s < len(tasks)]
            where = (f"during {what} of env slots {first_slot + r.start}-{first_slot + r.stop - 1} "
                     f"(tasks {slot_tasks!r}; it did not say which slot)")
        described.append(f"ChildEnv worker {w} (pid {pid}) hung {where}")
    message = (
        "; ".join(described) + f". It did not finish within step_timeout={timeout:g} s: it was killed and the "
        "other workers ended (the next call starts new ones). Find what makes the env hang, or pass a larger "
        "step_timeout if its steps are that slow."
    )
    _, slot, task = positions.get(workers[0], (None, None, None))
    return StepTimeoutError(message, worker=workers[0], pid=pids[0], slot=slot, task=task)
