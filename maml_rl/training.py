"""Bookkeeping of a training run: output folder, checkpoints, metrics, devices.

The training loop itself lives in ``train.py``; this module holds what the
loop needs around it:

* :func:`resolve_run_config` decides the configuration of a run (fresh or
  resumed) and checks it before anything is written;
* :func:`save_checkpoint` / :func:`load_checkpoint` write and restore the
  complete state of a run (policy, baseline, sampler, random generators,
  counters), atomically, so that a resumed run continues exactly;
* :class:`MetricsLogger` appends one JSON line per iteration to
  ``metrics.jsonl`` and, when tensorboard is installed, the same scalars to
  TensorBoard;
* :func:`episode_stats` reduces sampled episodes to returns and step counts.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from maml_rl.config import ConfigError, apply_overrides, config_diff, load_config, validate_config

__all__ = [
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "METRICS_FILE",
    "POLICY_FILE",
    "MetricsLogger",
    "atomic_save",
    "atomic_write",
    "atomic_write_json",
    "check_writable",
    "episode_stats",
    "load_checkpoint",
    "carries_success",
    "mean_returns",
    "prepare_output_folder",
    "read_checkpoint",
    "safe_load",
    "resolve_device",
    "resolve_run_config",
    "save_checkpoint",
    "success_rates",
]

CONFIG_FILE = "config.json"
POLICY_FILE = "policy.th"
CHECKPOINT_FILE = "checkpoint.pt"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"

CHECKPOINT_VERSION = 1

# Keys a resumed run may change: the run is simply made longer (or shorter).
RESUMABLE_CHANGES = ("num-batches",)


# --------------------------------------------------------------------- files
def atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file in the same folder and ``os.replace``.

    A reader (or a run killed at any moment) sees the old file or the new one,
    never a partial one.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def check_writable(path: str | Path, what: str, *, folder: bool) -> None:
    """Raise :class:`ConfigError` unless ``path`` can be written, before any work is done.

    Nothing is created: the nearest existing ancestor must be a folder this
    process may write into (``os.access``, which also sees read-only mounts).

    :param what: the option that named the path, for the message.
    :param folder: ``path`` is a folder to write files into (else a file to write).
    """
    path = Path(path)
    if path.exists():
        if folder and not path.is_dir():
            raise ConfigError(f"{what} {path} is a file, not a folder: choose another path")
        if not folder and path.is_dir():
            raise ConfigError(f"{what} {path} is a folder: give a file name, e.g. {path / 'results.npz'}")
    existing = path if folder and path.is_dir() else path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{what} {path}: {existing} is a file, so the folder cannot be created; choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: cannot write into {existing} (permission denied or read-only); "
                          "choose a writable location")


def prepare_output_folder(folder: str | Path, *, fresh: bool) -> Path:
    """Create the run's folder and remove what a killed run may have left behind.

    :param fresh: the run starts from scratch: an old checkpoint is removed, so
        that a run stopped before its first checkpoint is not resumed from it.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG_FILE, POLICY_FILE, CHECKPOINT_FILE, METRICS_FILE):
        for temporary in folder.glob(f".{name}.*.tmp"):
            temporary.unlink(missing_ok=True)
    if fresh:
        (folder / CHECKPOINT_FILE).unlink(missing_ok=True)
    return folder


def atomic_save(obj: Any, path: str | Path) -> None:
    """``torch.save(obj, path)``, atomically."""
    atomic_write(Path(path), lambda f: torch.save(obj, f))


def atomic_write_json(obj: Any, path: str | Path) -> None:
    """Write ``obj`` as indented JSON to ``path``, atomically."""
    text = json.dumps(obj, indent=2) + "\n"
    atomic_write(Path(path), lambda f: f.write(text.encode()))


# -------------------------------------------------------------------- device
def resolve_device(name: str) -> torch.device:
    """``torch.device(name)``, refusing CUDA devices that are not available.

    :raises ConfigError: for an unknown device name or an unavailable CUDA device.
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"--device {name!r} is not a device: {exc}; use cpu or cuda") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            reason = (
                "this torch build has no CUDA support" if torch.version.cuda is None else "no CUDA device is visible"
            )
            raise ConfigError(f"--device {name!r} was requested but CUDA is not available ({reason}); use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"--device {name!r}: there are only {torch.cuda.device_count()} CUDA device(s) "
                f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})"
            )
    elif device.type != "cpu":
        raise ConfigError(f"--device {name!r} is not supported; use cpu or cuda")
    return device


# -------------------------------------------------------------------- config
def resolve_run_config(
    output_folder: str | Path,
    config_path: str | Path | None,
    overrides: Sequence[tuple[str, Any]] = (),
    *,
    default_config: str | Path,
    seed: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
) -> tuple[dict, bool]:
    """The configuration of a run, checked before anything is written.

    A fresh run reads ``config_path`` (``default_config`` when ``None``), applies
    ``overrides`` and ``seed``, and draws a seed if there is none. It refuses an
    output folder that already holds a checkpoint, unless ``overwrite``.

    A resumed run reads the ``config.json`` of ``output_folder`` (or, when it
    is missing, the configuration saved in its checkpoint). Only
    ``num-batches`` may be changed, through ``overrides`` or a ``config_path``
    that differs in nothing else; a ``seed`` or any other difference from the
    saved run is an error. ``resume`` on a folder with no run yet starts one.

    :return: the configuration and whether there is a checkpoint to resume from
        (a run stopped before its first checkpoint starts again from the beginning).
    :raises ConfigError: with a message saying what is wrong and what to do.
    """
    folder = Path(output_folder)
    checkpoint = folder / CHECKPOINT_FILE
    saved_path = folder / CONFIG_FILE
    if resume and not saved_path.exists() and not checkpoint.exists():
        # Nothing to resume yet: the same command starts the run, then continues it.
        resume = False
    if not resume:
        if checkpoint.exists() and not overwrite:
            raise ConfigError(
                f"{folder} already holds a training run ({CHECKPOINT_FILE}); pass --resume to continue it, "
                "--overwrite to start it again, or choose another --output-folder"
            )
        path = default_config if config_path is None else config_path
        config = load_config(path, overrides=[*overrides, *([("seed", seed)] if seed is not None else [])])
        if config["seed"] is None:
            config["seed"] = int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
        return config, False

    if saved_path.exists():
        saved = load_config(saved_path)
    else:
        # Killed between the two writes, or config.json lost: the checkpoint holds the configuration too.
        saved = validate_config(read_checkpoint(checkpoint)["config"], source=str(checkpoint))
    if config_path is not None:
        given = load_config(config_path)
        differences = config_diff(saved, given, ignore=("seed", *RESUMABLE_CHANGES))
        if differences:
            raise ConfigError(
                f"--resume: {config_path} differs from the run's configuration ({saved_path}):\n  "
                + "\n  ".join(differences)
                + "\nresume without --config (the run's own configuration is used)"
            )
        if given["seed"] is not None and given["seed"] != saved["seed"]:
            raise ConfigError(
                f"--resume: {config_path} sets seed {given['seed']}, the run's seed is {saved['seed']}: "
                "a resumed run keeps its seed (start a new run in another --output-folder for another seed)"
            )
        # What the given file may change is taken from it, not ignored; explicit overrides still win.
        overrides = [(key, given[key]) for key in RESUMABLE_CHANGES if given[key] != saved[key]] + list(overrides)
    if seed is not None and seed != saved["seed"]:
        raise ConfigError(f"--resume: --seed {seed} differs from the run's seed {saved['seed']}")
    config = validate_config(apply_overrides(saved, overrides), source="the overrides")
    differences = config_diff(saved, config, ignore=RESUMABLE_CHANGES)
    if differences:
        raise ConfigError(
            "--resume: only " + ", ".join(RESUMABLE_CHANGES) + " may change when resuming, not:\n  "
            + "\n  ".join(differences)
        )
    return config, checkpoint.exists()


# ---------------------------------------------------------------- checkpoint
def _rng_state() -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _cpu_state_dict(module: torch.nn.Module) -> dict:
    return {name: tensor.detach().cpu().clone() for name, tensor in module.state_dict().items()}


def save_checkpoint(
    path: str | Path,
    *,
    iteration: int,
    config: Mapping[str, Any],
    policy: torch.nn.Module,
    baseline: torch.nn.Module,
    sampler: Any,
    counters: Mapping[str, Any],
) -> None:
    """Write, atomically, everything a resumed run needs to continue exactly.

    :param iteration: number of completed iterations (the next one to run).
    :param counters: running totals to carry over (e.g. the number of env steps).
    """
    atomic_save(
        {
            "version": CHECKPOINT_VERSION,
            "iteration": int(iteration),
            "config": dict(config),
            "policy": _cpu_state_dict(policy),
            "baseline": _cpu_state_dict(baseline),
            "sampler": sampler.state_dict(),
            "rng": _rng_state(),
            "counters": dict(counters),
        },
        path,
    )


def _numpy_array_globals() -> list:
    """What unpickling a numeric numpy array needs (the generators' states hold some), and nothing else."""
    core = getattr(np, "_core", None) or np.core
    dtypes = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.float32, np.float64]
    return [core.multiarray._reconstruct, np.ndarray, np.dtype, *(type(np.dtype(t)) for t in dtypes)]


def safe_load(path: str | Path, remedy: str) -> Any:
    """``torch.load`` that cannot run code: tensors, plain Python data and numeric numpy arrays only.

    Read with ``weights_only=True`` and an explicit allow-list of numeric numpy
    arrays (the generators' states hold some): a file asking for anything else
    (a crafted ``__reduce__``, say) is refused before any of it runs.

    :param remedy: what the user can do, appended to the error messages.
    :raises ConfigError: the file is missing, damaged or refused.
    """
    path = Path(path)
    try:
        with torch.serialization.safe_globals(_numpy_array_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist") from None
    except pickle.UnpicklingError as exc:
        if "Weights only load failed" in str(exc):
            unsupported = next((line.strip() for line in str(exc).splitlines() if "Unsupported" in line), "")
            raise ConfigError(
                f"{path} was refused: it asks to run code or build objects that maml_rl's files never hold "
                f"({unsupported or 'see torch.load weights_only'}), so it was not written by maml_rl or was "
                f"altered; nothing in it was run. {remedy}"
            ) from None
        raise ConfigError(f"{path} is damaged ({type(exc).__name__}: {exc}). {remedy}") from None
    except Exception as exc:  # torch reports truncation, garbage and empty files in many ways
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if path.stat().st_size == 0:
            detail = "the file is empty"
        raise ConfigError(f"{path} is damaged or not a file torch.save wrote ({detail}). {remedy}") from None


def read_checkpoint(path: str | Path) -> dict:
    """The contents of a checkpoint written by :func:`save_checkpoint`, read with :func:`safe_load`.

    :raises ConfigError: the file is missing, damaged, refused or not a checkpoint,
        with what to do about it.
    """
    path = Path(path)
    remedy = (f"Restore a good copy of it, or start the run again from scratch with --overwrite "
              f"(which discards {path.name}).")
    state = safe_load(path, remedy)
    keys = ("version", "iteration", "config", "policy", "baseline", "sampler", "rng", "counters")
    if not isinstance(state, dict) or any(key not in state for key in keys):
        raise ConfigError(f"{path} is not a maml_rl training checkpoint (it lacks {', '.join(keys)}). {remedy}")
    if state["version"] != CHECKPOINT_VERSION:
        raise ConfigError(f"{path}: unsupported checkpoint version {state['version']!r}. {remedy}")
    return state


def load_checkpoint(
    path: str | Path,
    *,
    config: Mapping[str, Any],
    policy: torch.nn.Module,
    baseline: torch.nn.Module,
    sampler: Any,
) -> tuple[int, dict]:
    """Restore the state saved by :func:`save_checkpoint` into the given objects.

    Restores the random generators too, so call it last, just before the loop.

    :return: the number of completed iterations and the saved counters.
    :raises ConfigError: the checkpoint belongs to another configuration.
    """
    state = read_checkpoint(path)
    # Resolved again so that a key added since (with its default) is not a change.
    saved = validate_config(state["config"], source=str(path))
    differences = config_diff(saved, config, ignore=RESUMABLE_CHANGES)
    if differences:
        raise ConfigError(f"{path} was written with another configuration:\n  " + "\n  ".join(differences))
    policy.load_state_dict(state["policy"])
    baseline.load_state_dict(state["baseline"])
    sampler.load_state_dict(state["sampler"])
    _set_rng_state(state["rng"])
    return int(state["iteration"]), dict(state["counters"])


# ------------------------------------------------------------------- metrics
def mean_returns(episodes: Iterable[Any]) -> np.ndarray:
    """``[num_tasks, batch_size]`` undiscounted returns of each task's episodes."""
    return np.stack([batch.total_rewards.detach().cpu().numpy() for batch in episodes])


def success_rates(episodes: Iterable[Any]) -> np.ndarray:
    """``[num_tasks, batch_size]`` 1.0 where the episode succeeded (``info["success"]`` at some step), else 0.0."""
    return np.stack([batch.success().cpu().numpy().astype(np.float64) for batch in episodes])


def carries_success(episodes: Sequence[Any]) -> bool:
    """Whether the episodes carry the env's ``success`` info (Meta-World's envs do)."""
    return bool(episodes) and all("success" in getattr(batch, "infos", {}) for batch in episodes)


def episode_stats(train_episodes: Sequence[Sequence[Any]], valid_episodes: Sequence[Any]) -> dict[str, float]:
    """Returns before adaptation (``train_episodes[0]``) and after (``valid_episodes``), and env steps.

    :return: ``return_before``, ``return_after`` (means over every episode of
        every task), ``env_steps`` (steps taken in all the batches) and, for
        episodes that carry ``success`` (see ``MultiTaskSampler(info_keys=)``),
        ``success_before`` and ``success_after``: the fraction of episodes
        that succeeded at some step, over every episode of every task.
    """
    all_batches = [batch for step in train_episodes for batch in step] + list(valid_episodes)
    before = train_episodes[0] if train_episodes else valid_episodes
    stats = {
        "return_before": float(mean_returns(before).mean()),
        "return_after": float(mean_returns(valid_episodes).mean()),
        "env_steps": int(sum(int(batch.lengths.sum()) for batch in all_batches)),
    }
    if carries_success(before) and carries_success(valid_episodes):
        stats["success_before"] = float(success_rates(before).mean())
        stats["success_after"] = float(success_rates(valid_episodes).mean())
    return stats


def _json_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value.item() if value.numel() == 1 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


_TB_GROUPS = ("return", "loss", "kl", "time")


class MetricsLogger:
    """Per-iteration metrics to ``metrics.jsonl`` and, if available, TensorBoard.

    On a resumed run, lines of iterations at or after ``start_iteration`` (an
    iteration done again after the restart) and any partial last line are
    dropped first, so the file ends up with one line per iteration.

    :param folder: the run's output folder.
    :param start_iteration: first iteration this process will log.
    :param tensorboard: also write TensorBoard events (``folder/tensorboard``)
        when ``torch.utils.tensorboard`` and tensorboard can be imported.
    """

    def __init__(self, folder: str | Path, start_iteration: int = 0, tensorboard: bool = True) -> None:
        self.path = Path(folder) / METRICS_FILE
        self._truncate(start_iteration)
        self._file = open(self.path, "a")
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                pass
            else:
                # Events at or after start_iteration (from before a restart) are discarded.
                self.writer = SummaryWriter(str(Path(folder) / TENSORBOARD_DIR), purge_step=start_iteration)

    def _truncate(self, start_iteration: int) -> None:
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short when the run was killed
            if isinstance(record, dict) and record.get("iteration", start_iteration) < start_iteration:
                kept.append(line + "\n")
        atomic_write(self.path, lambda f: f.write("".join(kept).encode()))

    def log(self, metrics: Mapping[str, Any]) -> None:
        """Append one iteration's metrics (``metrics["iteration"]`` is the step)."""
        record = {key: _json_value(value) for key, value in metrics.items()}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        if self.writer is not None:
            step = int(record["iteration"])
            for key, value in record.items():
                if key == "iteration" or not isinstance(value, (int, float)):
                    continue  # bools are ints: logged as 0/1
                group, _, rest = key.partition("_")
                tag = f"{group}/{rest}" if group in _TB_GROUPS and rest else key
                self.writer.add_scalar(tag, float(value), step)
            self.writer.flush()

    def close(self) -> None:
        self._file.close()
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> "MetricsLogger":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

