"""Bookkeeping of a training run, around the loop of ``train.py``.

* :mod:`~maml_rl.app.runs.resume`: :func:`resolve_run_config` decides the
  configuration of a run (fresh or resumed) and checks it before anything is
  written;
* :mod:`~maml_rl.app.runs.checkpoints`: :func:`save_checkpoint` /
  :func:`load_checkpoint` write and restore the complete state of a run,
  atomically, so that a resumed run continues exactly;
* :mod:`~maml_rl.app.runs.metrics`: :class:`MetricsLogger` appends one JSON line
  per iteration to ``metrics.jsonl`` (and TensorBoard): the meta-learner's
  ``batch_stats`` of its batch, its update's logs and the times;
* :mod:`~maml_rl.app.runs.files`: the run's files, written atomically, and its
  output folder;
* :mod:`~maml_rl.app.runs.device`: :func:`resolve_device`.
"""

from maml_rl.app.runs.checkpoints import (
    RESUMABLE_CHANGES,
    Resumed,
    load_checkpoint,
    read_checkpoint,
    safe_load,
    save_checkpoint,
    seed_global_generators,
)
from maml_rl.app.runs.device import resolve_device
from maml_rl.app.runs.files import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    METRICS_FILE,
    POLICY_FILE,
    TENSORBOARD_DIR,
    atomic_save,
    atomic_write,
    atomic_write_json,
    check_writable,
    prepare_output_folder,
)
from maml_rl.app.runs.metrics import MetricsLogger, logged_rows
from maml_rl.app.runs.resume import resolve_run_config

__all__ = [
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "METRICS_FILE",
    "POLICY_FILE",
    "RESUMABLE_CHANGES",
    "Resumed",
    "TENSORBOARD_DIR",
    "MetricsLogger",
    "atomic_save",
    "atomic_write",
    "atomic_write_json",
    "check_writable",
    "load_checkpoint",
    "logged_rows",
    "prepare_output_folder",
    "read_checkpoint",
    "resolve_device",
    "resolve_run_config",
    "safe_load",
    "save_checkpoint",
    "seed_global_generators",
]
