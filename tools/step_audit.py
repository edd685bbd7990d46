"""Does a run's meta-update improve the true objective, or only its own estimate of it?

From a run's checkpoint (``checkpoint.pt``), repeat independent meta-updates,
each from the checkpoint's parameters and optimiser state, on fresh batches of
tasks of ``--meta-batch-size`` tasks, and measure every update's effect on the
return after adaptation on one fixed evaluation set (the same tasks and the same
environment seeds before and after the update: common random numbers, so the
difference is not buried under the noise of sampling). A learner whose updates
improve the surrogate they optimise but lower the evaluated return on average is
following a biased or too noisy estimate of the meta-gradient, not a defect in
the rollouts.

    python tools/step_audit.py runs/maml/seed-1/checkpoint.pt --updates 8 --meta-batch-size 40 160
    python tools/step_audit.py runs/maml/seed-1/checkpoint.pt --set max-kl=0.0025   # a smaller step from there

Prints one line per update and a summary per meta-batch size: mean change of the
evaluated return with its standard error, and how often it was positive.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
from gymnasium import spaces

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from maml_rl.data.baseline import LinearFeatureBaseline  # noqa: E402
from maml_rl.app.config_files import apply_overrides, build_env, parse_override, validate_config  # noqa: E402
from maml_rl.metalearners import make_metalearner, make_policy, sample_adapt_sample  # noqa: E402
from maml_rl.app.runs.checkpoints import read_checkpoint  # noqa: E402
from maml_rl.data.stats import episode_stats  # noqa: E402
from maml_rl.samplers import MultiTaskSampler  # noqa: E402


def load_run(checkpoint: Path, overrides=()):
    """The checkpoint's contents, its config (with ``overrides``, ``(key, value)`` pairs, set), and its policy,
    baseline and meta-learner restored from it."""
    state = read_checkpoint(checkpoint)
    config = validate_config(apply_overrides(state["config"], overrides), source=str(checkpoint))
    env = build_env(config)
    torch.manual_seed(0)
    policy = make_policy(config, env)
    baseline = LinearFeatureBaseline(spaces.flatdim(env.observation_space))
    env.close()
    learner = make_metalearner(config, policy, "cpu")
    policy.load_state_dict(state["policy"])
    if "baseline" in state:  # older checkpoints; every fit overwrites it anyway
        baseline.load_state_dict(state["baseline"])
    if "metalearner" in state and hasattr(learner, "load_state_dict"):
        learner.load_state_dict(state["metalearner"])
    return state, config, policy, baseline, learner


def evaluated_return(sampler: MultiTaskSampler, learner, config: dict, state: dict, num_tasks: int) -> float:
    """Mean return after adaptation on the evaluation set that ``state`` (a sampler state) draws."""
    sampler.load_state_dict(state)
    tasks = sampler.sample_tasks(num_tasks)
    train, valid = sample_adapt_sample(sampler, tasks, inner_loop=learner.inner_loop, gamma=config["gamma"],
                                  gae_lambda=config["gae-lambda"])
    return episode_stats(train, valid)["return_after"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--updates", type=int, default=8, help="independent updates per meta-batch size")
    parser.add_argument("--meta-batch-size", type=int, nargs="+", default=[40])
    parser.add_argument("--eval-tasks", type=int, default=80, help="tasks of the fixed evaluation set")
    parser.add_argument("--seed", type=int, default=12345, help="seed of the fresh batches and the evaluation set")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        type=parse_override, help="change a setting of the meta-update, e.g. max-kl=0.0025 "
                                                  "(repeatable; the policy's shape must stay the checkpoint's)")
    args = parser.parse_args(argv)

    state, config, policy, baseline, learner = load_run(args.checkpoint, args.overrides)
    start = (copy.deepcopy(policy.state_dict()), copy.deepcopy(baseline.state_dict()),
             copy.deepcopy(learner.state_dict()) if hasattr(learner, "state_dict") else None)

    def restore() -> None:
        policy.load_state_dict(start[0])
        baseline.load_state_dict(start[1])
        if start[2] is not None:
            learner.load_state_dict(copy.deepcopy(start[2]))

    print(f"{args.checkpoint}: iteration {state['iteration']}, {config.get('algorithm', 'maml-trpo')}, "
          f"evaluation on {args.eval_tasks} tasks x {config['fast-batch-size']} episodes"
          + "".join(f", {key}={value}" for key, value in args.overrides), flush=True)
    with MultiTaskSampler(config["env-name"], config["env-kwargs"], config["fast-batch-size"], policy, baseline,
                          seed=args.seed, num_workers=0) as sampler:
        eval_state = copy.deepcopy(sampler.state_dict())
        sampler.sample_tasks(args.eval_tasks)
        train_state = copy.deepcopy(sampler.state_dict())
        train_state["num_rollouts"] += 1_000_000  # episodes of the training batches never reuse the evaluation's seeds
        reference = evaluated_return(sampler, learner, config, eval_state, args.eval_tasks)
        print(f"evaluated return after adaptation at the checkpoint: {reference:.2f}", flush=True)
        for size in args.meta_batch_size:
            changes = []
            for update in range(args.updates):
                restore()
                sampler.load_state_dict(train_state)
                started = time.perf_counter()
                tasks = sampler.sample_tasks(size)
                train, valid = sample_adapt_sample(sampler, tasks, inner_loop=learner.inner_loop, gamma=config["gamma"],
                                              gae_lambda=config["gae-lambda"])
                train_state = copy.deepcopy(sampler.state_dict())
                batch_return = episode_stats(train, valid)["return_after"]
                logs = learner.step(train, valid)
                after = evaluated_return(sampler, learner, config, eval_state, args.eval_tasks)
                changes.append(after - reference)
                shown = {k: round(float(v), 4) for k, v in logs.items()
                         if k in ("loss_before", "loss_after", "kl_after", "outer_kl", "inner_kl", "clip_fraction")}
                print(f"batch {size:4d} update {update}: batch return {batch_return:7.2f}  "
                      f"evaluated change {after - reference:+7.2f}  {shown}  ({time.perf_counter() - started:.0f} s)",
                      flush=True)
            mean = statistics.fmean(changes)
            se = statistics.stdev(changes) / len(changes) ** 0.5 if len(changes) > 1 else 0.0
            print(f"meta-batch {size}: mean evaluated change {mean:+.2f} (s.e. {se:.2f}), "
                  f"positive in {sum(c > 0 for c in changes)}/{len(changes)} updates", flush=True)
        restore()


if __name__ == "__main__":
    main()
