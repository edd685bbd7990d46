"""Flag a run whose meta-updates have stopped moving the policy.

An update may leave the policy where it was (a step past a KL limit, undone),
and a run can go on so for hundreds of iterations while its return, logged as
usual, looks like a plateau. The learner says which logged updates took no
step (:meth:`MetaLearner.took_no_step <maml_rl.metalearners.base.MetaLearner.took_no_step>`)
and what to do about it (its ``stall_advice``); the monitor counts them and
says so after ``window`` iterations in a row.
"""

from __future__ import annotations

from typing import Callable, Iterable

__all__ = ["StallMonitor"]


class StallMonitor:
    """Counts iterations in a row whose update took no step.

    :param window: iterations in a row after which :meth:`update` returns a warning (once per streak).
    :param took_no_step: whether one iteration's logs say its update left the policy unchanged (the
        learner's :meth:`~maml_rl.metalearners.base.MetaLearner.took_no_step`; by default never).
    :param advice: what the warning adds after saying so: why, and what to change.
    """

    def __init__(self, window: int = 10, took_no_step: Callable[[dict], bool] = lambda logs: False,
                 advice: str = "") -> None:
        if window < 1:
            raise ValueError(f"need window >= 1, got {window}")
        self.window = window
        self.took_no_step = took_no_step
        self.advice = advice
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
        if not self.took_no_step(logs):
            self.streak = 0
            return None
        self.streak += 1
        if self.streak != self.window:
            return None
        return f"the last {self.window} updates took no step" + (f": {self.advice}" if self.advice else "")
