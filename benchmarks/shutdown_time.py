"""How long a sampling script takes to exit after Ctrl-C or SIGTERM, under load.

Starts a script that samples forever with 2 ChildEnv workers (the test suite's
probe env), signals it mid-rollout, and times signal -> exit, and signal ->
every worker gone. ``--load N`` runs N busy-looping processes beside it (the
machine as a new user has it with the test suite running).

    python benchmarks/shutdown_time.py --runs 20 --load 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.process_utils import SAMPLING_SCRIPT, is_running  # noqa: E402


def busy() -> None:
    while True:
        pass


def one_run(script: Path, signum: int) -> tuple[float, float]:
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, cwd=ROOT)
    try:
        pids = [int(pid) for pid in process.stdout.readline().split()]
        time.sleep(0.3)
        start = time.monotonic()
        process.send_signal(signum)
        process.wait(timeout=120)
        exited = time.monotonic() - start
        while any(is_running(pid) for pid in pids) and time.monotonic() - start < 120:
            time.sleep(0.01)
        return exited, time.monotonic() - start
    finally:
        process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--load", type=int, default=2, help="busy-looping processes beside the script")
    parser.add_argument("--start-method", default="fork", choices=("fork", "forkserver", "spawn"))
    args = parser.parse_args()
    script = Path("/tmp") / f"maml_rl_sample_forever_{os.getpid()}.py"
    script.write_text(SAMPLING_SCRIPT.format(tests=str(ROOT / "tests"), start_method=args.start_method))
    loaders = [mp.get_context("fork").Process(target=busy, daemon=True) for _ in range(args.load)]
    for p in loaders:
        p.start()
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            exits, gones = zip(*(one_run(script, signum) for _ in range(args.runs)))
            print(f"{signum.name}, {args.start_method}, load {args.load}, {args.runs} runs: exit after the signal "
                  f"median {statistics.median(exits):.2f} s, worst {max(exits):.2f} s; workers gone: median "
                  f"{statistics.median(gones):.2f} s, worst {max(gones):.2f} s", flush=True)
    finally:
        for p in loaders:
            p.kill()
        script.unlink()
    print(f"Command: python benchmarks/shutdown_time.py --runs {args.runs} --load {args.load} "
          f"--start-method {args.start_method}; load average now {os.getloadavg()}")


if __name__ == "__main__":
    main()
