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
import shlex
import sys
from pathlib import Path

from maml_rl.app.startup import quiet_interrupt

with quiet_interrupt("train.py"):
    from maml_rl.app.command_line import TRAINING_DIVERGED, add_sampler_arguments, run_script, sampler_options
    from maml_rl.app.config_files import parse_override
    from maml_rl.samplers import usable_cpus
    from maml_rl.app.multi_seed import train_seeds_on_ray
    from maml_rl.app.training import train_run

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "maml" / "2d-navigation.yaml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Meta-reinforcement learning: meta-training with the config's algorithm ("
                    "docs/training.md lists every algorithm and its keys).",
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
        help="several runs of the config, each in <output-folder>/seed-<SEED>: one after another, or with "
             "--backend ray side by side on the cluster, each seed on --ray-cpus-per-actor CPUs (default 1) "
             "(with --resume: each continues; report them with report.py)")
    parser.add_argument("--seed-chunk", type=int, default=10, metavar="ITERATIONS",
        help="with --seeds on Ray: iterations per Ray task; each task's run files come back to this machine "
             "at its end (default: 10)")
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
    for seed in [args.seed] if args.seeds is None else args.seeds:
        if seed is not None and not 0 <= seed < 2**63:
            parser.error(f"a seed must be in [0, 2**63), got {seed}")
    if args.num_batches is not None and args.num_batches < 1:
        parser.error(f"--num-batches must be >= 1, got {args.num_batches}")
    if args.seed_chunk < 1:
        parser.error(f"--seed-chunk must be >= 1, got {args.seed_chunk}")
    if args.seeds is not None and args.ray_actors is not None:
        parser.error("--ray-actors does not apply to --seeds on Ray: each seed takes --ray-cpus-per-actor CPUs")
    args.sampler_options = sampler_options(parser, args)
    args.output_folder_given = args.output_folder is not None
    if args.output_folder is None:
        name = Path(args.config).stem if args.config is not None else DEFAULT_CONFIG.stem
        args.output_folder = os.path.join("runs", name)
    return args


def main(argv: list[str] | None = None) -> Path:
    args = parse_args(argv)
    if args.seeds is None:
        return train(args)
    if args.backend == "ray":
        # Side by side: each seed a chain of Ray tasks (maml_rl.app.multi_seed), its sampler local in the task.
        return train_seeds_on_ray(args.output_folder, args.config, args.seeds, run_overrides(args),
                                  resume=args.resume, overwrite=args.overwrite, device=args.device,
                                  num_workers=args.num_workers, ray_address=args.ray_address,
                                  cpus_per_seed=args.ray_cpus_per_actor, chunk=args.seed_chunk,
                                  default_config=DEFAULT_CONFIG, step_timeout=args.sampler_options["step_timeout"])
    parent = Path(args.output_folder)
    for number, seed in enumerate(args.seeds, start=1):
        print(f"seed {seed} ({number} of {len(args.seeds)}): {parent / f'seed-{seed}'}", file=sys.stderr)
        args.seed, args.output_folder = seed, str(parent / f"seed-{seed}")
        train(args)
    return parent


def train(args: argparse.Namespace) -> Path:
    """One run: ``args.output_folder`` with ``args.seed``."""
    return train_run(args.output_folder, args.config, run_overrides(args), seed=args.seed, resume=args.resume,
                     overwrite=args.overwrite, device=args.device, sampler_options=args.sampler_options,
                     default_config=DEFAULT_CONFIG)


def run_overrides(args: argparse.Namespace) -> list:
    overrides = [parse_override(text) for text in args.overrides]
    if args.num_batches is not None:
        overrides.append(("num-batches", args.num_batches))
    return overrides


def continue_command(argv: list[str], program: str = "train.py") -> str:
    """The command that continues what ``argv`` started: the same options with ``--resume``, without
    ``--overwrite`` (which would start it over again), and with the ``--output-folder`` it used."""
    args = parse_args(argv)
    # --overwrite takes no value, and argparse accepts it abbreviated down to --ov.
    kept = [token for token in argv if not (token.startswith("--ov") and "--overwrite".startswith(token))]
    if not args.output_folder_given:
        kept += ["--output-folder", args.output_folder]
    if not args.resume:
        kept.append("--resume")
    return shlex.join(["python", program, *kept])


def _on_stop() -> str:
    try:
        return f": continue with --resume:\n  {continue_command(sys.argv[1:], sys.argv[0])}"
    except SystemExit:  # options argparse refused: main() never started a run
        return ""


if __name__ == "__main__":
    run_script(main, on_stop=_on_stop, on_policy_error=TRAINING_DIVERGED)
