"""Evaluation of a meta-trained policy on new tasks: what ``test.py`` reads, checks and prints.

* :func:`read_policy` and :func:`check_architecture` load a policy safely and
  refuse a configuration that describes another policy than the trained one;
* :func:`evaluation_env_kwargs` and :func:`listed_tasks` choose the evaluated
  tasks (the held-out split of envs that have one);
* :func:`summary_table` and :func:`class_table` report the returns (and
  success rates) against the number of adaptation steps (the figure:
  :func:`maml_rl.app.plotting.plot_returns`, the one plotter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from maml_rl.app.config_files import ConfigError, load_config
from maml_rl.policies import get_nonlinearity
from maml_rl.app.runs.checkpoints import read_checkpoint, safe_load
from maml_rl.app.results import file_sha256
from maml_rl.app.runs.files import CHECKPOINT_FILE, CONFIG_FILE

__all__ = [
    "ARCHITECTURE_KEYS",
    "check_architecture",
    "class_table",
    "describe_origin",
    "evaluation_env_kwargs",
    "listed_tasks",
    "policy_origin",
    "read_policy",
    "summary_table",
]


def summary_table(returns_per_step: np.ndarray, success_per_step: np.ndarray | None = None,
                  notes: dict[int, str] | None = None) -> str:
    """``step | mean return ± std over tasks | standard error of the mean`` for a ``[K+1, num_tasks]`` array,
    with a ``success rate`` column (± its standard error over tasks) when ``success_per_step`` is given.
    ``notes`` labels rows by index (default: row 0 is "before adaptation").

    The standard error says how far the mean over these tasks may be from the mean over
    all tasks: compare two policies (or a paper's figure) within a few of it.
    """
    def error(values: np.ndarray, width: int, spec: str = ".3f") -> str:
        return f"{values.std(ddof=1) / np.sqrt(values.size):{width}{spec}}" if values.size > 1 else f"{'-':>{width}}"

    header = "step | mean return ± std over tasks | std. error of the mean"
    rule = "-----+------------------------------+-----------------------"
    if success_per_step is not None:
        header += " | success rate ± std. error"
        rule += "+---------------------------"
    lines = [header, rule]
    notes = {0: "before adaptation"} if notes is None else notes
    for step, returns in enumerate(returns_per_step):
        note = f"  ({notes[step]})" if step in notes else ""
        line = f"{step:4d} | {returns.mean():12.3f} ± {returns.std():<14.3f}| {error(returns, 10)}"
        if success_per_step is not None:
            success = success_per_step[step]
            line += f"            | {success.mean():11.1%} ± {error(success, 6, '.1%')}"
        lines.append(line + note)
    return "\n".join(lines)


def class_table(tasks: list, returns_per_step: np.ndarray, success_per_step: np.ndarray | None = None,
                span: tuple[str, str] = ("before", "after")) -> str:
    """The first and the last row (before and after adaptation; for RL², the
    trial's first episode and the evaluation episodes: name them in ``span``)
    per task class, for tasks of several classes (Meta-World ML10/ML45: dicts
    with ``env_name``); ``""`` otherwise.

    Meta-World reports the mean over classes of each class's success rate:
    the last line, equal to the mean over tasks when every class has as many
    tasks (``--all-tasks``).
    """
    names = [task.get("env_name") if isinstance(task, dict) else None for task in tasks]
    classes = sorted(set(names), key=names.index)
    if None in classes or len(classes) < 2:
        return ""
    with_success = success_per_step is not None
    width = max(len(name) for name in [*classes, "mean over classes" if with_success else ""])
    spanned = f"{span[0]} -> {span[1]}"
    return_width = max(26, len(spanned) + 7)
    columns = [f"{'task class':{width}}", "tasks", f"{'return ' + spanned:^{return_width}}"]
    if with_success:
        columns.append("success " + spanned)
    lines = [" | ".join(columns).rstrip()]
    class_success = []
    for name in classes:
        mine = np.array([n == name for n in names])
        returns = returns_per_step[:, mine].mean(axis=1)
        shown = f"{returns[0]:>10.1f} -> {returns[-1]:.1f}"
        columns = [f"{name:{width}}", f"{mine.sum():5d}", f"{shown:<{return_width}}"]
        if with_success:
            success = success_per_step[:, mine].mean(axis=1)
            class_success.append(success)
            columns.append(f"{success[0]:>9.1%} -> {success[-1]:.1%}")
        lines.append(" | ".join(columns).rstrip())
    if with_success:
        mean = np.mean(class_success, axis=0)
        lines.append(" | ".join([f"{'mean over classes':{width}}", " " * 5, " " * return_width,
                                 f"{mean[0]:>9.1%} -> {mean[-1]:.1%}"]))
    return "\n".join(lines)


def listed_tasks(config: dict, env, env_kwargs: dict) -> list:
    """Every task of the evaluated split, for ``--all-tasks``."""
    all_tasks = getattr(env.unwrapped, "all_tasks", None)
    if all_tasks is None:
        raise ConfigError(f"--all-tasks: {config['env-name']} does not list its tasks (its tasks are draws from "
                          "a distribution); choose how many with --meta-batch-size and --num-batches")
    return list(all_tasks(env_kwargs["split"]) if "split" in env_kwargs else all_tasks())


def evaluation_env_kwargs(config: dict, env, split: str | None) -> dict:
    """The config's env-kwargs, with ``split`` (default ``"test"``) for an env with task splits."""
    splits = getattr(env.unwrapped, "splits", None)
    if not splits:
        if split is not None:
            raise ConfigError(f"--split {split}: {config['env-name']} has no train/test task splits; "
                              "its evaluation tasks are new draws from its task distribution (see --seed)")
        return dict(config["env-kwargs"])
    return {**config["env-kwargs"], "split": split or "test"}


def read_policy(path: str) -> dict:
    """The policy's state_dict from ``policy.th``, or from a training run's ``checkpoint.pt``; read safely."""
    state = safe_load(path, "Give --policy the policy.th or checkpoint.pt of a run of train.py.")
    if isinstance(state, dict) and "policy" in state and "version" in state:
        return read_checkpoint(path)["policy"]
    if not isinstance(state, dict) or not all(isinstance(value, torch.Tensor) for value in state.values()):
        raise ConfigError(f"--policy {path} is not a policy state_dict (policy.th) nor a checkpoint.pt")
    return state


def policy_origin(path: str, state_dict: Mapping[str, torch.Tensor]) -> dict:
    """Which policy ``path`` is: its resolved path, sha256, and the training iteration it is from.

    The iteration and the run's ``num-batches`` come from the checkpoint: ``path``
    itself, or the run's ``checkpoint.pt`` beside a ``policy.th`` that holds the
    same weights; ``None`` when they cannot be told (no checkpoint, or one
    from another iteration).

    :param state_dict: the weights read from ``path`` (:func:`read_policy`).
    :raises ConfigError: the file changed while it was read (a run still training writes it every iteration).
    """
    digest = file_sha256(path)
    iteration = num_batches = None
    for checkpoint in dict.fromkeys([Path(path), Path(path).parent / CHECKPOINT_FILE]):
        try:
            state = read_checkpoint(checkpoint)
        except ConfigError:
            continue  # a policy.th, no checkpoint, or a damaged one: the iteration is unknown
        if state["policy"].keys() == state_dict.keys() and all(
                torch.equal(state["policy"][name], state_dict[name]) for name in state_dict):
            iteration, num_batches = int(state["iteration"]), state["config"].get("num-batches")
            break
    if file_sha256(path) != digest:
        raise ConfigError(f"--policy {path} changed while it was read (is its run still training?): "
                          "run test.py again, or evaluate a copy of the file")
    return {"file": str(Path(path).resolve()), "sha256": digest, "iteration": iteration, "num-batches": num_batches}


def describe_origin(origin: Mapping[str, Any]) -> str:
    """`` (iteration N of M, the run is unfinished)``, `` (iteration M of M)``, or ``""`` when unknown."""
    iteration, total = origin["iteration"], origin["num-batches"]
    if iteration is None:
        return ""
    if total is None or iteration >= total:
        return f" (iteration {iteration}{f' of {total}' if total else ''})"
    return f" (iteration {iteration} of {total}: the run is unfinished)"


#: What must agree between the configuration and the run that trained the policy.
ARCHITECTURE_KEYS = ("env-name", "hidden-sizes", "nonlinearity")


def check_architecture(config: dict, config_path: str, policy_path: str) -> None:
    """Refuse a configuration whose policy is not the one trained next to ``policy_path``.

    Shapes are checked when the weights are loaded; a different activation
    (Tanh for a ReLU-trained policy) would load silently and give wrong
    returns. train.py writes the run's ``config.json`` beside ``policy.th``:
    when it is there, its architecture must match.
    """
    trained_path = Path(policy_path).parent / CONFIG_FILE
    if not trained_path.is_file() or trained_path.resolve() == Path(config_path).resolve():
        return
    trained = load_config(trained_path)
    same = {"nonlinearity": lambda a, b: get_nonlinearity(a) is get_nonlinearity(b)}
    differences = [
        f"{key}: {config[key]!r} in {config_path}, {trained[key]!r} in {trained_path}"
        for key in ARCHITECTURE_KEYS
        if not same.get(key, lambda a, b: a == b)(config[key], trained[key])
    ]
    if differences:
        raise ConfigError(
            f"--policy {policy_path} was trained with another policy than {config_path} describes:\n  "
            + "\n  ".join(differences)
            + f"\nevaluate with --config {trained_path}"
        )
