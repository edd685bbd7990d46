"""Allocator tuning for the meta-learner's large temporary tensors."""

from __future__ import annotations

import ctypes
import sys

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 2**20


def keep_freed_memory() -> bool:
    """Make glibc keep freed blocks of up to 32 MiB instead of returning them.

    Every conjugate-gradient iteration of the TRPO step allocates and frees
    the same tensors of a few MiB; by default glibc serves those with mmap
    and gives them back with munmap, so each iteration pays page faults on
    fresh memory. Keeping them cut the second-order step at the
    HalfCheetahVel default size from 4.4 s to 3.0 s
    (``benchmarks/maml_step_time.py``). The same as setting
    ``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296``.

    :returns: whether the setting was applied (glibc on Linux only).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
        )
    except (OSError, AttributeError):
        return False
