"""Old names of the configuration: pytorch-maml-rl's ``config.json``, and ``maml_rl.config``'s earlier names.

- pytorch-maml-rl's ``config.json`` holds its YAML keys plus its ``train.py``'s
  command-line arguments: :func:`adapt_loading` adds :func:`drop_reference_run_keys`
  to ``maml_rl.app.config_files.FILE_ADAPTERS``, so that its run folders load here.
- ``maml_rl.config.load_config`` and the other names of the earlier
  ``maml_rl/config.py`` (now :mod:`maml_rl.app.config_files`): :func:`adapt_package`
  gives the package ``maml_rl.config`` a ``__getattr__`` that resolves them with a warning.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Mapping

from maml_rl.legacy.moved import EARLIER
from maml_rl.legacy.warn import warn_once

__all__ = ["REFERENCE_RUN_KEYS", "adapt_loading", "adapt_package", "drop_reference_run_keys"]

#: The arguments the reference's train.py wrote into config.json (``config.update(vars(args))``), besides ``seed``.
REFERENCE_RUN_KEYS = ("config", "output_folder", "num_workers", "use_cuda", "device")


def drop_reference_run_keys(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``raw`` without the reference's run arguments (warning once), so that its run folders load here."""
    found = [key for key in REFERENCE_RUN_KEYS if key in raw]
    if not found:
        return raw
    warn_once("config.json keys of pytorch-maml-rl's train.py",
              f"{', '.join(found)} were its command-line arguments and are ignored here: give --output-folder, "
              "--num-workers, --device on the command line", stacklevel=2)
    return {key: value for key, value in raw.items() if key not in REFERENCE_RUN_KEYS}


def adapt_loading(loading: ModuleType) -> None:
    """Have ``load_config`` read the reference's ``config.json``."""
    if drop_reference_run_keys not in loading.FILE_ADAPTERS:
        loading.FILE_ADAPTERS.append(drop_reference_run_keys)


def _config_getattr(name: str) -> Any:
    """``maml_rl.config.load_config`` and the other names of :mod:`maml_rl.app.config_files`, with a warning;
    that module is loaded only when one is asked for, so that reading the key table does not load it."""
    loading = importlib.import_module("maml_rl.app.config_files")  # not `from . import`: that asks this function
    if name in loading.__all__:
        warn_once(f"maml_rl.config.{name}", f"it moved to maml_rl.app.config_files.{name}: import it from there",
                  whose=EARLIER)
        return getattr(loading, name)
    raise AttributeError(f"module 'maml_rl.config' has no attribute {name!r}")


def adapt_package(config: ModuleType) -> None:
    """Resolve the earlier ``maml_rl.config``'s names on the package."""
    config.__getattr__ = _config_getattr
