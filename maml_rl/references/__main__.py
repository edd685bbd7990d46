"""``python -m maml_rl.references {bandit,mdp} ...``: the references on seeded held-out tasks, printed and
written as ``--output``.json (summary) and .npz (per-task arrays).

``bandit --on RESULTS.npz`` and ``mdp --on RESULTS.npz`` play them on the tasks of a trial policy's evaluation
by test.py instead, and print the policy's regret or returns beside theirs."""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from maml_rl.references.bandits import BANDIT_AGENTS
from maml_rl.references.evaluation import (
    bandit_references,
    mdp_references,
    save,
    summarise_bandits,
    summarise_mdps,
)
from maml_rl.references.mdps import MDP_AGENTS
from maml_rl.references.policy_results import compare_bandits, compare_mdps, read_bandit_results, read_mdp_results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m maml_rl.references", description=__doc__)
    commands = parser.add_subparsers(dest="benchmark", required=True)
    bandit = commands.add_parser("bandit", help="Bernoulli bandits (BernoulliBanditEnv): UCB1, Thompson sampling")
    bandit.add_argument("--arms", type=int, default=None, help="(default: 5, or --on's)")
    bandit.add_argument("--pulls", type=int, default=None, help="(default: 100, or --on's)")
    bandit.add_argument("--on", metavar="RESULTS", default=None,
                        help="play the tasks of this results.npz (test.py's, of a trial policy on Bernoulli "
                             "bandits) and print its regret beside the references'")
    bandit.add_argument("--algorithms", nargs="+", default=list(BANDIT_AGENTS), choices=list(BANDIT_AGENTS))
    mdp = commands.add_parser("mdp", help="tabular MDPs (TabularMDPEnv): PSRL")
    mdp.add_argument("--states", type=int, default=None, help="(default: 10, or --on's)")
    mdp.add_argument("--actions", type=int, default=None, help="(default: 5, or --on's)")
    mdp.add_argument("--horizon", type=int, default=None,
                     help="steps of an episode (default: 10, or the max_episode_steps of --on's run config)")
    mdp.add_argument("--episodes", type=int, default=None, help="episodes of a trial (default: 10, or --on's)")
    mdp.add_argument("--on", metavar="RESULTS", default=None,
                     help="play the tasks of this results.npz (test.py's, of a trial policy on tabular MDPs) and "
                          "print its returns beside the references'")
    mdp.add_argument("--algorithms", nargs="+", default=list(MDP_AGENTS), choices=list(MDP_AGENTS))
    for command in (bandit, mdp):
        command.add_argument("--tasks", type=int, default=None, help="held-out tasks (default: 500, or --on's)")
        command.add_argument("--seed", type=int, default=100, help="seeds the tasks, rewards and algorithms")
        command.add_argument("--output", default=None, help="write OUTPUT.json and OUTPUT.npz")
    args = parser.parse_args(argv)
    args.policy = None
    if args.on is not None:
        try:
            args.policy = (read_bandit_results if args.benchmark == "bandit" else read_mdp_results)(args.on)
        except ValueError as exc:
            parser.error(str(exc))
        _take_from_results(parser, args)
    defaults = {"arms": 5, "pulls": 100, "tasks": 500, "states": 10, "actions": 5, "horizon": 10, "episodes": 10}
    for key, value in defaults.items():
        if getattr(args, key, 0) is None:
            setattr(args, key, value)
    return args


def _config_horizon(config: str | None) -> int | None:
    """The ``max_episode_steps`` in the ``env-kwargs`` of a run's config.json, if it is there to read."""
    try:
        return int(json.loads(Path(config).read_text())["env-kwargs"]["max_episode_steps"])
    except (TypeError, OSError, ValueError, KeyError):
        return None


def _take_from_results(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The settings that ``--on``'s results fix; given ones must agree."""
    policy = args.policy
    if args.benchmark == "bandit":
        tasks, arms = policy.means.shape
        fixed = {"tasks": tasks, "arms": arms, "pulls": policy.rewards.shape[1]}
    else:
        tasks, states, actions, _ = policy.transitions.shape
        fixed = {"tasks": tasks, "states": states, "actions": actions, "episodes": policy.returns.shape[1]}
        horizon = _config_horizon(policy.config)
        if horizon is None and args.horizon is None:
            parser.error(f"--on {args.on}: its run config ({policy.config}) is not there to give the episodes' "
                         "length: give --horizon (the run's env-kwargs max_episode_steps).")
        if horizon is not None:
            fixed["horizon"] = horizon
    wrong = [f"--{key} {getattr(args, key)} (it has {value})" for key, value in fixed.items()
             if getattr(args, key) is not None and getattr(args, key) != value]
    if wrong:
        parser.error(f"--on {args.on} fixes the {args.benchmark}: leave out {', '.join(wrong)}.")
    for key, value in fixed.items():
        setattr(args, key, value)


def _fmt(stat: dict[str, Any]) -> str:
    return f"{stat['mean']:8.2f}" + (f" ± {stat['sem']:.2f}" if stat["sem"] is not None else "")


def _marks(pulls: int) -> list[int]:
    return sorted({m for m in (1, 10, pulls // 2, pulls) if 1 <= m <= pulls})


def print_bandits(summary: dict[str, Any], pulls: int) -> None:
    marks = _marks(pulls)
    print(f"{'algorithm':10} {'total reward':>16} {'regret':>16}  " + "  ".join(f"R({m})" for m in marks))
    for name, s in summary.items():
        curve = s["cumulative_regret"]
        print(f"{name:10} {_fmt(s['total_reward']):>16} {_fmt(s['regret']):>16}  "
              + "  ".join(f"{curve[m - 1]:.2f}" for m in marks))


def _print_against(against: dict[str, Any], measure: str, ratio: str) -> None:
    """The policy's ``measure`` over each reference's, and their paired difference over the same tasks."""
    for name, a in against.items():
        d = a["difference"]
        sem = f" ± {d['sem']:.2f}" if d["sem"] is not None else ""
        print(f"  policy / {name} {measure}: {a[ratio]:.3f}   difference {d['mean']:+.2f}{sem}")


def print_policy(policy: dict[str, Any], pulls: int) -> None:
    curve = policy["cumulative_realised_regret"]
    print(f"{'policy':10} {_fmt(policy['total_reward']):>16} {_fmt(policy['realised_regret']):>16}  "
          + "  ".join(f"{curve[m - 1]:.2f}" for m in _marks(pulls)))
    print(f"  (the policy's regret is the realised one; {policy['trials_per_task']} trials a task, {policy['file']})")
    _print_against(policy["against"], "regret", "regret_ratio")


def print_mdp_policy(policy: dict[str, Any]) -> None:
    episodes = " ".join(f"{r:.2f}" for r in policy["return_per_episode"])
    print(f"{'policy':8} total {_fmt(policy['total_return'])}  per episode: {episodes}")
    print(f"  ({policy['trials_per_task']} trials a task, {policy['file']})")
    _print_against(policy["against"], "total return", "return_ratio")


def print_mdps(summary: dict[str, Any]) -> None:
    optimal = summary["optimal"]["value_per_episode"]["mean"]
    print(f"optimal expected return of an episode (mean over tasks): {optimal:.3f}")
    for name, s in summary.items():
        if name != "optimal":
            episodes = " ".join(f"{r:.2f}" for r in s["return_per_episode"])
            print(f"{name:8} total {_fmt(s['total_return'])}  per episode: {episodes}")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    if args.benchmark == "bandit":
        settings = {"arms": args.arms, "pulls": args.pulls}
        means = None if args.policy is None else args.policy.means
        results = bandit_references(args.arms, args.pulls, args.tasks, args.seed, args.algorithms, means)
        summary = summarise_bandits(results)
        print_bandits(summary, args.pulls)
        if args.policy is not None:
            settings["on"] = args.on
            summary["policy"] = compare_bandits(args.policy, results)
            print_policy(summary["policy"], args.pulls)
    else:
        settings = {"states": args.states, "actions": args.actions, "horizon": args.horizon,
                    "episodes": args.episodes}
        tasks = None if args.policy is None else args.policy.tasks
        results = mdp_references(args.states, args.actions, args.horizon, args.episodes, args.tasks, args.seed,
                                 args.algorithms, tasks)
        summary = summarise_mdps(results)
        print_mdps(summary)
        if args.policy is not None:
            settings["on"] = args.on
            summary["policy"] = compare_mdps(args.policy, results)
            print_mdp_policy(summary["policy"])
    seconds = time.perf_counter() - start
    print(f"{args.tasks} tasks, seed {args.seed}, {seconds:.1f} s")
    if args.output:
        argv_text = shlex.join(sys.argv[1:] if argv is None else list(argv))
        header = {"benchmark": args.benchmark, "command": f"python -m maml_rl.references {argv_text}",
                  "settings": settings, "tasks": args.tasks, "seed": args.seed,
                  "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": platform.platform(),
                  "seconds": round(seconds, 1)}
        for path in save(args.output, header, summary, results):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
