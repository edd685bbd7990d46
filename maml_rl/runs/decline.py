"""Flag a training curve that gives back what it gained (a collapse the optimiser's own logs do not show).

MAML-TRPO's seed 1 on HalfCheetahDir rose to ~252 after adaptation and fell to
~190 over the next 60 iterations while every TRPO step was accepted at the KL
limit with its surrogate improving: nothing in the step's logs changed. What
does change is the return itself, so the run watches that: the mean of the last
``window`` iterations' return after adaptation, its best so far, and the share
of the run's gain (best minus the first window's mean) lost since the best.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["DeclineMonitor"]


class DeclineMonitor:
    """The moving mean of a return, its best, and the share of the gain lost since (``gain_lost``).

    :param window: iterations in the moving mean.
    :param alert: ``gain_lost`` at which :meth:`update` returns a warning (once, until it recovers below half).
    """

    def __init__(self, window: int = 10, alert: float = 0.25) -> None:
        if window < 1 or not 0 < alert <= 1:
            raise ValueError(f"need window >= 1 and 0 < alert <= 1, got {window}, {alert}")
        self.window, self.alert = window, alert
        self.values: list[float] = []
        self.first: float | None = None
        self.best: float | None = None
        self.best_iteration = -1
        self.alerted = False

    @classmethod
    def replay(cls, values: Iterable[float], **kwargs) -> "DeclineMonitor":
        """A monitor that has seen ``values`` (a resumed run's logged returns), warnings discarded."""
        monitor = cls(**kwargs)
        for value in values:
            monitor.update(value)
        return monitor

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
                self.best, self.best_iteration = mean, iteration
            gain = self.best - self.first
            lost = (self.best - mean) / gain if gain > 0 else 0.0
        metrics = {f"return_after_mean{self.window}": mean, "gain_lost": lost}
        warning = None
        if lost >= self.alert and not self.alerted:
            self.alerted = True
            warning = (f"iteration {iteration}: the return after adaptation ({self.window}-iteration mean "
                       f"{mean:.2f}) has given back {lost:.0%} of the run's gain since its best, {self.best:.2f} at "
                       f"iteration {self.best_iteration}: a collapse? (metrics.jsonl: gain_lost)")
        elif lost < self.alert / 2:
            self.alerted = False
        return metrics, warning
