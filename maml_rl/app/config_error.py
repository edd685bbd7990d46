"""The error of an invalid configuration, in a module of its own: the config loader, the env builder and the
run files raise it, and the loader imports the builder."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration (file, key, value or environment) is invalid."""
