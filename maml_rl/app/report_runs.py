"""The run folders report.py reads: each run once, its files checked, its evaluation told.

A run folder (``train.py --output-folder``) holds ``config.json``,
``metrics.jsonl``, ``policy.th`` and, once test.py has evaluated it,
``results.npz``. Every file is read without unpickling, and a missing or
damaged one is a :class:`ReportError` that names it, says what is wrong and
what to do. A run reached twice (a folder of runs and one of its runs, a
symbolic link) counts once; two folders that hold the same run (a copy) are
refused, since the copy would count its seed twice. The evaluation's record
(:mod:`maml_rl.app.results`) comes with the run, and results older than the
policy they stand for are told in :attr:`Run.stale`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from maml_rl.app.plotting import load_metrics
from maml_rl.app.results import file_sha256, read_record

__all__ = ["ReportError", "Run", "distinct_runs", "find_run_folders", "load_run", "with_defaults"]


# The files of a run folder besides config.json.
RUN_FILES = ("metrics.jsonl", "policy.th", "checkpoint.pt", "results.npz")


class ReportError(ValueError):
    """A run folder cannot be reported: the message says which file and what to do."""


@dataclass
class Run:
    """One training run and its evaluation."""

    folder: Path
    env: str
    algorithm: str
    seed: int | None
    after: float  # held-out mean return after adaptation
    before: float  # held-out mean return before adaptation (the first row of test.py's results)
    success_after: float | None
    env_steps: np.ndarray  # [iterations] cumulative env steps of training
    curve: np.ndarray  # [iterations] return after adaptation on the training tasks
    config: dict[str, Any] = field(default_factory=dict)  # config.json with the algorithm's defaults filled in
    evaluation: dict[str, Any] | None = None  # how test.py evaluated (maml_rl.app.results); None: not recorded
    stale: str | None = None  # why results.npz no longer stands for the run's policy, if it does not
    identity: str = ""  # sha256 of config.json, policy.th and the results' name: the same run, wherever it lies
    # Held-out mean return and success at each of test.py's stages, averaged over tasks (a trial learner's stages
    # are its attempts, then the evaluation episodes; MAML's its gradient steps); None: not in results.npz.
    returns_by_stage: np.ndarray | None = None
    success_by_stage: np.ndarray | None = None


def find_run_folders(paths: Sequence[str | Path]) -> list[Path]:
    """The run folders among ``paths`` (each a run folder or a folder of them), each once.

    A folder reached twice (given with its parent, or through a symbolic link)
    counts once, with a note on stderr.
    """
    folders: dict[Path, Path] = {}  # resolved -> as first given
    for name in paths:
        path = Path(name)
        if (path / "config.json").is_file():
            found = [path]
        else:
            found = sorted(p.parent for p in path.glob("*/config.json"))
            # A run that lost its config.json, given or among those given: skipping it would leave its seed
            # out of the figures.
            for folder in [path, *sorted(p for p in path.glob("*/") if not (p / "config.json").exists())]:
                held = [name for name in RUN_FILES if (folder / name).exists()]
                if held:
                    raise ReportError(f"{folder}: holds a run's {held[0]} but no config.json, so its seed would be "
                                      f"left out of the figures; restore it (python train.py --output-folder {folder} "
                                      "--resume rewrites it from checkpoint.pt), or move the folder away")
            if not found:
                raise ReportError(f"{path}: neither a run folder (no config.json) nor a folder of run folders")
        for folder in found:
            real = folder.resolve()
            if real in folders:
                print(f"note: {folder} is the run {folders[real]} reached again: counted once", file=sys.stderr)
                continue
            folders[real] = folder
    return list(folders.values())


def distinct_runs(runs: Sequence[Run]) -> list[Run]:
    """``runs``, refusing two folders that hold the same run (a copied seed folder would count twice)."""
    seen: dict[str, Run] = {}
    for run in runs:
        if run.identity in seen:
            raise ReportError(
                f"{seen[run.identity].folder} and {run.folder} hold the same run (the same config.json and "
                f"policy.th, seed {run.seed}): one is a copy of the other, and would count that seed twice. "
                "Give only one of them (or move the copy out of the folders you report)"
            )
        seen[run.identity] = run
    return list(runs)


def _damaged(path: Path, what: str, remedy: str) -> ReportError:
    return ReportError(f"{path}: {what}; {remedy}")


def _read_config(path: Path) -> dict:
    remedy = "restore the run's config.json (train.py writes it; its checkpoint.pt holds a copy)"
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _damaged(path, f"not valid JSON ({exc})", remedy) from None
    if not isinstance(config, dict):
        raise _damaged(path, f"holds a JSON {type(config).__name__}, not a configuration", remedy)
    if not isinstance(config.get("env-name"), str):
        raise _damaged(path, "has no env-name, so it is not the config.json of a training run", remedy)
    return config


def _read_curve(path: Path) -> tuple[np.ndarray, np.ndarray]:
    remedy = "it is train.py's log of the run; restore it, or train the run again"
    # A resume keeps one readable row per iteration the checkpoint has passed (and names any it lost).
    mended = (f"python train.py --output-folder {path.parent} --resume rewrites it with one row per iteration"
              if (path.parent / "checkpoint.pt").is_file() else remedy)
    try:
        columns = load_metrics(path)
    except UnicodeDecodeError as exc:
        raise _damaged(path, f"not valid JSON lines ({exc})", remedy) from None
    except json.JSONDecodeError as exc:
        raise _damaged(path, f"not valid JSON lines ({exc})", mended) from None
    except (AttributeError, TypeError):
        raise _damaged(path, "its lines are not JSON objects", mended) from None
    except ValueError:
        raise ReportError(f"{path}: no iteration logged yet; train the run first (train.py)") from None
    missing = {"return_after", "total_env_steps"} - set(columns)
    if missing:
        raise _damaged(path, f"its rows lack {', '.join(sorted(missing))}", remedy)
    iterations = columns.get("iteration", np.array([]))
    values, counts = np.unique(iterations[np.isfinite(iterations)], return_counts=True)
    repeated = values[counts > 1].astype(int).tolist()
    if repeated:
        shown = ", ".join(map(str, repeated[:5])) + (", ..." if len(repeated) > 5 else "")
        raise _damaged(path, f"it logs iteration(s) {shown} more than once, which would shift the curve "
                             "(two runs wrote the folder?)", mended)
    return columns["return_after"], columns["total_env_steps"]


def _read_results(path: Path, rerun: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict | None, dict]:
    remedy = f"rerun {rerun}"
    try:
        # Opened here, so that it is closed even when np.load fails on a damaged file (it leaves its own open).
        with open(path, "rb") as file:
            data = np.load(file, allow_pickle=False)
            if not hasattr(data, "files"):
                raise ValueError("a single array, not the .npz archive of several")
            with data:
                after = np.asarray(data["valid_returns"], dtype=float)
                before = np.asarray(data["train_returns"], dtype=float)
                success = np.asarray(data["valid_success"], dtype=float) if "valid_success" in data.files else None
                record = read_record(data)
                # [stages, tasks] in test.py's file: each stage's mean over the tasks.
                stages = {name: np.asarray(data[key], dtype=float).mean(axis=1)
                          for name, key in (("returns", "returns_per_step"), ("success", "success_per_step"))
                          if key in data.files}
    except (zipfile.BadZipFile, EOFError) as exc:
        raise _damaged(path, f"damaged or cut short, not the archive test.py writes ({exc})", remedy) from None
    except (OSError, ValueError, KeyError) as exc:
        raise _damaged(path, f"not a results file of test.py ({exc})", remedy) from None
    if after.size == 0 or before.size == 0:
        raise _damaged(path, "holds no returns (valid_returns or train_returns is empty)", remedy)
    if not (np.isfinite(after).all() and np.isfinite(before).all()):
        raise _damaged(path, "holds returns that are not finite (NaN or infinite)", remedy)
    if any(a.ndim != 1 or not np.isfinite(a).all() for a in stages.values()):
        raise _damaged(path, "holds per-stage returns or success that are not finite, or not one row per stage",
                       remedy)
    return after, before, success, record, stages


def _stale(folder: Path, record: dict | None) -> str | None:
    """Why results.npz no longer stands for the run's policy: another policy file now, or none to compare."""
    if record is None:
        return None
    policy = record["policy"]
    current = folder / Path(str(policy.get("file", ""))).name
    if not current.is_file():
        return f"it evaluated {policy.get('file')}, and this run has no {current.name} to check it against"
    if file_sha256(current) == policy.get("sha256"):
        return None
    when = f" at iteration {policy['iteration']}" if policy.get("iteration") is not None else ""
    return (f"it evaluated {current.name}{when}, which has changed since (the run trained on, or the file was "
            "replaced)")


def _identity(config: dict, folder: Path, results: str) -> str:
    # The results' name too: one run evaluated two ways (--reset-context-each-attempt) is reported twice.
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode() + results.encode())
    # Without policy.th, the log tells runs of one configuration apart.
    digest.update(bytes.fromhex(file_sha256(folder / "policy.th")) if (folder / "policy.th").is_file()
                  else (folder / "metrics.jsonl").read_bytes())
    return digest.hexdigest()


def load_run(folder: str | Path, results: str = "results.npz") -> Run:
    """Read one run folder: its config, its training curve and test.py's results.

    :raises ReportError: a file is missing or damaged (the message names it, what is wrong and what to do).
    """
    folder = Path(folder)
    config_path, metrics_path, results_path = folder / "config.json", folder / "metrics.jsonl", folder / results
    rerun = f"python test.py --config {config_path}"
    for path, how in ((config_path, "train.py --output-folder"), (metrics_path, "train.py --output-folder"),
                      (results_path, rerun)):
        if not path.is_file():
            raise ReportError(f"{folder}: no {path.name}; it is written by {how}")
    config = _read_config(config_path)
    curve, env_steps = _read_curve(metrics_path)
    after, before, success, record, stages = _read_results(results_path, rerun)
    return Run(folder, config["env-name"], _algorithm(config), config.get("seed"),
               float(after.mean()), float(before.mean()), None if success is None else float(success.mean()),
               env_steps, curve, with_defaults(config), record, _stale(folder, record),
               _identity(config, folder, results), stages.get("returns"), stages.get("success"))


def _algorithm(config: dict[str, Any]) -> str:
    """The run's algorithm; the registry's default for a config that names none (pytorch-maml-rl's)."""
    from maml_rl.metalearners import DEFAULT_ALGORITHM

    return str(config.get("algorithm", DEFAULT_ALGORITHM))


def with_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its algorithm's defaults for the keys it leaves out (older runs lack newer keys)."""
    from maml_rl.app.config_files import config_keys

    try:
        keys = config_keys(_algorithm(config))
    except KeyError:
        return dict(config)
    return {**{key: h.default_value() for key, h in keys.items() if not h.required}, **config}
