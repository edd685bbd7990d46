"""Meta-train a policy with MAML-TRPO (or the config's ``algorithm``).

    python train.py                                   # 2D navigation into runs/2d-navigation
    python train.py --config configs/maml/halfcheetah-vel.yaml --output-folder runs/cheetah-vel --seed 1
    python train.py --output-folder runs/cheetah-vel --resume              # continue a stopped run
    python train.py --config configs/maml/2d-navigation.yaml --output-folder runs/nav --seeds 1 2 3
                                        # three seeds one after another, in runs/nav/seed-1, seed-2, seed-3
    python train.py --num-batches 2 --set fast-batch-size=5 \\
        --set env-kwargs.max_episode_steps=20 --output-folder /tmp/smoke  # quick smoke run

Every iteration samples ``meta-batch-size`` tasks, collects ``fast-batch-size``
episodes per task before each of the ``num-steps`` inner gradient steps and
after the last one, and takes one TRPO step on the meta-parameters. The
output folder receives:

    config.json     the resolved configuration, seed included
    policy.th       the policy's state_dict, saved every iteration
    checkpoint.pt   the complete state of the run, saved atomically every iteration
    metrics.jsonl   one JSON line of metrics per iteration
    tensorboard/    the same metrics, when tensorboard is installed

A run stopped at any moment and continued with ``--resume`` (optionally with a
larger ``--num-batches``) ends with the same policy as a run never stopped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from gymnasium import spaces
from tqdm import tqdm

from maml_rl.baseline import LinearFeatureBaseline
from maml_rl.command_line import add_sampler_arguments, run_script, sampler_options
from maml_rl.config import build_env, parse_override
from maml_rl.metalearners import make_metalearner, make_policy
from maml_rl.runs import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    POLICY_FILE,
    MetricsLogger,
    atomic_save,
    atomic_write_json,
    check_writable,
    episode_stats,
    load_checkpoint,
    prepare_output_folder,
    resolve_device,
    resolve_run_config,
    save_checkpoint,
    trial_stats,
)
from maml_rl.samplers import MultiTaskSampler, usable_cpus
from maml_rl.utils.memory import keep_freed_memory

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "maml" / "2d-navigation.yaml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Meta-reinforcement learning: meta-training with MAML-TRPO, ProMP or RL²-PPO (the config's "
                    "algorithm).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[0],
    )
    parser.add_argument("--config", type=str, default=None,
        help=f"YAML configuration (default: configs/maml/{DEFAULT_CONFIG.name}; "
             "with --resume: the run's own config.json)")
    parser.add_argument("--output-folder", type=str, default=None,
        help="folder of the run (default: runs/<name of the config file>)")
    parser.add_argument("--seed", type=int, default=None,
        help="seed of the run (default: the config's seed, else a random one, recorded in config.json)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, metavar="SEED",
        help="several runs of the config, one after another, each in <output-folder>/seed-<SEED> "
             "(with --resume: each continues; report them with report.py)")
    add_sampler_arguments(parser, usable_cpus())
    parser.add_argument("--device", type=str, default="cpu",
        help="device of the policy and the meta-learner: cpu or cuda (default: cpu)")
    parser.add_argument("--resume", action="store_true",
        help="continue the run in --output-folder from its last checkpoint")
    parser.add_argument("--overwrite", action="store_true",
        help="start again in an --output-folder that already holds a run")
    overrides = parser.add_argument_group("overrides of the configuration")
    overrides.add_argument("--num-batches", type=int, default=None,
        help="number of meta-updates (e.g. 2 for a smoke run; with --resume, to train longer)")
    overrides.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="set any configuration key, value read as YAML; repeatable "
             "(e.g. --set fast-batch-size=5 --set env-kwargs.max_episode_steps=20)")
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seed is not None:
        parser.error("give --seed or --seeds, not both")
    if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds {' '.join(map(str, args.seeds))}: each seed once")
    args.sampler_options = sampler_options(parser, args)
    if args.output_folder is None:
        name = Path(args.config).stem if args.config is not None else DEFAULT_CONFIG.stem
        args.output_folder = os.path.join("runs", name)
    return args


def main(argv: list[str] | None = None) -> Path:
    args = parse_args(argv)
    if args.seeds is None:
        return train(args)
    parent = Path(args.output_folder)
    for number, seed in enumerate(args.seeds, start=1):
        print(f"seed {seed} ({number} of {len(args.seeds)}): {parent / f'seed-{seed}'}", file=sys.stderr)
        args.seed, args.output_folder = seed, str(parent / f"seed-{seed}")
        train(args)
    return parent


def train(args: argparse.Namespace) -> Path:
    """One run: ``args.output_folder`` with ``args.seed``."""
    output = Path(args.output_folder)

    # Everything is checked before any work starts or any file is written.
    check_writable(output, "--output-folder", folder=True)
    if args.resume and not (output / CONFIG_FILE).exists() and not (output / CHECKPOINT_FILE).exists():
        print(f"{output}: no run to resume yet, starting one", file=sys.stderr)
    overrides = [parse_override(text) for text in args.overrides]
    if args.num_batches is not None:
        overrides.append(("num-batches", args.num_batches))
    config, has_checkpoint = resolve_run_config(
        output, args.config, overrides, default_config=DEFAULT_CONFIG,
        seed=args.seed, resume=args.resume, overwrite=args.overwrite,
    )
    device = resolve_device(args.device)
    env = build_env(config)

    prepare_output_folder(output, fresh=not has_checkpoint)
    atomic_write_json(config, output / CONFIG_FILE)

    keep_freed_memory()
    torch.manual_seed(config["seed"])
    policy = make_policy(config, env)
    baseline = LinearFeatureBaseline(spaces.flatdim(env.observation_space)).to(device)
    env.close()
    metalearner = make_metalearner(config, policy, device)
    sampler = MultiTaskSampler(config["env-name"], config["env-kwargs"], config["fast-batch-size"], policy, baseline,
                               seed=config["seed"], **args.sampler_options)

    with sampler:
        if sampler.backend == "ray":
            print(f"sampling on {sampler.describe_backend()}", file=sys.stderr)
        start, counters = 0, {"total_env_steps": 0}
        if has_checkpoint:
            start, counters = load_checkpoint(output / CHECKPOINT_FILE, config=config, policy=policy,
                                              baseline=baseline, sampler=sampler, metalearner=metalearner)
        num_batches = config["num-batches"]
        progress = tqdm(range(start, num_batches), initial=start, total=num_batches,
                        desc=config["env-name"], unit="batch", dynamic_ncols=True)
        with MetricsLogger(output, start_iteration=start) as logger, progress:
            for iteration in progress:
                # Inner loop: episodes before each adaptation step (train) and after the last one (valid).
                start_time = time.perf_counter()
                tasks = sampler.sample_tasks(config["meta-batch-size"])
                if getattr(metalearner, "recurrent", False):
                    # RL²: trials of several episodes per task, the policy adapting in its state.
                    trials = metalearner.sample(sampler, tasks, config["gamma"], device)
                    sampled_time = time.perf_counter()
                    logs = metalearner.step(trials)
                    stats = trial_stats(trials)
                else:
                    train_episodes, valid_episodes = sampler.sample(
                        tasks, inner_loop=metalearner.inner_loop,
                        gamma=config["gamma"], gae_lambda=config["gae-lambda"], device=device,
                    )
                    sampled_time = time.perf_counter()
                    # Outer loop: one TRPO step on the loss of the adapted policies.
                    logs = metalearner.step(train_episodes, valid_episodes)
                    stats = episode_stats(train_episodes, valid_episodes)
                optimized_time = time.perf_counter()

                counters["total_env_steps"] += stats["env_steps"]
                logger.log({
                    "iteration": iteration,
                    **stats,
                    "total_env_steps": counters["total_env_steps"],
                    **logs,
                    "time_sampling": sampled_time - start_time,
                    "time_optimization": optimized_time - sampled_time,
                })
                postfix = {"before": f"{stats['return_before']:.2f}", "after": f"{stats['return_after']:.2f}"}
                if "success_before" in stats:
                    postfix["success"] = f"{stats['success_before']:.0%}->{stats['success_after']:.0%}"
                progress.set_postfix(postfix)

                # The checkpoint comes last: once it is written, the iteration is done.
                atomic_save({name: value.detach().cpu() for name, value in policy.state_dict().items()},
                            output / POLICY_FILE)
                save_checkpoint(output / CHECKPOINT_FILE, iteration=iteration + 1, config=config, policy=policy,
                                baseline=baseline, sampler=sampler, counters=counters, metalearner=metalearner)

    if start >= num_batches:
        print(f"{output}: the run already has {start} of {num_batches} iterations; nothing to do", file=sys.stderr)
    return output


if __name__ == "__main__":
    run_script(main, on_stop=": continue with --resume (same --output-folder)")
