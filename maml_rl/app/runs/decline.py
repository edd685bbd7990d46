"""Flag a training curve that gives back what it gained (a collapse the optimiser's own logs do not show).

MAML-TRPO's seed 1 on HalfCheetahDir rose to ~252 after adaptation and fell to
~190 over the next 60 iterations while every TRPO step was accepted at the KL
limit with its surrogate improving: nothing in the step's logs changed. What
does change is the return itself, so the run watches that: the mean of the last
``window`` iterations' return after adaptation, its best so far, and the share
of the run's gain (best minus the first window's mean) lost since the best.

Early in a run the gain can be smaller than the noise of a mean of ``window``
returns, and then any dip reads as a large share of it (ProMP at iteration 11:
"221% of the gain"). So the warning also asks that the gain and the loss each
be ``z`` standard errors: the standard deviation is pooled from the best window
and the current one, each about its own mean, so a steady trend inside a window
does not count as noise.
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = ["DeclineMonitor"]


class DeclineMonitor:
    """The moving mean of a return, its best, and the share of the gain lost since (``gain_lost``).

    :param window: iterations in the moving mean.
    :param alert: ``gain_lost`` at which :meth:`update` returns a warning (once, until it recovers below half).
    :param z: standard errors of a window mean that the gain and the loss must each reach before a warning.
    """

    def __init__(self, window: int = 10, alert: float = 0.25, z: float = 3.0) -> None:
        if window < 1 or not 0 < alert <= 1 or not z >= 0:
            raise ValueError(f"need window >= 1, 0 < alert <= 1 and z >= 0, got {window}, {alert}, {z}")
        self.window, self.alert, self.z = window, alert, z
        self.values: list[float] = []
        self.first: float | None = None
        self.best: float | None = None
        self.best_window: list[float] = []
        self.best_iteration = -1
        self.alerted = False  # a warning was given and the run has not recovered below alert / 2 since

    @classmethod
    def replay(cls, values: Iterable[float], **kwargs) -> "DeclineMonitor":
        """A monitor that has seen ``values`` (a resumed run's logged returns), warnings discarded."""
        monitor = cls(**kwargs)
        for value in values:
            monitor.update(value)
        return monitor

    def state_dict(self) -> dict:
        """Everything :meth:`update` depends on, for a checkpoint: a resumed run goes on exactly even when
        ``metrics.jsonl``, which :meth:`replay` reads, has lost rows."""
        return {"window": self.window, "alert": self.alert, "z": self.z, "values": list(self.values),
                "first": self.first, "best": self.best, "best_window": list(self.best_window),
                "best_iteration": self.best_iteration, "alerted": self.alerted}

    def load_state_dict(self, state: dict) -> None:
        self.window, self.alert, self.z = state["window"], state["alert"], state["z"]
        self.values, self.best_window = list(state["values"]), list(state["best_window"])
        self.first, self.best, self.best_iteration = state["first"], state["best"], state["best_iteration"]
        self.alerted = state["alerted"]

    def update(self, value: float) -> tuple[dict[str, float], str | None]:
        """Add one iteration's return; the metrics to log, and a warning when the run has just lost ``alert``."""
        self.values.append(float(value))
        recent = self.values[-self.window:]
        mean = sum(recent) / len(recent)
        iteration = len(self.values) - 1
        lost = 0.0
        if len(self.values) >= self.window:
            if self.first is None:
                self.first = mean
            if self.best is None or mean > self.best:
                self.best, self.best_iteration, self.best_window = mean, iteration, recent
            gain = self.best - self.first
            lost = (self.best - mean) / gain if gain > 0 else 0.0
        metrics = {f"return_after_mean{self.window}": mean, "gain_lost": lost}
        warning = None
        if lost >= self.alert and not self.alerted and self._beyond_noise(mean):
            self.alerted = True
            warning = (f"iteration {iteration}: the return after adaptation ({self.window}-iteration mean "
                       f"{mean:.2f}) has given back {lost:.0%} of the run's gain since its best, {self.best:.2f} at "
                       f"iteration {self.best_iteration}: a collapse? (metrics.jsonl: gain_lost)")
        elif lost < self.alert / 2:
            self.alerted = False
        return metrics, warning

    def _beyond_noise(self, mean: float) -> bool:
        """Whether the gain and the loss are each ``z`` standard errors of a window mean."""
        best, now = self.best_window, self.values[-self.window:]
        dof = len(best) + len(now) - 2
        if dof <= 0:  # window 1: no scatter to measure
            return True
        squares = sum((v - self.best) ** 2 for v in best) + sum((v - mean) ** 2 for v in now)
        error = math.sqrt(squares / dof / self.window)
        # The gain compares two window means, hence its sqrt(2).
        return self.best - self.first >= self.z * error * math.sqrt(2) and self.best - mean >= self.z * error
