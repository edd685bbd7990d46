"""Per-task replay of transitions, on the driver: what PEARL's SAC and its context encoder sample from.

One :class:`TaskReplay` per task, a ring of at most ``capacity`` transitions
that grows as it fills (a run that collects little holds little). Sampling
draws uniformly from what a task holds with a ``torch.Generator`` the caller
seeds, so a run's batches are a function of its seed; :meth:`MultiTaskReplay.state_dict`
holds every stored row and each ring's position, so that a resumed run
samples exactly what an uninterrupted one would.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
import torch

from maml_rl.data.transitions import Transitions

__all__ = ["ReplayMemoryError", "MultiTaskReplay", "TaskReplay", "available_memory_bytes"]

FIELDS = ("observations", "actions", "rewards", "next_observations", "terminated")
# A replay may fill at most this share of the memory available when it is made.
MAX_MEMORY_FRACTION = 0.5


class ReplayMemoryError(MemoryError):
    """The replay could not fit in memory at its capacity (raised before anything is allocated)."""


def available_memory_bytes() -> Optional[int]:
    """``MemAvailable`` of ``/proc/meminfo`` (Linux), else ``None`` (then nothing is checked)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class TaskReplay:
    """The transitions of one task, oldest overwritten first once ``capacity`` is reached."""

    def __init__(self, capacity: int, observation_shape: Sequence[int], action_shape: Sequence[int],
                 action_dtype: torch.dtype = torch.float32):
        self.capacity = int(capacity)
        self.observation_shape, self.action_shape = tuple(observation_shape), tuple(action_shape)
        self.action_dtype = action_dtype
        self.size = 0  # rows held
        self.position = 0  # the row the next transition goes to
        self.data: Dict[str, torch.Tensor] = self._empty(0)

    def _empty(self, rows: int) -> Dict[str, torch.Tensor]:
        return {"observations": torch.zeros((rows, *self.observation_shape)),
                "actions": torch.zeros((rows, *self.action_shape), dtype=self.action_dtype),
                "rewards": torch.zeros(rows),
                "next_observations": torch.zeros((rows, *self.observation_shape)),
                "terminated": torch.zeros(rows, dtype=torch.bool)}

    def _grow(self, rows: int) -> None:
        """Room for ``rows`` rows (at most ``capacity``): doubled, so that filling costs O(capacity)."""
        have = len(self.data["rewards"])
        if rows <= have:
            return
        new = min(self.capacity, max(rows, 2 * have, 1024))
        grown = self._empty(new)
        for name, value in self.data.items():
            grown[name][:have] = value
        self.data = grown

    def add(self, transitions: Transitions) -> None:
        """Append ``transitions`` in order (the oldest rows go once the ring is full)."""
        n = len(transitions)
        if n == 0:
            return
        if tuple(transitions.observations.shape[1:]) != self.observation_shape:
            raise ValueError(f"transitions of observation shape {tuple(transitions.observations.shape[1:])} for a "
                             f"replay of {self.observation_shape}")
        columns = {"observations": transitions.observations, "actions": transitions.actions,
                   "rewards": transitions.rewards, "next_observations": transitions.next_observations,
                   "terminated": transitions.terminated}
        if n >= self.capacity:  # only the newest capacity rows survive
            columns = {name: value[n - self.capacity:] for name, value in columns.items()}
            n = self.capacity
        self._grow(min(self.capacity, self.size + n))
        rows = (self.position + torch.arange(n)) % self.capacity
        for name, value in columns.items():
            self.data[name][rows] = value.detach().to("cpu", self.data[name].dtype)
        self.position = int((self.position + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)

    def clear(self) -> None:
        """Forget every transition (oyster clears a task's encoder replay before collecting it anew)."""
        self.size, self.position = 0, 0

    def sample(self, n: int, generator: torch.Generator) -> Dict[str, torch.Tensor]:
        """``n`` rows drawn uniformly with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay: collect transitions of this task first")
        rows = torch.randint(self.size, (int(n),), generator=generator)
        return {name: value[rows] for name, value in self.data.items()}

    def newest(self, n: int) -> Dict[str, torch.Tensor]:
        """The ``n`` most recent rows, oldest first (fewer when it holds fewer)."""
        n = min(int(n), self.size)
        rows = (self.position - n + torch.arange(n)) % self.capacity
        return {name: value[rows] for name, value in self.data.items()}

    def state_dict(self) -> dict:
        """The stored rows in ring order, the position and the size."""
        return {"size": self.size, "position": self.position,
                **{name: value[:self.size].clone() for name, value in self.data.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        size = int(state["size"])
        if size > self.capacity or not 0 <= int(state["position"]) < max(1, self.capacity):
            raise ValueError(f"a replay state of {size} rows at position {state['position']} does not fit "
                             f"capacity {self.capacity}")
        self.data = self._empty(0)
        self._grow(size)
        for name in FIELDS:
            value = state[name]
            if tuple(value.shape) != (size, *self.data[name].shape[1:]):
                raise ValueError(f"replay state {name!r} has shape {tuple(value.shape)}, expected "
                                 f"{(size, *self.data[name].shape[1:])}")
            self.data[name][:size] = value
        self.size, self.position = size, int(state["position"])


class MultiTaskReplay:
    """One :class:`TaskReplay` per task index, all of one capacity and shape.

    :param rows_per_task: the most rows a task will hold (default ``capacity``): what the memory check counts,
        for a run that knows it collects less than its capacity.
    :param check: refuse a replay that would not fit (off when restoring a state that already fitted).
    :raises ReplayMemoryError: when ``num_tasks`` replays of ``rows_per_task`` rows would take more than half
        the memory available now, before anything is allocated, saying how much and what to lower.
    """

    def __init__(self, num_tasks: int, capacity: int, observation_shape: Sequence[int],
                 action_shape: Sequence[int], action_dtype: torch.dtype = torch.float32, what: str = "replay",
                 rows_per_task: Optional[int] = None, check: bool = True):
        if num_tasks < 1 or capacity < 1:
            raise ValueError(f"a replay needs num_tasks >= 1 and capacity >= 1, got {num_tasks} and {capacity}")
        obs, act = math.prod(observation_shape), math.prod(action_shape)
        row_bytes = 4 * (2 * obs + 1) + act * torch.empty((), dtype=action_dtype).element_size() + 1
        rows = int(capacity) if rows_per_task is None else min(int(capacity), int(rows_per_task))
        self.full_bytes = int(num_tasks) * rows * row_bytes
        available = available_memory_bytes() if check else None
        if available is not None and self.full_bytes > MAX_MEMORY_FRACTION * available:
            fitting = int(MAX_MEMORY_FRACTION * available // (num_tasks * row_bytes))
            raise ReplayMemoryError(
                f"the {what} of {num_tasks} tasks x {rows:,} transitions ({row_bytes} bytes each) would take "
                f"{self.full_bytes / 2**30:.1f} GiB once full, more than half of the {available / 2**30:.1f} GiB "
                f"available: lower the capacity to at most {fitting:,} per task (config: replay-capacity) or "
                "train on fewer tasks")
        self.tasks: List[TaskReplay] = [TaskReplay(capacity, observation_shape, action_shape, action_dtype)
                                        for _ in range(int(num_tasks))]

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> TaskReplay:
        return self.tasks[index]

    def sizes(self) -> np.ndarray:
        return np.array([task.size for task in self.tasks])

    def sample(self, indices: Sequence[int], n: int, generator: torch.Generator) -> Dict[str, torch.Tensor]:
        """``n`` rows of each task in ``indices``, stacked ``[len(indices), n, ...]`` (tasks drawn in order)."""
        draws = [self.tasks[int(i)].sample(n, generator) for i in indices]
        return {name: torch.stack([d[name] for d in draws]) for name in FIELDS}

    def state_dict(self) -> dict:
        return {"tasks": [task.state_dict() for task in self.tasks]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if len(state["tasks"]) != len(self.tasks):
            raise ValueError(f"a replay state of {len(state['tasks'])} tasks for a replay of {len(self.tasks)}")
        for task, task_state in zip(self.tasks, state["tasks"]):
            task.load_state_dict(task_state)
