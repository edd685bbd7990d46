"""Where in its trial does an RL² policy adapt: across episodes, or inside the first one?

Rolls out one trial of ``--episodes`` episodes on every test goal of a Meta-World run (sampled actions, as
the trial of test.py's protocol), twice on the same env seeds: once with the reward in the policy's input as
trained (``reward-scale`` of the config), once with that input zeroed (``reward_scale=0``), so that the
policy cannot tell from the reward where the hidden goal is. Per episode of the trial it prints the success
rate, the median step of the first success among the episodes that succeed, and the mean reward in the
first and the last 100 steps. A policy that locates the goal from the reward inside an episode shows it as
a success rate the blind trial does not reach and a reward that grows within the episode; one that adapts
across episodes shows it as success or an earlier first success in later episodes.

    python tools/rl2_trial_profile.py docs/runs/metaworld-ml1/rl2-recipe/reach/seed-1 --seed 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from maml_rl.app.evaluation import evaluation_env_kwargs, listed_tasks, read_policy  # noqa: E402
from maml_rl.app.config_files import build_env, load_config  # noqa: E402
from maml_rl.metalearners import make_policy  # noqa: E402
from maml_rl.samplers import MultiTaskSampler  # noqa: E402


def episode_profile(batch, episodes: int) -> list[dict]:
    """Per episode index of one task's trials: success flags, first-success steps and rewards per step."""
    batch.episode_success()  # the trials' own check: a clear error where the env reports no success
    rewards = batch.rewards.cpu().numpy()  # [T, B]
    success = batch.infos["success"].cpu().numpy() != 0
    index = batch.episode_index.cpu().numpy()
    mask = batch.mask.cpu().numpy() > 0
    out = []
    for k in range(episodes):
        rows = []
        for b in range(rewards.shape[1]):
            steps = np.flatnonzero(mask[:, b] & (index[:, b] == k))
            hits = np.flatnonzero(success[steps, b])
            rows.append({"rewards": rewards[steps, b], "first": int(hits[0]) if len(hits) else None})
        out.append(rows)
    return out


def early_reward(rows: list[dict]) -> float:
    """Mean over the rows (episodes) of the reward per step in their first 100 steps."""
    return float(np.mean([r["rewards"][:100].mean() for r in rows]))


def summarise(profiles: list, episodes: int) -> list[tuple]:
    """Per episode index, pooled over goals: (index, success rate, median first-success step,
    reward per step in steps 0-99, reward per step in the last 100 steps)."""
    lines = []
    for k in range(episodes):
        rows = [row for task in profiles for row in task[k]]
        firsts = [r["first"] for r in rows if r["first"] is not None]
        early = early_reward(rows)
        late = np.mean([r["rewards"][-100:].mean() for r in rows])
        lines.append((k, len(firsts) / len(rows), np.median(firsts) if firsts else float("nan"), early, late))
    return lines


def early_gain(profiles: list, episodes: int) -> tuple[float, float]:
    """Mean reward of the first 100 steps, last episode minus first, per goal: its mean and standard error."""
    per_goal = [early_reward(task[episodes - 1]) - early_reward(task[0]) for task in profiles]
    return float(np.mean(per_goal)), float(np.std(per_goal, ddof=1) / np.sqrt(len(per_goal)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run folder with config.json and policy.th (an RL² Meta-World run)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per trial (default: the config's)")
    parser.add_argument("--seed", type=int, default=2, help="the sampler's seed (default 2, test.py's for seed 1)")
    parser.add_argument("--split", default="test", choices=("train", "test"))
    args = parser.parse_args(argv)

    run = Path(args.run)
    config = load_config(str(run / "config.json"))
    if config["algorithm"] != "rl2-ppo":
        sys.exit(f"{run}: algorithm {config['algorithm']!r}; this profiles RL² (rl2-ppo) runs")
    env = build_env(config)
    env_kwargs = evaluation_env_kwargs(config, env, args.split)
    tasks = listed_tasks(config, env, env_kwargs)
    policy = make_policy(config, env)
    env.close()
    policy.load_state_dict(read_policy(str(run / "policy.th")))
    episodes = args.episodes or config["episodes-per-trial"]
    scale = config["reward-scale"]

    print(f"{run}: {len(tasks)} {args.split} goals, one trial of {episodes} episodes each (sampled actions), "
          f"seed {args.seed}")
    for name, reward_scale in (("reward in the input", scale), ("reward input zeroed", 0.0)):
        # A fresh sampler per condition: the same env seeds and the same first draws in both.
        with MultiTaskSampler(config["env-name"], env_kwargs, 1, policy, seed=args.seed, num_workers=0) as sampler:
            batches = sampler.rollout_trials(tasks, episodes, reward_scale=reward_scale, inputs=config["trial-inputs"])
        profiles = [episode_profile(b, episodes) for b in batches]
        print(f"\n{name} (reward-scale {reward_scale}):")
        print("episode | success | median first-success step | mean reward, steps 0-99 | last 100 steps")
        for k, rate, first, early, late in summarise(profiles, episodes):
            print(f"{k:7d} | {100 * rate:6.1f}% | {first:26.1f} | {early:23.3f} | {late:14.3f}")
        if episodes > 1 and len(profiles) > 1:
            gain, error = early_gain(profiles, episodes)
            print(f"reward in steps 0-99, episode {episodes - 1} minus episode 0, per goal: {gain:+.3f} ± {error:.3f}")


if __name__ == "__main__":
    main()
