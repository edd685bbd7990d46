"""What a configuration key is (:class:`Hyperparameter`) and the checks of its values.

The declarations themselves are in :mod:`maml_rl.config.hyperparameters`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from maml_rl.utils.echo import echo

__all__ = ["BOOLEAN", "POSITIVE_INT", "REQUIRED", "Check", "Hyperparameter", "InvalidValue", "choice", "integer",
           "number", "optional"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The ``default`` of a key a configuration must give.
REQUIRED: Any = _Required()


class InvalidValue(Exception):
    """Raised by a :class:`Check` for a value it refuses; its message, if any, adds a detail."""


@dataclass(frozen=True)
class Check:
    """A key's validator: ``convert(value)`` returns the normalised value or raises :class:`InvalidValue`.

    :ivar expected: what a valid value is, for error messages and the key reference.
    """

    convert: Callable[[Any], Any]
    expected: str


@dataclass(frozen=True)
class Hyperparameter:
    """One configuration key.

    :ivar key: its name in configuration files (``fast-lr``).
    :ivar type: the Python type of its value, once checked.
    :ivar default: its value when left out, or :data:`REQUIRED`.
    :ivar check: validator and description of the accepted values.
    :ivar help: one line saying what it does.
    :ivar argument: the keyword of the meta-learners' constructors that takes it
        (``None``: the key is used by the training script, not the meta-learner).
    """

    key: str
    type: type
    default: Any
    check: Check
    help: str
    argument: str | None = None

    @property
    def attribute(self) -> str:
        """Its name as an attribute of :data:`DEFAULTS` (``fast-lr`` -> ``fast_lr``)."""
        return self.key.replace("-", "_")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def expected(self) -> str:
        return self.check.expected

    def default_value(self) -> Any:
        """The default, as a fresh copy when it is mutable."""
        if isinstance(self.default, Mapping):
            return dict(self.default)
        return list(self.default) if isinstance(self.default, list) else self.default


# -------------------------------------------------------------------- checks
def _is_int(value: Any) -> bool:
    """An int or a numpy integer (the Python API passes both), never a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def integer(minimum: int) -> Check:
    """An integer (not a bool) ``>= minimum``."""

    def convert(value: Any) -> int:
        if not _is_int(value) or value < minimum:
            raise InvalidValue
        return int(value)

    return Check(convert, f"an integer >= {minimum}")


def number(low: float | None = None, high: float | None = None, *, open_low: bool = False,
           open_high: bool = False) -> Check:
    """A finite number (an int is read as a float) in ``[low, high]``; ``open_low``/``open_high`` exclude the bound."""

    def convert(value: Any) -> float:
        if not (_is_int(value) or isinstance(value, float)):
            raise InvalidValue
        value = float(value)
        if not math.isfinite(value):
            raise InvalidValue
        if low is not None and (value < low or (open_low and value == low)):
            raise InvalidValue
        if high is not None and (value > high or (open_high and value == high)):
            raise InvalidValue
        return value

    if low is not None and high is not None:
        expected = f"a number in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
    elif low is not None:
        expected = f"a number {'>' if open_low else '>='} {low:g}"
    else:
        expected = "a number"
    return Check(convert, expected)


def optional(check: Check) -> Check:
    """``null``, or a value that ``check`` accepts."""

    def convert(value: Any) -> Any:
        return None if value is None else check.convert(value)

    return Check(convert, f"null or {check.expected}")


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidValue
    return value


def _env_kwargs(value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(name, str) for name in value):
        raise InvalidValue
    steps = value.get("max_episode_steps")
    if steps is not None and not (_is_int(steps) and steps >= 1):
        raise InvalidValue(f"max_episode_steps must be an integer >= 1 (or absent: the env's own limit), "
                           f"got {echo(steps)}")
    return dict(value)


#: More hidden layers than this is a mistake, not a network (and would take minutes to build).
MAX_HIDDEN_LAYERS = 100


def _hidden_sizes(value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(_is_int(size) and size >= 1 for size in value):
        raise InvalidValue
    if len(value) > MAX_HIDDEN_LAYERS:
        raise InvalidValue(f"{len(value)} layers; at most {MAX_HIDDEN_LAYERS}")
    return [int(size) for size in value]


def _nonlinearity(value: Any) -> str:
    from maml_rl.policies import get_nonlinearity

    if not isinstance(value, str):
        raise InvalidValue
    try:
        get_nonlinearity(value)
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidValue
    return value


def _seed(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value < 2**63:
        raise InvalidValue
    return int(value)


def choice(*values: str) -> Check:
    """One of the strings ``values``."""

    def convert(value: Any) -> str:
        if not isinstance(value, str) or value not in values:
            raise InvalidValue
        return value

    return Check(convert, " or ".join(f'"{value}"' for value in values))


BOOLEAN = Check(_boolean, "true or false")
POSITIVE_INT = integer(1)
