"""Time one MAML-TRPO meta-update at the HalfCheetahVel default size.

Builds random but valid episodes (actions sampled from the policy, random
rewards, advantages from a fitted linear baseline) and times ``step()``.
``wall`` is elapsed time, ``cpu`` the process CPU time summed over threads
(less sensitive to other load on a shared machine).

Large temporaries make glibc map and unmap memory on every operation; the
script keeps them instead, as train.py does (``keep_freed_memory``), unless
given ``--default-malloc``.

The second-order step is timed twice: with the policy's closed-form Hessian
products (the default) and with ``curvature="autograd"``; the last line gives
the ratio of their best step times, measured in the same run.

    python benchmarks/maml_step_time.py --threads 2 --repeats 3
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.data.episodes import BatchEpisodes
from maml_rl.metalearners import MAMLTRPO
from maml_rl.policies import NormalMLPPolicy
from maml_rl.utils.memory import keep_freed_memory


def make_episodes(policy: NormalMLPPolicy, num_tasks: int, batch_size: int, horizon: int) -> list[BatchEpisodes]:
    baseline = LinearFeatureBaseline(policy.input_size)
    out = []
    for task in range(num_tasks):
        observations = torch.randn(horizon, batch_size, policy.input_size)
        with torch.no_grad():
            actions = policy(observations).sample()
        rewards = torch.randn(horizon, batch_size)
        lengths = torch.full((batch_size,), horizon, dtype=torch.int64)
        episodes = BatchEpisodes(observations, actions, rewards, lengths, task=task, gamma=0.99)
        baseline.fit(episodes)
        episodes.compute_advantages(baseline, gae_lambda=1.0, normalize=True)
        out.append(episodes)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=100)
    parser.add_argument("--obs-dim", type=int, default=20)
    parser.add_argument("--act-dim", type=int, default=6)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--nonlinearity", default="tanh")
    parser.add_argument("--num-steps", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--modes", nargs="+", default=["first", "second", "second-autograd"],
                        choices=["first", "second", "second-autograd"],
                        help="second-autograd: second order with curvature='autograd' (differentiating "
                             "autograd's backward pass) instead of the policy's closed-form Hessian products")
    parser.add_argument("--default-malloc", action="store_true",
                        help="keep glibc's default allocator settings (train.py tunes them)")
    args = parser.parse_args()
    if not args.default_malloc:
        keep_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    policy = NormalMLPPolicy(args.obs_dim, args.act_dim, hidden_sizes=args.hidden, nonlinearity=args.nonlinearity)
    train = [make_episodes(policy, args.tasks, args.episodes, args.horizon) for _ in range(args.num_steps)]
    valid = make_episodes(policy, args.tasks, args.episodes, args.horizon)
    print(
        f"tasks={args.tasks} episodes={args.episodes} horizon={args.horizon} obs={args.obs_dim} "
        f"act={args.act_dim} hidden={args.hidden} {args.nonlinearity} num_steps={args.num_steps} "
        f"threads={torch.get_num_threads()}"
    )
    keys = ("time_adapt", "time_loss_grad", "time_cg", "time_line_search", "time_total")
    best: dict[str, float] = {}
    for mode in args.modes:
        state = {k: v.clone() for k, v in policy.state_dict().items()}
        learner = MAMLTRPO(
            policy,
            fast_lr=0.1,
            num_steps=args.num_steps,
            first_order=mode == "first",
            device=args.device,
            curvature="autograd" if mode == "second-autograd" else "auto",
        )
        for repeat in range(args.repeats):
            policy.load_state_dict(state)
            wall, cpu = time.perf_counter(), time.process_time()
            logs = learner.step(train, valid)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best[mode] = min(best.get(mode, math.inf), logs["time_total"])
            timings = " ".join(f"{k[5:]}={logs[k]:.3f}" for k in keys)
            print(
                f"{mode}-order #{repeat}: wall={wall:.3f}s cpu={cpu:.3f}s {timings} ls_steps={int(logs['ls_steps'])} "
                f"loss {logs['loss_before']:.4f}->{logs['loss_after']:.4f} kl_after={logs['kl_after']:.2e}"
            )
        policy.load_state_dict(state)
    if "second" in best and "second-autograd" in best:
        ratio = best["second-autograd"] / best["second"]
        print(f"second order, best step: autograd curvature / closed-form curvature = {ratio:.2f}x")


if __name__ == "__main__":
    main()
