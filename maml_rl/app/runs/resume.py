"""The configuration of a run, fresh or resumed, decided and checked before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from maml_rl.app.config_files import ConfigError, apply_overrides, config_diff, load_config, overridden_keys, validate_config
from maml_rl.app.runs.checkpoints import RESUMABLE_CHANGES, read_checkpoint
from maml_rl.app.runs.files import CHECKPOINT_FILE, CONFIG_FILE, METRICS_FILE, POLICY_FILE
from maml_rl.app.runs.metrics import logged_rows
from maml_rl.utils.seeding import draw_seed

__all__ = ["resolve_run_config"]


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
    output folder that already holds a checkpoint or logged iterations, unless
    ``overwrite``.

    A resumed run reads the ``config.json`` of ``output_folder`` (or, when it
    is missing, the configuration saved in its checkpoint). Only
    ``num-batches`` may be changed, through ``overrides`` or a ``config_path``
    that differs in nothing else; a ``seed`` or any other difference from the
    saved run is an error. ``resume`` on a folder with no run yet starts one.
    A folder whose checkpoint is gone but whose ``metrics.jsonl`` shows that one
    was written (an iteration past the first) is refused: it cannot be continued
    exactly, and starting again would discard what it holds.

    :return: the configuration and whether there is a checkpoint to resume from
        (a run stopped before its first checkpoint starts again from the beginning).
    :raises ConfigError: with a message saying what is wrong and what to do.
    """
    folder = Path(output_folder)
    checkpoint = folder / CHECKPOINT_FILE
    saved_path = folder / CONFIG_FILE
    logged = [row["iteration"] for row in logged_rows(folder) if isinstance(row.get("iteration"), int)]
    if not checkpoint.exists() and not overwrite and any(iteration >= 1 for iteration in logged):
        # Iteration 1 starts only once iteration 0's checkpoint is written: this one was lost.
        raise ConfigError(_lost_checkpoint(folder, logged))
    if resume and not saved_path.exists() and not checkpoint.exists() and not logged:
        # Nothing to resume yet: the same command starts the run, then continues it.
        resume = False
    if not resume:
        if (checkpoint.exists() or logged) and not overwrite:
            held = CHECKPOINT_FILE if checkpoint.exists() else f"{len(logged)} logged iteration(s) in {METRICS_FILE}"
            raise ConfigError(
                f"{folder} already holds a training run ({held}); pass --resume to continue it, "
                "--overwrite to start it again, or choose another --output-folder"
            )
        path = default_config if config_path is None else config_path
        config = load_config(path, overrides=[*overrides, *([("seed", seed)] if seed is not None else [])])
        if config["seed"] is None:
            config["seed"] = draw_seed()
        return config, False

    if saved_path.exists():
        saved = load_config(saved_path)
    else:
        # Killed between the two writes, or config.json lost: the checkpoint holds the configuration too.
        saved = validate_config(read_checkpoint(checkpoint)["config"], source=str(checkpoint))
    if config_path is not None:
        # The file as the command gives it: the same --set that started the run continues it.
        given = load_config(config_path, overrides=[(k, v) for k, v in overrides if k not in RESUMABLE_CHANGES])
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
    config = validate_config(apply_overrides(saved, overrides), source=str(saved_path if saved_path.exists()
                             else checkpoint), set_keys=overridden_keys(overrides))
    differences = config_diff(saved, config, ignore=RESUMABLE_CHANGES)
    if differences:
        raise ConfigError(
            "--resume: only " + ", ".join(RESUMABLE_CHANGES) + " may change when resuming, not:\n  "
            + "\n  ".join(differences)
        )
    return config, checkpoint.exists()


def _lost_checkpoint(folder: Path, logged: list[int]) -> str:
    """What a folder that lost its checkpoint holds, what starting again would lose, and what to do."""
    held = [f"{len(logged)} logged iteration(s) in {METRICS_FILE} (up to iteration {max(logged)})"]
    held += [name for name in (CONFIG_FILE, POLICY_FILE) if (folder / name).exists()]
    return (
        f"{folder} holds a training run but no {CHECKPOINT_FILE}: {', '.join(held)}. Without the checkpoint "
        "it cannot be continued exactly, and starting again would discard what it holds. Restore "
        f"{CHECKPOINT_FILE} from a copy and run the same command again; or start the run over with --overwrite "
        f"(instead of --resume), which discards {METRICS_FILE} and {POLICY_FILE}; or choose another --output-folder "
        "for a new run"
    )
