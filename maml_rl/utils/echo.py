"""How an error message shows a value it was given (a configuration's, an argument's): as ``repr`` does, clipped.

A value comes from a file or the command line and may be anything: a 900 KB string, a list nested
a thousand deep, a list whose aliases expand to billions of items. ``repr`` would build all of it
(minutes, gigabytes) to print a message nobody can read; :func:`echo` stops at a few levels, a few
items each and :data:`ECHO_LIMIT` characters, whatever the value holds.
"""

from __future__ import annotations

import itertools
import reprlib
from typing import Any

__all__ = ["ECHO_LIMIT", "echo"]

#: The most characters of a value an error message shows.
ECHO_LIMIT = 200

class _Clipped(reprlib.Repr):
    def repr_dict(self, x: dict, level: int) -> str:
        # In the mapping's own order, as repr shows it (reprlib sorts the keys).
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        pieces = [f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
                  for key, value in itertools.islice(x.items(), self.maxdict)]
        if len(x) > self.maxdict:
            pieces.append("...")
        return "{" + ", ".join(pieces) + "}"


_repr = _Clipped()
# Enough to show a config's lists and mappings whole (hidden-sizes, env-kwargs), and no more.
_repr.maxlevel = 4
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxfrozenset = _repr.maxdeque = 12
_repr.maxdict = 12
_repr.maxstring = _repr.maxother = ECHO_LIMIT
_repr.maxlong = 60


def echo(value: Any, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` for an error message: at most ``limit`` characters, ``...`` where it is cut;
    the time taken is bounded whatever ``value`` holds."""
    text = _repr.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
