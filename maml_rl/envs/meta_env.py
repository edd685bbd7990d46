"""Task protocol shared by all meta-learning environments.

A meta-learning environment is a family of MDPs indexed by a *task*, a small
dict of numpy arrays / floats.  Every environment of :mod:`maml_rl.envs`
exposes on its unwrapped instance

* ``sample_tasks(num_tasks) -> list[dict]``: draws tasks from the task
  distribution with the environment's own generator ``self.np_random``
  (seeded by ``env.reset(seed=...)``), so sampling is reproducible;
* ``reset_task(task)``: switches the environment to ``task``;
* ``get_task() -> dict``: a copy of the current task.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["MetaEnv", "check_meta_env", "validate_normalization_scale", "validate_task"]


def check_meta_env(env: Any) -> None:
    """``TypeError`` unless ``env.unwrapped`` has ``sample_tasks`` and ``reset_task``."""
    missing = [name for name in ("sample_tasks", "reset_task") if not hasattr(env.unwrapped, name)]
    if missing:
        raise TypeError(
            f"{env!r} is not a meta-learning environment: its unwrapped env lacks {', '.join(missing)}. "
            "Meta-learning envs define sample_tasks(num_tasks) -> list and reset_task(task)."
        )


def validate_normalization_scale(value: Any) -> float:
    """``value`` as a positive finite float; a ``ValueError`` naming the keyword otherwise."""
    scale = float(value)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"normalization_scale must be positive, got {value}.")
    return scale


def validate_task(
    task: Any,
    shapes: Mapping[str, tuple[int, ...]],
    env_name: str = "environment",
) -> dict[str, Any]:
    """Check ``task`` against ``shapes`` and return a normalised copy.

    ``shapes`` maps every expected key to the expected shape of its value
    (``()`` for a scalar).  Scalars are returned as ``float``, arrays as
    float64 numpy arrays (copies, so the caller's arrays are never aliased).

    Raises:
        ValueError: ``task`` is not a mapping, misses a key, has an unknown
            key, or a value has the wrong shape or is not finite.
    """
    expected = ", ".join(repr(key) for key in shapes)
    if not isinstance(task, Mapping):
        raise ValueError(
            f"A task for {env_name} must be a dict with keys {expected}, "
            f"got {type(task).__name__}."
        )
    missing = [key for key in shapes if key not in task]
    unknown = [key for key in task if key not in shapes]
    if missing or unknown:
        details = []
        if missing:
            details.append(f"missing {missing}")
        if unknown:
            details.append(f"unknown {unknown}")
        raise ValueError(
            f"A task for {env_name} must have exactly the keys {expected} "
            f"({'; '.join(details)})."
        )
    result: dict[str, Any] = {}
    for key, shape in shapes.items():
        try:
            value = np.array(task[key], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"Task key {key!r} of {env_name} must be numeric with shape "
                f"{shape} (expected keys: {expected})."
            ) from exc
        if value.shape != tuple(shape):
            raise ValueError(
                f"Task key {key!r} of {env_name} must have shape {tuple(shape)}, "
                f"got {value.shape} (expected keys: {expected})."
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"Task key {key!r} of {env_name} must be finite.")
        result[key] = float(value) if value.shape == () else value
    return result


class MetaEnv(ABC):
    """Mixin declaring the task protocol of a meta-learning environment.

    Subclasses define ``task_shapes()`` (the expected keys and shapes) and the
    three protocol methods; :meth:`validate_task` does the checking.
    """

    @abstractmethod
    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        """Expected task keys and the shape of each value."""

    def validate_task(self, task: Any) -> dict[str, Any]:
        """Return a normalised copy of ``task``; ``ValueError`` if malformed."""
        return validate_task(task, self.task_shapes(), type(self).__name__)

    @abstractmethod
    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        """Draw ``num_tasks`` tasks using ``self.np_random``."""

    @abstractmethod
    def reset_task(self, task: Mapping[str, Any]) -> None:
        """Switch the environment to ``task``."""

    @abstractmethod
    def get_task(self) -> dict[str, Any]:
        """Return a copy of the current task."""

    @staticmethod
    def _check_num_tasks(num_tasks: int) -> int:
        num_tasks = int(num_tasks)
        if num_tasks < 0:
            raise ValueError(f"num_tasks must be non-negative, got {num_tasks}.")
        return num_tasks
