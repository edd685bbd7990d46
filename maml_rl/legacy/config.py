"""pytorch-maml-rl's ``config.json``: its YAML keys, plus its ``train.py``'s command-line arguments."""

from __future__ import annotations

from typing import Any, Mapping

from maml_rl.legacy.warn import warn_once

__all__ = ["REFERENCE_RUN_KEYS", "drop_reference_run_keys"]

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
