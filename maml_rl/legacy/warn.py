"""One deprecation warning per old name per process."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Mapping

__all__ = ["LegacyAPIWarning", "module_getattr", "warn_once", "warned_names"]


class LegacyAPIWarning(DeprecationWarning):
    """A name of pytorch-maml-rl's API was used; the message names its replacement."""


_warned: set[str] = set()
_lock = threading.Lock()


def warn_once(name: str, instead: str, *, stacklevel: int = 3, whose: str = "pytorch-maml-rl's API") -> None:
    """Warn that ``name`` is pytorch-maml-rl's, and what to write ``instead``, the first time only.

    :param whose: what the old name was (this package's earlier module paths say so).
    :param stacklevel: as :func:`warnings.warn`'s, counted from the caller of ``warn_once``
        (the default points at the caller's caller: the user's line).
    """
    with _lock:
        if name in _warned:
            return
        _warned.add(name)
    warnings.warn(f"{name}: {whose}, kept for old scripts; {instead} (docs/migrating.md)",
                  LegacyAPIWarning, stacklevel=stacklevel)


def warned_names() -> frozenset[str]:
    """The old names used so far in this process."""
    with _lock:
        return frozenset(_warned)


def module_getattr(module: str, moved: Mapping[str, tuple[Callable[[], Any], str]],
                   gone: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """The ``__getattr__`` of an old module path: moved names warn once, gone names say why.

    :param moved: name -> (function returning its value, what to write instead).
    :param gone: name -> why there is no counterpart here.
    """
    gone = gone or {}

    def __getattr__(name: str) -> Any:
        if name in moved:
            value, instead = moved[name]
            warn_once(f"{module}.{name}", instead)
            return value()
        if name in gone:
            # An ImportError keeps this message through ``from module import name``.
            raise ImportError(f"{module}.{name} (pytorch-maml-rl) is not provided by this package: {gone[name]} "
                              "(docs/migrating.md)")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
