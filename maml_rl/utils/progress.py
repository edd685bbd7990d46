"""The seam through which a meta-learner reports the long phases of an iteration.

A learner calls ``with self.progress.phase(name, total, unit) as advance:`` around a phase that can take a
while (PEARL's collection and its gradient steps, RL²'s PPO updates, MAML's rollouts and line search) and
``advance(n)`` as it goes. The default :class:`Progress` shows nothing; ``train.py`` gives the learner one
that draws a second progress line with an ETA (:class:`maml_rl.app.progress.PhaseBar`). Reporting reads no
random number and changes no computation, so a seeded run gives the same bits with or without it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["Advance", "Progress"]

#: Called with how much of the phase's ``total`` was just done.
Advance = Callable[[int], None]


def _ignore(n: int = 1) -> None:
    pass


class Progress:
    """Receives the phases a learner reports; this one shows nothing (tests, library use)."""

    @contextmanager
    def phase(self, name: str, total: int, unit: str = "step") -> Iterator[Advance]:
        """A phase of ``total`` ``unit``\\ s, named ``name``: yields ``advance(n=1)``."""
        yield _ignore
