"""Tasks and generators as tensors and plain data, so that a checkpoint holds them without pickling
objects (``safe_load`` reads tensors, numbers, strings and lists only)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["decode_task", "encode_task"]


def encode_task(task: Any) -> Any:
    """A task of numbers, strings, numpy arrays and dicts, lists or tuples of them, as plain data
    (arrays become ``{"__array__": tensor}``, numpy scalars Python numbers)."""
    if isinstance(task, dict):
        return {"__dict__": [[str(key), encode_task(value)] for key, value in task.items()]}
    if isinstance(task, (list, tuple)):
        return {"__tuple__" if isinstance(task, tuple) else "__list__": [encode_task(v) for v in task]}
    if isinstance(task, np.ndarray):
        return {"__array__": torch.from_numpy(np.ascontiguousarray(task)), "dtype": str(task.dtype)}
    if isinstance(task, np.generic):
        return task.item()
    if task is None or isinstance(task, (bool, int, float, str)):
        return task
    raise TypeError(f"PEARL keeps its training tasks in the checkpoint, which holds plain data only; a task holds "
                    f"a {type(task).__name__} ({task!r}): give the env tasks of numbers, arrays, strings, and "
                    "dicts or lists of them")


def decode_task(data: Any) -> Any:
    """The inverse of :func:`encode_task`."""
    if isinstance(data, dict):
        if "__dict__" in data:
            return {key: decode_task(value) for key, value in data["__dict__"]}
        if "__list__" in data:
            return [decode_task(v) for v in data["__list__"]]
        if "__tuple__" in data:
            return tuple(decode_task(v) for v in data["__tuple__"])
        if "__array__" in data:
            return data["__array__"].numpy().astype(data["dtype"])
    return data
