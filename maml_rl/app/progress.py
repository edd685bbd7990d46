"""What train.py prints besides its iteration bar: a line per long phase inside an iteration, the run's seed
and budget at start, and where its files are and what to run next at its end."""

from __future__ import annotations

import shlex
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from tqdm import tqdm

from maml_rl.utils.progress import Advance, Progress

__all__ = ["PHASE_DELAY", "PhaseBar", "budget_line", "finished_line"]

#: Seconds a phase runs before its line appears: shorter phases (most of them on small configs) show nothing.
PHASE_DELAY = 3.0


class PhaseBar(Progress):
    """Each phase a learner reports, as a second progress line under the iteration bar, with its ETA; the
    line disappears when the phase ends."""

    def __init__(self, file: Any = None, delay: float | None = None, position: int = 1):
        # position 1: under train.py's iteration bar; 0 where there is none (report.py).
        self.file, self.delay, self.position = file, delay, position

    @contextmanager
    def phase(self, name: str, total: int, unit: str = "step") -> Iterator[Advance]:
        delay = PHASE_DELAY if self.delay is None else self.delay
        with tqdm(total=total, desc=f"  {name}", unit=unit, position=self.position, leave=False, delay=delay,
                  dynamic_ncols=True, unit_scale=total >= 10_000, file=self.file or sys.stderr) as bar:
            yield lambda n=1: bar.update(n)


def _count(n: int) -> str:
    return f"{n / 1e6:.3g}M" if n >= 1_000_000 else f"{n:,}"


def budget_line(config: Mapping[str, Any], learner: Any, horizon: int, start: int) -> str:
    """The run's seed and budget: iterations and env steps (about: episodes may end early)."""
    num_batches = config["num-batches"]
    per_iteration, once = learner.env_steps_per_iteration(config, horizon)
    total = num_batches * per_iteration + once
    first = f", {_count(once)} collected before the first" if once else ""
    done = f"; {start} done" if start else ""
    iterations = "1 iteration" if num_batches == 1 else f"{num_batches} iterations"
    return (f"seed {config['seed']}, {iterations} of about {_count(per_iteration)} env steps "
            f"({_count(total)} in all{first}){done}")


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cost_line(iteration: int, sampling: float, update: float, remaining: int) -> str:
    """What the first iteration of this process cost, and what the rest of the run takes at that rate (the
    first of a run also builds the workers and pays one-off costs, so the estimate errs long)."""
    spent = sampling + update
    rest = f"; the {remaining} left take about {_duration(remaining * spent)} at this rate" if remaining else ""
    return (f"iteration {iteration} took {_duration(spent)} (sampling {_duration(sampling)}, update "
            f"{_duration(update)}){rest}")


def finished_line(output: Path, config: Mapping[str, Any]) -> str:
    """Where the run's files are, and the command that evaluates its policy."""
    command = shlex.join(["python", "test.py", "--config", str(output / "config.json"),
                          "--policy", str(output / "policy.th"), "--output", str(output / "results.npz")])
    return (f"{output}: all {config['num-batches']} iterations done; config.json, policy.th, checkpoint.pt and "
            f"metrics.jsonl are there. Evaluate the policy on new tasks:\n  {command}")
