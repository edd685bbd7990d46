"""Evaluate a meta-trained policy on held-out tasks.

    python test.py --config runs/2d-navigation/config.json --policy runs/2d-navigation/policy.th \\
        --output runs/2d-navigation/results.npz
    # the MAML paper's 2D navigation evaluation: 40 test tasks, up to 3 gradient steps
    python test.py --config runs/2d-navigation/config.json --meta-batch-size 40 --num-batches 1 \\
        --num-steps 3 --plot runs/2d-navigation/results.png

For each of ``--num-batches`` batches of ``--meta-batch-size`` new tasks (drawn
with a seed different from training by default), the policy is adapted with
``--num-steps`` gradient steps of the config's ``fast-lr``, collecting
``fast-batch-size`` episodes before each step and after the last one.

For envs with train and test task splits (Meta-World), the tasks are drawn
from the held-out test split (``--split test``, the default there);
``--all-tasks`` evaluates every task of the split once instead of drawing
them, and ``--eval-actions mean`` rolls out the adapted policies' most
likely actions after the last step (the adaptation episodes are always
sampled). Together they are Meta-World's evaluation protocol:

    python test.py --config runs/ml10/config.json --all-tasks --eval-actions mean

``results.npz`` (load with ``numpy.load(path, allow_pickle=True)``) holds:

    tasks             [N*M] object array of the task dicts
    train_returns     [N*M, B] returns of each episode before adaptation
    valid_returns     [N*M, B] returns of each episode after the K steps
    returns_per_step  [K+1, N*M] mean return of each task after 0..K steps

and, for envs whose episodes carry success (Meta-World: an episode succeeds
if ``info["success"]`` is set at any of its steps):

    train_success     [N*M, B] 1.0 for each episode that succeeded before adaptation
    valid_success     [N*M, B] the same after the K steps
    success_per_step  [K+1, N*M] success rate of each task after 0..K steps
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from gymnasium import spaces
from tqdm import tqdm

from maml_rl.baseline import LinearFeatureBaseline
from maml_rl.command_line import add_sampler_arguments, run_script, sampler_options
from maml_rl.config import ConfigError, build_env, load_config
from maml_rl.policies import get_nonlinearity, get_policy_for_env
from maml_rl.samplers import MultiTaskSampler, usable_cpus
from maml_rl.training import (
    CONFIG_FILE,
    atomic_write,
    carries_success,
    check_writable,
    mean_returns,
    read_checkpoint,
    resolve_device,
    safe_load,
    success_rates,
)

__all__ = ["class_table", "main", "parse_args", "summary_table"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Model-Agnostic Meta-Learning (MAML) for reinforcement learning: evaluation on new tasks.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--config", type=str, required=True,
        help="configuration of the run (its config.json, or a YAML config)")
    parser.add_argument("--policy", type=str, default=None,
        help="policy state_dict, or a run's checkpoint.pt (default: policy.th next to --config)")
    parser.add_argument("--output", type=str, default=None,
        help="results file (default: results.npz next to --config)")
    evaluation = parser.add_argument_group("evaluation")
    evaluation.add_argument("--meta-batch-size", type=int, default=None,
        help="tasks per batch (default: the config's meta-batch-size)")
    evaluation.add_argument("--num-batches", type=int, default=None,
        help="batches of tasks (default: 1)")
    evaluation.add_argument("--all-tasks", action="store_true",
        help="every task of the split once, in order, in batches of --meta-batch-size, instead of "
             "--num-batches of drawn tasks (envs that list their tasks: Meta-World)")
    evaluation.add_argument("--num-steps", type=int, default=None,
        help="adaptation gradient steps (default: the config's num-steps)")
    evaluation.add_argument("--fast-batch-size", type=int, default=None,
        help="episodes per task per step (default: the config's fast-batch-size)")
    evaluation.add_argument("--split", choices=("train", "test"), default=None,
        help="for envs with train/test task splits (Meta-World): the tasks to evaluate on (default: test)")
    evaluation.add_argument("--eval-actions", choices=("sample", "mean"), default="sample",
        help="actions after the last adaptation step: drawn from the adapted policy (default), or its "
             "mean (deterministic evaluation, as Meta-World's protocol); adaptation always samples")
    misc = parser.add_argument_group("miscellaneous")
    misc.add_argument("--seed", type=int, default=None,
        help="seed of the evaluation (default: the training seed + 1, so the tasks differ from training)")
    add_sampler_arguments(misc, usable_cpus())
    misc.add_argument("--device", type=str, default="cpu", help="device of the policy: cpu or cuda (default: cpu)")
    misc.add_argument("--plot", type=str, default=None, metavar="PNG",
        help="also plot the mean return against the number of adaptation steps (needs matplotlib)")
    args = parser.parse_args(argv)
    for name in ("meta_batch_size", "num_batches", "num_steps", "fast_batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if args.all_tasks and args.num_batches is not None:
        parser.error("--all-tasks evaluates every task of the split once: leave out --num-batches")
    args.num_batches = args.num_batches or 1
    args.sampler_options = sampler_options(parser, args)
    if args.seed is not None and args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    folder = Path(args.config).parent
    args.policy = args.policy or str(folder / "policy.th")
    args.output = args.output or str(folder / "results.npz")
    return args


def summary_table(returns_per_step: np.ndarray, success_per_step: np.ndarray | None = None) -> str:
    """``step | mean return ± std over tasks | standard error of the mean`` for a ``[K+1, num_tasks]`` array,
    with a ``success rate`` column (± its standard error over tasks) when ``success_per_step`` is given.

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
    for step, returns in enumerate(returns_per_step):
        note = "  (before adaptation)" if step == 0 else ""
        line = f"{step:4d} | {returns.mean():12.3f} ± {returns.std():<14.3f}| {error(returns, 10)}"
        if success_per_step is not None:
            success = success_per_step[step]
            line += f"            | {success.mean():11.1%} ± {error(success, 6, '.1%')}"
        lines.append(line + note)
    return "\n".join(lines)


def class_table(tasks: list, returns_per_step: np.ndarray, success_per_step: np.ndarray | None = None) -> str:
    """Before and after adaptation per task class, for tasks of several classes
    (Meta-World ML10/ML45: dicts with ``env_name``); ``""`` otherwise.

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
    columns = [f"{'task class':{width}}", "tasks", f"{'return before -> after':^26}"]
    if with_success:
        columns.append("success before -> after")
    lines = [" | ".join(columns).rstrip()]
    class_success = []
    for name in classes:
        mine = np.array([n == name for n in names])
        returns = returns_per_step[:, mine].mean(axis=1)
        columns = [f"{name:{width}}", f"{mine.sum():5d}", f"{returns[0]:>10.1f} -> {returns[-1]:<12.1f}"]
        if with_success:
            success = success_per_step[:, mine].mean(axis=1)
            class_success.append(success)
            columns.append(f"{success[0]:>9.1%} -> {success[-1]:.1%}")
        lines.append(" | ".join(columns).rstrip())
    if with_success:
        mean = np.mean(class_success, axis=0)
        lines.append(" | ".join([f"{'mean over classes':{width}}", " " * 5, " " * 26,
                                 f"{mean[0]:>9.1%} -> {mean[-1]:.1%}"]))
    return "\n".join(lines)


def listed_tasks(config: dict, env, env_kwargs: dict) -> list:
    """Every task of the evaluated split, for ``--all-tasks``."""
    all_tasks = getattr(env.unwrapped, "all_tasks", None)
    if all_tasks is None:
        raise ConfigError(f"--all-tasks: {config['env-name']} does not list its tasks (its tasks are draws from "
                          "a distribution); choose how many with --meta-batch-size and --num-batches")
    return list(all_tasks(env_kwargs["split"]) if "split" in env_kwargs else all_tasks())


def plot_returns(returns_per_step: np.ndarray, path: str | Path, title: str) -> None:
    """PNG of the mean return (± std over tasks) against the number of adaptation steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(len(returns_per_step))
    mean, std = returns_per_step.mean(axis=1), returns_per_step.std(axis=1)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(steps, mean, marker="o")
    ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
    ax.set_xticks(steps)
    ax.set_xlabel("number of gradient steps")
    ax.set_ylabel("mean return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


def main(argv: list[str] | None = None) -> dict[str, np.ndarray]:
    args = parse_args(argv)

    # Everything is checked before any work starts.
    config = load_config(args.config)
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot needs matplotlib: pip install matplotlib (or pip install 'maml_rl[plot]')") from None
    if not Path(args.policy).is_file():
        raise ConfigError(f"--policy {args.policy}: no such file")
    check_writable(args.output, "--output", folder=False)
    if args.plot is not None:
        check_writable(args.plot, "--plot", folder=False)
    check_architecture(config, args.config, args.policy)
    state_dict = read_policy(args.policy)
    device = resolve_device(args.device)
    env = build_env(config)
    env_kwargs = evaluation_env_kwargs(config, env, args.split)
    seed = args.seed if args.seed is not None else (config["seed"] or 0) + 1
    num_steps = args.num_steps or config["num-steps"]
    meta_batch_size = args.meta_batch_size or config["meta-batch-size"]
    batch_size = args.fast_batch_size or config["fast-batch-size"]

    policy = get_policy_for_env(env, hidden_sizes=config["hidden-sizes"], nonlinearity=config["nonlinearity"])
    try:
        policy.load_state_dict(state_dict)
    except (RuntimeError, KeyError) as exc:
        raise ConfigError(f"--policy {args.policy} does not fit the policy of {args.config}: {exc}") from None
    policy.to(device)
    baseline = LinearFeatureBaseline(spaces.flatdim(env.observation_space)).to(device)
    listed = listed_tasks(config, env, env_kwargs) if args.all_tasks else None
    env.close()

    tasks, per_step, per_step_success = [], [], []  # per batch: [K+1, M, B] returns (and successes)
    with MultiTaskSampler(config["env-name"], env_kwargs, batch_size, policy, baseline,
                          seed=seed, **args.sampler_options) as sampler:
        if sampler.backend == "ray":
            print(f"sampling on {sampler.describe_backend()}", file=sys.stderr)
        if listed is not None:
            batches = [listed[i:i + meta_batch_size] for i in range(0, len(listed), meta_batch_size)]
        else:
            batches = [None] * args.num_batches
        for batch_tasks in tqdm(batches, desc="evaluation", unit="batch", dynamic_ncols=True):
            batch_tasks = batch_tasks or sampler.sample_tasks(meta_batch_size)
            # train_episodes[k]: after k adaptation steps; valid_episodes: after num_steps.
            train_episodes, valid_episodes = sampler.sample(
                batch_tasks, num_steps=num_steps, fast_lr=config["fast-lr"],
                gamma=config["gamma"], gae_lambda=config["gae-lambda"], device=device,
                averaging=config["loss-averaging"], valid_actions=args.eval_actions,
            )
            tasks.extend(batch_tasks)
            per_step.append(np.stack([mean_returns(episodes) for episodes in [*train_episodes, valid_episodes]]))
            if carries_success(valid_episodes):
                per_step_success.append(np.stack([success_rates(episodes)
                                                  for episodes in [*train_episodes, valid_episodes]]))

    returns = np.concatenate(per_step, axis=1)  # [K+1, N*M, B]
    task_array = np.empty(len(tasks), dtype=object)
    task_array[:] = tasks
    results = {
        "tasks": task_array,
        "train_returns": returns[0],
        "valid_returns": returns[-1],
        "returns_per_step": returns.mean(axis=2),
    }
    if per_step_success:
        success = np.concatenate(per_step_success, axis=1)  # [K+1, N*M, B]
        results.update(train_success=success[0], valid_success=success[-1], success_per_step=success.mean(axis=2))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.output, lambda f: np.savez(f, **results))

    split = f" of the {env_kwargs['split']} split" if "split" in env_kwargs else ""
    which = "every task" if listed is not None else f"{len(tasks)} new tasks"
    mean = ", mean actions after adaptation" if args.eval_actions == "mean" else ""
    print(f"{config['env-name']}: {args.policy} on {which}{split} ({len(tasks)}, seed {seed}), "
          f"{batch_size} episodes per task per step, fast-lr {config['fast-lr']}{mean}")
    print(summary_table(results["returns_per_step"], results.get("success_per_step")))
    per_class = class_table(tasks, results["returns_per_step"], results.get("success_per_step"))
    if per_class:
        print(per_class)
    print(f"results written to {args.output}")
    if args.plot is not None:
        plot_returns(results["returns_per_step"], args.plot, f"{config['env-name']} ({len(tasks)} tasks)")
        print(f"plot written to {args.plot}")
    return results


if __name__ == "__main__":
    run_script(main)
