"""How long after a worker's death the sampler raises WorkerDiedError.

Kills one of two ChildEnv workers (SIGKILL) 0.3 s into a long rollout, under
each start method, and times kill -> exception (the other worker ended
included). docs/sampler.md quotes it.

    python benchmarks/failure_latency.py --runs 8
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from maml_rl.policies import NormalMLPPolicy  # noqa: E402
from maml_rl.samplers import MultiTaskSampler, WorkerDiedError  # noqa: E402
from helpers.sampler_envs import make_probe_env  # noqa: E402

LONG = 100_000


def one_run(start_method: str) -> float:
    with MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=lambda: make_probe_env(LONG), seed=0,
                          num_workers=2, start_method=start_method, max_episode_steps=LONG) as sampler:
        sampler.rollout([{"value": 0.0, "length": 3}])
        pid, killed = sampler.worker_pids[0], {}

        def kill():
            time.sleep(0.3)
            killed["at"] = time.monotonic()
            os.kill(pid, signal.SIGKILL)

        threading.Thread(target=kill).start()
        try:
            sampler.rollout([{"value": 0.0, "length": LONG}])
        except WorkerDiedError:
            return time.monotonic() - killed["at"]
    raise RuntimeError("the rollout ended without noticing the killed worker")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    for start_method in ("fork", "forkserver", "spawn"):
        times = [one_run(start_method) for _ in range(args.runs)]
        print(f"{start_method}: kill -> WorkerDiedError median {statistics.median(times):.3f} s, "
              f"max {max(times):.3f} s ({args.runs} runs)", flush=True)
    print(f"Command: python benchmarks/failure_latency.py --runs {args.runs}; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
