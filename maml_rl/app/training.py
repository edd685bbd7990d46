"""The training loop of ``train.py``: one run, fresh or resumed, into its folder."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tqdm import tqdm

from maml_rl.app.config_files import overridden_env_kwargs
from maml_rl.app.env_builder import build_env
from maml_rl.metalearners import make_metalearner, make_policy
from maml_rl.app.runs import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    METRICS_FILE,
    POLICY_FILE,
    MetricsLogger,
    atomic_save,
    atomic_write_json,
    check_writable,
    load_checkpoint,
    read_checkpoint,
    prepare_output_folder,
    resolve_device,
    resolve_run_config,
    save_checkpoint,
    seed_global_generators,
)
from maml_rl.app.progress import PhaseBar, budget_line, cost_line, finished_line
from maml_rl.app.runs.checkpoints import check_checkpoint_config, check_checkpoint_rows
from maml_rl.app.runs.metrics import keep_rows_before, logged_rows
from maml_rl.app.runs.decline import DeclineMonitor
from maml_rl.app.runs.fits import check_run_fits
from maml_rl.app.runs.lock import RunFolderBusy, RunLock
from maml_rl.app.runs.stall import StallMonitor
from maml_rl.samplers import MultiTaskSampler
from maml_rl.utils.memory import keep_freed_memory

__all__ = ["train_run"]


def train_run(output: str | Path, config_path: str | Path | None, overrides: Sequence[tuple[str, Any]] = (), *,
              seed: int | None = None, resume: bool = False, overwrite: bool = False, device: str = "cpu",
              sampler_options: Mapping[str, Any] | None = None, default_config: str | Path | None = None) -> Path:
    """One training run into ``output`` (what ``train.py`` does for one seed).

    :param config_path: the YAML config (``None``: the run's own config.json when resuming, else ``default_config``).
    :param overrides: ``(key, value)`` pairs applied to the config (``num-batches`` may grow on resume).
    :param sampler_options: keyword arguments of :class:`~maml_rl.samplers.MultiTaskSampler` (workers, backend).
    :raises ConfigError: anything wrong with the config or the folder, before any work starts.
    """
    output = Path(output)
    # One writer per folder, from before it is read until the run ends (a killed run's lock goes with it).
    with RunLock(output) as lock:
        check_writable(output, "--output-folder", folder=True)
        if output.is_dir():
            lock.acquire()
        # Everything is checked before any work starts or any file is written.
        nothing_yet = not any((output / name).exists() for name in (CONFIG_FILE, CHECKPOINT_FILE, METRICS_FILE))
        config, has_checkpoint = resolve_run_config(
            output, config_path, list(overrides), default_config=default_config,
            seed=seed, resume=resume, overwrite=overwrite,
        )
        if resume and nothing_yet:
            print(f"{output}: no run to resume yet, starting one", file=sys.stderr)
        device = resolve_device(device)
        env = build_env(config, overridden_env_kwargs(overrides))
        try:
            # A damaged checkpoint, or one of another configuration, is refused before config.json is rewritten:
            # a refusal changes no file.
            saved_state = read_checkpoint(output / CHECKPOINT_FILE) if has_checkpoint else None
            if saved_state is not None:
                check_checkpoint_config(saved_state, config, output / CHECKPOINT_FILE)
                check_checkpoint_rows(saved_state, logged_rows(output), output / CHECKPOINT_FILE)
            given = config_path if config_path is not None else output / CONFIG_FILE if resume else default_config
            check_run_fits(config, env, source=str(given))
            if not lock.held:
                output.mkdir(parents=True, exist_ok=True)
                lock.acquire()
                if any((output / name).exists() for name in (CONFIG_FILE, CHECKPOINT_FILE, METRICS_FILE)):
                    raise RunFolderBusy(f"{output}: another run started writing this folder while this one was "
                                        "being checked; choose another --output-folder")
        except BaseException:
            env.close()
            raise

        lock.check()
        prepare_output_folder(output, fresh=not has_checkpoint)
        atomic_write_json(config, output / CONFIG_FILE)
        try:
            return _train(output, config, has_checkpoint, saved_state, env, device, sampler_options, lock.check)
        except FileNotFoundError:
            # A write that failed because the folder was moved or deleted says so. rm -rf removes the folder's
            # files before the folder: a temporary file of ours can vanish while the folder is still there, so
            # look again for a moment before taking the error for another one.
            deadline = time.monotonic() + FOLDER_GONE_WAIT
            while True:
                lock.check()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)


#: How long a run whose own file vanished mid-write waits for its folder's deletion or move to show.
FOLDER_GONE_WAIT = 5.0


def _train(output: Path, config: dict, has_checkpoint: bool, saved_state: Any, env: Any, device: Any,
           sampler_options: Mapping[str, Any] | None, check_folder: Callable[[], None]) -> Path:
    """The loop of a checked run whose folder is locked and whose config.json is written; ``check_folder``
    raises unless the folder's path still names the locked folder (:meth:`RunLock.check`), before each write."""
    keep_freed_memory()
    seed_global_generators(config["seed"])
    policy = make_policy(config, env)
    env.close()
    metalearner = make_metalearner(config, policy, device)
    sampler = MultiTaskSampler(config["env-name"], config["env-kwargs"], config["fast-batch-size"], policy,
                               seed=config["seed"], **type(metalearner).sampler_options(config),
                               **dict(sampler_options or {}))

    with sampler:
        if sampler.backend == "ray":
            print(f"sampling on {sampler.describe_backend()}", file=sys.stderr)
        start, counters = 0, {"total_env_steps": 0}
        # They watch the logged metrics; the checkpoint keeps their state, so a lost metrics.jsonl does not
        # change what they compute.
        stall_rule = {"took_no_step": metalearner.took_no_step, "advice": metalearner.stall_advice}
        decline, stall = DeclineMonitor(), StallMonitor(**stall_rule)
        monitors = {"decline": decline, "stall": stall}
        restored = False
        if has_checkpoint:
            start, counters, restored = load_checkpoint(
                output / CHECKPOINT_FILE, state=saved_state, config=config, policy=policy, sampler=sampler,
                metalearner=metalearner, monitors=monitors)
        num_batches = config["num-batches"]
        if start >= num_batches:
            check_folder()
            keep_rows_before(output, start)  # a complete run's log is mended as a continued one's is
            print(f"{output}: the run already has {start} of {num_batches} iterations; nothing to do",
                  file=sys.stderr)
            return output
        if start:
            print(f"{output}: resuming at iteration {start} of {num_batches}", file=sys.stderr)
        print(budget_line(config, metalearner, sampler.horizon, start), file=sys.stderr)
        metalearner.progress = PhaseBar()
        progress = tqdm(range(start, num_batches), initial=start, total=num_batches,
                        desc=config["env-name"], unit="batch", dynamic_ncols=True)
        check_folder()
        with MetricsLogger(output, start_iteration=start) as logger, progress:
            missing = sorted(set(range(start)) - {row.get("iteration") for row in logger.history})
            if missing:
                progress.write(_missing_rows_warning(missing, restored), file=sys.stderr)
            if start and not restored:  # a checkpoint written before the monitors' state was saved
                decline = DeclineMonitor.replay(row["return_after"] for row in logger.history if "return_after" in row)
                stall = StallMonitor.replay(logger.history, **stall_rule)
                monitors = {"decline": decline, "stall": stall}
            for iteration in progress:
                # Inner loop: episodes before each adaptation step (train) and after the last one (valid).
                start_time = time.perf_counter()
                tasks = metalearner.sample_tasks(sampler, config["meta-batch-size"])
                # The learner's own sampling (MAML: sample, adapt, sample again; RL²: trials), then its update.
                batch = metalearner.sample(sampler, tasks, config["gamma"], device)
                sampled_time = time.perf_counter()
                logs = metalearner.update(batch)
                stats = metalearner.batch_stats(batch)
                optimized_time = time.perf_counter()

                counters["total_env_steps"] += stats["env_steps"]
                trend, warning = decline.update(stats["return_after"])
                check_folder()
                row = logger.log({
                    "iteration": iteration,
                    **stats,
                    "total_env_steps": counters["total_env_steps"],
                    **trend,
                    **logs,
                    "time_sampling": sampled_time - start_time,
                    "time_optimization": optimized_time - sampled_time,
                })
                postfix = {"before": f"{stats['return_before']:.2f}", "after": f"{stats['return_after']:.2f}"}
                if "success_before" in stats:
                    postfix["success"] = f"{stats['success_before']:.0%}->{stats['success_after']:.0%}"
                if decline.alerted:
                    postfix["gain_lost"] = f"{trend['gain_lost']:.0%}"
                stalled = stall.update(logs)
                if stall.streak >= stall.window:
                    postfix["no_step_for"] = stall.streak
                progress.set_postfix(postfix)
                if iteration == start:  # the run's cost, once it is known
                    progress.write(cost_line(iteration, sampled_time - start_time, optimized_time - sampled_time,
                                             num_batches - iteration - 1), file=sys.stderr)
                for text in (warning, stalled and f"iteration {iteration}: {stalled}"):
                    if text:
                        progress.write(f"warning: {text}", file=sys.stderr)

                # The checkpoint comes last: once it is written, the iteration is done.
                check_folder()
                weights = {name: value.detach().cpu() for name, value in policy.state_dict().items()}
                policy_sha256 = atomic_save(weights, output / POLICY_FILE)
                save_checkpoint(output / CHECKPOINT_FILE, iteration=iteration + 1, config=config, policy=policy,
                                sampler=sampler, counters=counters, metalearner=metalearner,
                                monitors=monitors, policy_file_sha256=policy_sha256, last_row=row)
    print(finished_line(output, config), file=sys.stderr)
    return output


def _missing_rows_warning(missing: list[int], restored: bool) -> str:
    """A resumed run whose metrics.jsonl lost rows that its checkpoint had already passed."""
    span = f"{missing[0]}" if len(missing) == 1 else f"{missing[0]}-{missing[-1]}"
    if len(missing) != missing[-1] - missing[0] + 1:
        span = ", ".join(map(str, missing))
    windowed = ("return_after_mean10 and gain_lost go on exactly from the state saved in the checkpoint"
                if restored else
                "the checkpoint predates the saved state of return_after_mean10 and gain_lost, so they are "
                "computed over the rows that remain and differ from an uninterrupted run's")
    return (f"warning: {METRICS_FILE} has no row for iteration(s) {span}, which the checkpoint has passed: they "
            f"are lost and cannot be recomputed, so the training curve has a gap there. The run itself continues "
            f"exactly; {windowed}")
