"""Several seeds of one config side by side on a Ray cluster (``train.py --seeds ... --backend ray``).

Each seed is a run, trained by Ray tasks on whichever node has the CPUs, in
chunks of ``chunk`` iterations: a task receives the run folder's files (none at
first), continues the run in a temporary folder on its node with the local
sampler (exactly as ``--resume`` does), and returns the files, which this
process writes into ``<output>/seed-<n>``. Nothing needs a shared file system,
every chunk boundary is a checkpoint on the driver's disk (``--resume``
continues from there, on Ray or not), and since a resumed run equals an
uninterrupted one bit for bit, so does a run trained in chunks on any nodes.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from maml_rl.app.config_files import ConfigError, load_config
from maml_rl.app.command_line import DEFAULT_STEP_TIMEOUT
from maml_rl.app.runs.lock import LOCK_FILE, RunLock
from maml_rl.app.runs import (
    CHECKPOINT_FILE,
    METRICS_FILE,
    atomic_write,
    prepare_output_folder,
    read_checkpoint,
    resolve_run_config,
)

__all__ = ["train_seeds_on_ray"]


def _read_folder(folder: Path) -> dict[str, bytes]:
    """A run's files (not its lock: whoever writes the folder holds that)."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name != LOCK_FILE}


def _write_folder(folder: Path, files: Mapping[str, bytes]) -> None:
    # The checkpoint last: once it is on disk, the chunk is done (as in train.py's loop).
    for name in sorted(files, key=lambda name: name == CHECKPOINT_FILE):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f, data=files[name]: f.write(data))


def _train_chunk(files: Mapping[str, bytes], config_text: str | None, seed: int, overrides: Sequence[tuple],
                 target: int, device: str, num_workers: int | None,
                 step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> dict[str, bytes]:
    """The remote side: continue one run up to ``target`` iterations, from and into files."""
    from maml_rl.app.training import train_run

    with tempfile.TemporaryDirectory(prefix="maml_rl-seed-") as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        _write_folder(folder, files)
        config = None
        if not files:
            config = Path(tmp) / "config.yaml"
            config.write_text(config_text)
        train_run(folder, config, [*overrides, ("num-batches", target)], seed=seed, resume=bool(files),
                  device=device, sampler_options={"num_workers": num_workers, "step_timeout": step_timeout})
        return _read_folder(folder)


def _iterations(folder: Path) -> int:
    """The iterations a run folder's checkpoint holds (0 without one)."""
    path = folder / CHECKPOINT_FILE
    return int(read_checkpoint(path)["iteration"]) if path.is_file() else 0


def train_seeds_on_ray(output: str | Path, config_path: str | Path | None, seeds: Sequence[int],
                       overrides: Sequence[tuple] = (), *, resume: bool = False, overwrite: bool = False,
                       device: str = "cpu", num_workers: int | None = None, ray_address: str | None = None,
                       cpus_per_seed: int | None = None, chunk: int = 10, default_config: str | Path,
                       step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> Path:
    """Train ``seeds`` side by side on a Ray cluster into ``<output>/seed-<n>`` (see the module's docstring).

    :param cpus_per_seed: CPUs Ray reserves for each seed's task (default 1; its sampler uses them).
    :param chunk: iterations per task; a task's files come back at its end.
    :param step_timeout: the samplers' ``step_timeout`` (seconds; ``None`` waits forever).
    :raises ConfigError: the config or a seed's folder is refused (checked for every seed before any work).
    """
    from maml_rl.samplers.backends.ray import import_ray

    ray = import_ray()
    output = Path(output)
    if chunk < 1:
        raise ConfigError(f"chunk must be >= 1, got {chunk}")
    # One writer per run folder, here as in train.py: every seed's folder is locked until the runs end.
    with contextlib.ExitStack() as stack:
        locks = {seed: stack.enter_context(RunLock(output / f"seed-{seed}")) for seed in seeds}
        for seed, lock in locks.items():
            if (output / f"seed-{seed}").is_dir():
                lock.acquire()
        return _train_seeds(ray, output, config_path, seeds, overrides, locks, resume=resume, overwrite=overwrite,
                            device=device, num_workers=num_workers, ray_address=ray_address,
                            cpus_per_seed=cpus_per_seed, chunk=chunk, default_config=default_config,
                            step_timeout=step_timeout)


def _train_seeds(ray, output: Path, config_path, seeds, overrides, locks, *, resume, overwrite, device, num_workers,
                 ray_address, cpus_per_seed, chunk, default_config, step_timeout) -> Path:
    """:func:`train_seeds_on_ray` once the seeds' existing folders are locked."""
    # Every seed's folder and the config are checked here first, as train.py checks one run.
    start: dict[int, dict[str, bytes]] = {}
    totals = {}
    config_text = None
    for seed in seeds:
        folder = output / f"seed-{seed}"
        config, has_checkpoint = resolve_run_config(folder, config_path, list(overrides), default_config=default_config,
                                                    seed=seed, resume=resume, overwrite=overwrite)
        totals[seed] = config["num-batches"]
        start[seed] = _read_folder(folder) if has_checkpoint else {}
        if not has_checkpoint and config_text is None:
            path = default_config if config_path is None else config_path
            load_config(path, overrides)  # the config itself, before its text goes out
            config_text = Path(path).read_text()
    for seed, lock in locks.items():
        if not lock.held:
            (output / f"seed-{seed}").mkdir(parents=True, exist_ok=True)
            lock.acquire()
    if not ray.is_initialized():
        ray.init(address=ray_address, log_to_driver=True)
    cpus = cpus_per_seed or 1
    if num_workers is None:  # the task's own CPUs, not the node's: the sampler in the task, or one worker each
        num_workers = 0 if cpus == 1 else cpus
    task = ray.remote(_train_chunk).options(num_cpus=cpus, max_retries=0)

    def submit(seed: int, files: Mapping[str, bytes]):
        # The files are those of the folder on disk, which holds their checkpoint.
        target = min(_iterations(output / f"seed-{seed}") + chunk, totals[seed])
        return task.remote(dict(files), config_text, seed, list(overrides), target, device, num_workers, step_timeout)

    pending = {}
    for seed in seeds:
        if not start[seed] and (output / f"seed-{seed}").exists():  # --overwrite, or a run killed before its checkpoint
            prepare_output_folder(output / f"seed-{seed}", fresh=True)
            (output / f"seed-{seed}" / METRICS_FILE).unlink(missing_ok=True)
        if _iterations(output / f"seed-{seed}") >= totals[seed]:
            print(f"seed {seed}: already {totals[seed]} iterations", file=sys.stderr)
            continue
        pending[submit(seed, start[seed])] = seed
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        seed = pending.pop(done[0])
        files = ray.get(done[0])
        locks[seed].check()  # the folder locked at the start, not one made in its place since
        _write_folder(output / f"seed-{seed}", files)
        iterations = _iterations(output / f"seed-{seed}")
        print(f"seed {seed}: {iterations} of {totals[seed]} iterations", file=sys.stderr)
        if iterations < totals[seed]:
            pending[submit(seed, files)] = seed
    return output

