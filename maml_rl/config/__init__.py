"""Configuration: every key declared once (:mod:`.hyperparameters`, which every
layer reads its defaults from) and config files read, checked against the
table and each meta-learner's keys (:mod:`.loading`).

``python -m maml_rl.app.config_files --markdown`` prints the key reference of docs/training.md.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``maml_rl.config.load_config`` and the other names of the earlier ``maml_rl/config.py`` (now
    :mod:`maml_rl.app.config_files`), with a warning; loaded only when asked for, so that reading the
    key table does not load the config files' code."""
    import importlib

    from maml_rl.legacy.moved import EARLIER
    from maml_rl.legacy.warn import warn_once

    loading = importlib.import_module("maml_rl.app.config_files")  # not `from . import`: that asks this function
    if name in loading.__all__:
        warn_once(f"maml_rl.config.{name}", f"it moved to maml_rl.app.config_files.{name}: import it from there",
                  whose=EARLIER)
        return getattr(loading, name)
    raise AttributeError(f"module 'maml_rl.config' has no attribute {name!r}")
