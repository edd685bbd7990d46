"""Evaluation of a meta-trained policy on new tasks: what ``test.py`` reads, checks and prints.

* :func:`read_policy_file` and :func:`check_architecture` load a policy safely (once, with the digest of
  the bytes loaded) and refuse a configuration that describes another policy than the trained one;
  :func:`policy_origin` tells its training iteration, and refuses a damaged ``policy.th``;
* :func:`evaluation_env_kwargs` and :func:`listed_tasks` choose the evaluated
  tasks (the held-out split of envs that have one);
* :func:`summary_table` and :func:`class_table` report the returns (and
  success rates) against the number of adaptation steps (the figure:
  :func:`maml_rl.app.plotting.plot_returns`, the one plotter).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import numpy as np
import torch

from maml_rl.app.config_files import ConfigError, load_config
from maml_rl.policies import get_nonlinearity
from maml_rl.app.runs.checkpoints import read_checkpoint, safe_load
from maml_rl.app.runs.files import CHECKPOINT_FILE, CONFIG_FILE

__all__ = [
    "ARCHITECTURE_KEYS",
    "check_architecture",
    "class_table",
    "describe_origin",
    "evaluation_env_kwargs",
    "listed_tasks",
    "PolicyFile",
    "policy_origin",
    "read_policy",
    "read_policy_file",
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


class PolicyFile(NamedTuple):
    """A policy file as :func:`read_policy_file` read it: once, so that its digest is that of these weights."""

    state_dict: dict
    sha256: str
    checkpoint: dict | None  # the file itself, when it is a run's checkpoint.pt


def read_policy_file(path: str) -> PolicyFile:
    """The policy's state_dict from ``policy.th``, or from a training run's ``checkpoint.pt``, read safely, with the
    SHA-256 of the very bytes it was loaded from (a run still training may replace the file at any moment)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"--policy {path}: no such file") from None
    sha256 = hashlib.sha256(data).hexdigest()
    state = safe_load(path, "Give --policy the policy.th or checkpoint.pt of a run of train.py.", data=data)
    if isinstance(state, dict) and "policy" in state and "version" in state:
        checkpoint = read_checkpoint(path, data=data)
        return PolicyFile(checkpoint["policy"], sha256, checkpoint)
    if not isinstance(state, dict) or not all(isinstance(value, torch.Tensor) for value in state.values()):
        raise ConfigError(f"--policy {path} is not a policy state_dict (policy.th) nor a checkpoint.pt")
    return PolicyFile(state, sha256, None)


def read_policy(path: str) -> dict:
    """The policy's state_dict from ``policy.th``, or from a training run's ``checkpoint.pt``; read safely."""
    return read_policy_file(path).state_dict


def policy_origin(path: str, policy: PolicyFile, *, being_written: bool = False) -> tuple[dict, str | None]:
    """Which policy ``path`` is: its resolved path, sha256, and the training iteration it is from; and a warning
    when that cannot be told of a policy.th beside a checkpoint.

    The iteration and the run's ``num-batches`` come from the checkpoint: ``path``
    itself, or the run's ``checkpoint.pt`` beside a ``policy.th`` that is the one
    it records (its SHA-256; a checkpoint from before that record: the same
    weights); ``None`` when they cannot be told.

    :param policy: ``path`` as :func:`read_policy_file` read it.
    :param being_written: a train.py is writing the folder, so policy.th may be newer than the checkpoint.
    :raises ConfigError: a policy.th other than the one its run's checkpoint records, in a folder no run is
        writing: damaged, replaced, or left by a run stopped between its two writes.
    """
    origin = {"file": str(Path(path).resolve()), "sha256": policy.sha256, "iteration": None, "num-batches": None}
    checkpoint, state = Path(path), policy.checkpoint
    if state is None:
        checkpoint = Path(path).parent / CHECKPOINT_FILE
        try:
            state = read_checkpoint(checkpoint) if checkpoint.is_file() else None
        except ConfigError:
            state = None  # a damaged checkpoint: the iteration is unknown (resuming the run says what is wrong)
    if state is None:
        return origin, None
    recorded = state.get("policy_file_sha256")
    if policy.checkpoint is not None or recorded == policy.sha256 or (recorded is None and _same(state, policy)):
        origin.update(iteration=int(state["iteration"]), **{"num-batches": state["config"].get("num-batches")})
        return origin, None
    if being_written:
        return origin, None  # the run replaces both files every iteration: they need not be of one iteration
    last = f"{checkpoint} (iteration {state['iteration']})"
    causes = (f"damaged (by the disk, a copy or an edit) or replaced, or its run was stopped between writing "
              f"{Path(path).name} and {checkpoint.name}. Resuming the run rewrites it (python train.py "
              f"--output-folder {Path(path).parent} --resume redoes that iteration exactly); or evaluate the "
              f"checkpoint's own policy, whose bytes are checked: --policy {checkpoint}")
    if recorded is not None:
        raise ConfigError(f"--policy {path} is not the file its run last wrote: its SHA-256 differs from the one "
                          f"{last} records for it. It is {causes}")
    # A checkpoint from before the record: the weights differ, which a damaged file and a later one both explain.
    return origin, (f"warning: --policy {path} holds other weights than {last}, which predates the record of "
                    f"{Path(path).name}'s SHA-256, so it cannot be told which: it may be {causes}")


def _same(state: Mapping[str, Any], policy: PolicyFile) -> bool:
    saved = state["policy"]
    return saved.keys() == policy.state_dict.keys() and all(
        torch.equal(saved[name], policy.state_dict[name]) for name in saved)


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
