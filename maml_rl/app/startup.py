"""Ctrl-C while a script is still importing its modules (torch takes a second or more).

``run_script`` turns Ctrl-C into a clean exit once ``main()`` runs; before
that, Python would print a traceback through torch's imports. This module
imports nothing but the standard library, so that it is in place before them.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

__all__ = ["quiet_interrupt"]


@contextlib.contextmanager
def quiet_interrupt(script: str) -> Iterator[None]:
    """Around a script's imports: Ctrl-C exits with status 130 and one line, as it does once the script runs."""
    try:
        yield
    except KeyboardInterrupt:
        print(f"interrupted while {script} was starting; nothing was done", file=sys.stderr)
        sys.exit(130)
