"""Allocator tuning."""

import sys

from maml_rl.utils.memory import keep_freed_memory


def test_keep_freed_memory_applies_on_linux():
    assert keep_freed_memory() is sys.platform.startswith("linux")
