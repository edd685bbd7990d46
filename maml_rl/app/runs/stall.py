"""Flag a run whose meta-updates have stopped moving the policy.

ProMP with ``outer-kl-limit`` and no ``outer-kl-backtracks`` undoes a step that
goes past the limit together with Adam's moments, so the next iteration tries
the same step again: a HalfCheetahDir run took no step in its last 213
iterations while its return, logged as usual, looked like a plateau. The run
watches the logged ``outer_steps`` and says so after ``window`` iterations in a
row without one.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["StallMonitor"]


class StallMonitor:
    """Counts iterations in a row whose update took no step (``outer_steps == 0``).

    :param window: iterations in a row after which :meth:`update` returns a warning (once per streak).
    """

    def __init__(self, window: int = 10) -> None:
        if window < 1:
            raise ValueError(f"need window >= 1, got {window}")
        self.window = window
        self.streak = 0

    @classmethod
    def replay(cls, logs: Iterable[dict], **kwargs) -> "StallMonitor":
        """A monitor that has seen a resumed run's logged rows, warnings discarded."""
        monitor = cls(**kwargs)
        for row in logs:
            monitor.update(row)
        return monitor

    def state_dict(self) -> dict:
        """What :meth:`update` depends on, for a checkpoint (see :meth:`DeclineMonitor.state_dict`)."""
        return {"window": self.window, "streak": self.streak}

    def load_state_dict(self, state: dict) -> None:
        self.window, self.streak = state["window"], state["streak"]

    def update(self, logs: dict) -> str | None:
        """Add one iteration's logs; a warning when the streak of updates without a step reaches ``window``."""
        if logs.get("outer_steps") != 0:  # a step was taken, or the algorithm does not log its steps
            self.streak = 0
            return None
        self.streak += 1
        if self.streak != self.window:
            return None
        return (f"the last {self.window} updates took no step (outer_steps 0): each first Adam step went past "
                "outer-kl-limit and was undone with its moments, so the same step comes back every iteration "
                "and the policy no longer changes. Continue with --set outer-kl-backtracks=10 (halve such a step "
                "until it is within the limit) or a larger outer-kl-limit")
