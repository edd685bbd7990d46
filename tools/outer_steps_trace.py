"""How far each of a ProMP iteration's Adam steps moves the policies: the run's next iteration, step by step.

Samples the iteration that follows a run's checkpoint exactly as the run does
(the sampler's state comes from the checkpoint, so the episodes are the run's
own), then, for k = 1 .. outer-steps, restarts from the checkpoint and takes k
Adam steps, printing what the run's metrics would log after them: the KL of
the adapted policies from those that sampled (outer_kl), of the pre-adaptation
policy (inner_kl), the clipped objective and the clip fraction.

    python tools/outer_steps_trace.py runs/promp/seed-1/checkpoint.pt [--outer-kl-limit 0.1]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from step_audit import load_run  # noqa: E402

from maml_rl.metalearners import sample_adapt_sample  # noqa: E402
from maml_rl.samplers import MultiTaskSampler  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--outer-kl-limit", type=float, default=None, help="also step once with this limit")
    args = parser.parse_args(argv)
    state, config, policy, baseline, learner = load_run(args.checkpoint)
    if not hasattr(learner, "outer_steps"):
        raise SystemExit(f"{args.checkpoint}: a {type(learner).__name__} run; this traces ProMP's Adam steps")
    start_policy, start_learner = copy.deepcopy(policy.state_dict()), copy.deepcopy(learner.state_dict())
    with MultiTaskSampler(config["env-name"], config["env-kwargs"], config["fast-batch-size"], policy, baseline,
                          seed=config["seed"], num_workers=0) as sampler:
        sampler.load_state_dict(state["sampler"])
        tasks = sampler.sample_tasks(config["meta-batch-size"])
        train, valid = sample_adapt_sample(sampler, tasks, inner_loop=learner.inner_loop, gamma=config["gamma"],
                                      gae_lambda=config["gae-lambda"])
    print(f"{args.checkpoint}: iteration {state['iteration']}", flush=True)
    steps = learner.outer_steps
    runs = [(None, k) for k in range(1, steps + 1)]
    if args.outer_kl_limit is not None:
        runs.append((args.outer_kl_limit, steps))
    for limit, k in runs:
        policy.load_state_dict(start_policy)
        learner.load_state_dict(copy.deepcopy(start_learner))
        learner.outer_steps, learner.outer_kl_limit = k, limit
        logs = learner.step(train, valid)
        shown = " ".join(f"{name} {logs[name]:.4g}" for name in
                         ("loss_before", "loss_after", "inner_kl", "outer_kl", "clip_fraction", "outer_steps"))
        print(f"{k} Adam step(s){'' if limit is None else f', outer-kl-limit {limit:g}'}: {shown}", flush=True)


if __name__ == "__main__":
    main()
