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
    task_KEY          [N*M, ...] each numeric field of the tasks (a bandit's ``task_mean``), readable
                      without unpickling (``python -m maml_rl.references bandit --on results.npz``)

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

from maml_rl.app.startup import quiet_interrupt

with quiet_interrupt("test.py"):
    import numpy as np
    from tqdm import tqdm

    from maml_rl.app.command_line import EVALUATION_DIVERGED, add_sampler_arguments, run_script, sampler_options
    from maml_rl.app.config_files import ConfigError, build_env, load_config
    from maml_rl.config.hyperparameters import InvalidValue
    from maml_rl.app.plotting import plot_returns
    from maml_rl.app.evaluation import (
        check_architecture,
        class_table,
        describe_origin,
        evaluation_env_kwargs,
        listed_tasks,
        policy_origin,
        read_policy_file,
        summary_table,
    )
    from maml_rl.metalearners import METALEARNERS, MetaLearner, make_metalearner, make_policy
    from maml_rl.app.results import RECORD_KEY, record_array, task_arrays
    from maml_rl.app.runs import atomic_write, check_writable, resolve_device
    from maml_rl.app.runs.lock import writer_of
    from maml_rl.samplers import MultiTaskSampler, usable_cpus

__all__ = ["class_table", "evaluation_options", "main", "parse_args", "summary_table"]


def evaluation_options() -> dict:
    """``{flag: (declaration, algorithms that take it)}`` over the registry's learners."""
    options: dict = {}
    for name, learner in METALEARNERS.items():
        for option in learner.evaluation_options:
            options.setdefault(option.key, (option, []))[1].append(name)
    return options


def learner_options(args: argparse.Namespace, algorithm: str) -> dict:
    """The config's learner's evaluation options, by keyword (their defaults where not given); a flag that only
    other learners take is refused, and a value is checked by its declaration."""
    declared = {option.key: option for option in METALEARNERS[algorithm].evaluation_options}
    values = {}
    for key, (option, owners) in evaluation_options().items():
        given = getattr(args, key.replace("-", "_"))
        if key not in declared:
            if given is not None:
                raise ConfigError(f"--{key} is an evaluation option of {' and '.join(owners)}, not of this "
                                  f"config's algorithm {algorithm}: leave it out")
            continue
        option = declared[key]
        if given is None:
            values[option.argument] = option.default
            continue
        try:
            values[option.argument] = option.check.convert(given)
        except InvalidValue:
            raise ConfigError(f"--{key} must be {option.expected}, got {given!r}") from None
    return values


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
    evaluation.add_argument("--fast-batch-size", type=int, default=None,
        help="episodes per task per step (default: the config's fast-batch-size)")
    evaluation.add_argument("--split", choices=("train", "test"), default=None,
        help="for envs with train/test task splits (Meta-World): the tasks to evaluate on (default: test)")
    # Each learner's own options (MetaLearner.evaluation_options), named with the algorithms that take them.
    for key, (option, owners) in evaluation_options().items():
        default = "" if option.default is None else f"; default {option.default}"
        kind = dict(action="store_const", const=True) if option.type is bool else dict(type=option.type)
        evaluation.add_argument(f"--{key}", **kind, default=None, help=f"{', '.join(owners)}: {option.help}{default}")
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
    for name in ("meta_batch_size", "num_batches", "fast_batch_size"):
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
    args.policy_given = args.policy is not None
    args.policy = args.policy or str(folder / "policy.th")
    args.output = args.output or str(folder / "results.npz")
    return args


def main(argv: list[str] | None = None) -> dict[str, np.ndarray]:
    args = parse_args(argv)

    # Everything is checked before any work starts.
    config = load_config(args.config)
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot needs matplotlib: pip install -e \".[plot]\" (or pip install matplotlib)") from None
    if not Path(args.policy).is_file():
        if args.policy_given:
            raise ConfigError(f"--policy {args.policy}: no such file")
        raise ConfigError(f"no policy to evaluate: there is no policy.th beside {args.config}. Evaluate a trained run "
                          f"(python test.py --config RUN/config.json; train one with python train.py --config "
                          f"{args.config}), or give the policy file with --policy")
    check_writable(args.output, "--output", folder=False)
    if args.plot is not None:
        check_writable(args.plot, "--plot", folder=False)
    check_architecture(config, args.config, args.policy)
    policy_file = read_policy_file(args.policy)  # read once: the bytes evaluated are the bytes recorded
    state_dict = policy_file.state_dict
    writer = writer_of(Path(args.policy).parent)
    origin, warning = policy_origin(args.policy, policy_file, being_written=writer is not None)
    if warning:
        print(warning, file=sys.stderr)
    if "unfinished" in describe_origin(origin):
        print(f"note: {args.policy} is from iteration {origin['iteration']} of {origin['num-batches']}: "
              "its run is not finished", file=sys.stderr)
    if writer is not None:
        print(f"note: {Path(args.policy).parent} is being written by a running train.py"
              f"{f' (process {writer})' if writer else ''}: this evaluates {Path(args.policy).name} as it is "
              "now (the run's own files are only read)", file=sys.stderr)
    device = resolve_device(args.device)
    env = build_env(config)
    env_kwargs = evaluation_env_kwargs(config, env, args.split)
    seed = args.seed if args.seed is not None else (config["seed"] or 0) + 1
    meta_batch_size = args.meta_batch_size or config["meta-batch-size"]
    batch_size = args.fast_batch_size or config["fast-batch-size"]

    policy = make_policy(config, env)
    learner_class = METALEARNERS[config["algorithm"]]
    options = learner_options(args, config["algorithm"])
    protocol = learner_class.evaluation_protocol(config, eval_actions=args.eval_actions, batch_size=batch_size,
                                                 **options)
    try:
        policy.load_state_dict(state_dict)
    except (RuntimeError, KeyError) as exc:
        raise ConfigError(f"--policy {args.policy} does not fit the policy of {args.config}: {exc}") from None
    policy.to(device)
    learner = make_metalearner({**config, "seed": seed}, policy, device)  # evaluates only: no update, no draw
    if type(learner).evaluate is MetaLearner.evaluate:
        raise ConfigError(f"{type(learner).__name__} (algorithm: {config['algorithm']}) defines no evaluate(): "
                          "test.py adapts by each learner's own protocol; give the class an evaluate() returning "
                          "maml_rl.metalearners.base.Evaluation (docs/training.md, \"Other meta-learners\")")
    listed = listed_tasks(config, env, env_kwargs) if args.all_tasks else None
    env.close()

    tasks, per_step, per_step_success = [], [], []  # per batch: [K+1, M, B] returns (and successes)
    with MultiTaskSampler(config["env-name"], env_kwargs, batch_size, policy, seed=seed,
                          **learner_class.sampler_options(config), **args.sampler_options) as sampler:
        if sampler.backend == "ray":
            print(f"sampling on {sampler.describe_backend()}", file=sys.stderr)
        if listed is not None:
            batches = [listed[i:i + meta_batch_size] for i in range(0, len(listed), meta_batch_size)]
        else:
            batches = [None] * args.num_batches
        for batch_tasks in tqdm(batches, desc="evaluation", unit="batch", dynamic_ncols=True):
            batch_tasks = batch_tasks or sampler.sample_tasks(meta_batch_size)
            tasks.extend(batch_tasks)
            # The learner's own protocol: gradient steps (stages: before each step, after the last) or an
            # RL² trial (stages: its episodes, then the evaluation episodes).
            evaluation = learner.evaluate(sampler, batch_tasks, config["gamma"], device, actions=args.eval_actions,
                                          **options)
            per_step.append(evaluation.returns)
            if evaluation.success is not None:
                per_step_success.append(evaluation.success)

    returns = np.concatenate(per_step, axis=1)  # [K+1, N*M, B]
    task_array = np.empty(len(tasks), dtype=object)
    task_array[:] = tasks
    results = {
        "tasks": task_array,
        "train_returns": returns[0],
        "valid_returns": returns[-1],
        "returns_per_step": returns.mean(axis=2),
        **task_arrays(tasks),
    }
    if per_step_success:
        success = np.concatenate(per_step_success, axis=1)  # [K+1, N*M, B]
        results.update(train_success=success[0], valid_success=success[-1], success_per_step=success.mean(axis=2))
    # How this was evaluated, so that report.py pools only like with like (maml_rl/app/results.py).
    settings = {
        **protocol.settings, "fast-batch-size": batch_size,
        "eval-actions": args.eval_actions, "split": env_kwargs.get("split"), "all-tasks": listed is not None,
        "meta-batch-size": meta_batch_size, "num-batches": None if listed is not None else args.num_batches,
    }
    results[RECORD_KEY] = record_array(policy=origin, settings=settings, seed=seed,
                                       config=str(Path(args.config).resolve()), tasks=len(tasks))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.output, lambda f: np.savez(f, **results))

    split = f" of the {env_kwargs['split']} split" if "split" in env_kwargs else ""
    which = f"every task{split} ({len(tasks)}, seed {seed})" if listed is not None else \
        f"{len(tasks)} new task{'s' if len(tasks) != 1 else ''}{split} (seed {seed})"
    policy_name = f"{args.policy}{describe_origin(origin)}"
    print(f"{config['env-name']}: {policy_name}{protocol.label} on {which}, {protocol.description}")
    notes = None
    if protocol.first is not None:
        notes = {0: protocol.first, len(results["returns_per_step"]) - 1: protocol.last}
    print(summary_table(results["returns_per_step"], results.get("success_per_step"), notes))
    per_class = class_table(tasks, results["returns_per_step"], results.get("success_per_step"), protocol.span)
    if per_class:
        print(per_class)
    print(f"results written to {args.output}")
    if args.plot is not None:
        plot_returns(results["returns_per_step"], args.plot, f"{config['env-name']} ({len(tasks)} tasks)")
        print(f"plot written to {args.plot}")
    return results


if __name__ == "__main__":
    run_script(main, on_policy_error=EVALUATION_DIVERGED)
