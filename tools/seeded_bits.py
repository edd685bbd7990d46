"""Fingerprints of seeded train.py runs: do two builds give the same bits?

Runs each shipped configuration below for two small iterations with a fixed seed
and prints, per run, the sha256 of ``policy.th`` and of ``metrics.jsonl`` with
its wall-clock columns (``time_*``) removed. Run it on the commit before a
reorganisation and on the one after (each from its own work tree) and compare
the two outputs: a reorganisation that keeps behaviour prints the same lines.

    python tools/seeded_bits.py > before.txt          # in the old tree
    python tools/seeded_bits.py > after.txt           # in the new tree
    diff before.txt after.txt

``--only NAME`` runs one of them; ``--keep DIR`` leaves the run folders there.
Each run is a subprocess of this tree's train.py, with OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "num-batches=2"]

# name -> (config, extra train.py arguments)
RUNS = {
    "maml-nav-2workers": ("configs/maml/2d-navigation.yaml",
                          ["--num-workers", "2", "--set", "meta-batch-size=4", "--set", "fast-batch-size=5"]),
    "maml-nav-inprocess": ("configs/maml/2d-navigation.yaml",
                           ["--num-workers", "0", "--set", "meta-batch-size=4", "--set", "fast-batch-size=5"]),
    "maml-hcv-fastpath": ("configs/maml/halfcheetah-vel.yaml",
                          ["--num-workers", "0", "--set", "meta-batch-size=2", "--set", "fast-batch-size=2",
                           "--set", "env-kwargs.max_episode_steps=20"]),
    "maml-hcv-2workers": ("configs/maml/halfcheetah-vel.yaml",
                          ["--num-workers", "2", "--set", "meta-batch-size=2", "--set", "fast-batch-size=2",
                           "--set", "env-kwargs.max_episode_steps=20"]),
    "promp-nav": ("configs/promp/2d-navigation.yaml",
                  ["--num-workers", "0", "--set", "meta-batch-size=4", "--set", "fast-batch-size=5"]),
    "rl2-nav": ("configs/rl2/2d-navigation.yaml",
                ["--num-workers", "0", "--set", "meta-batch-size=4", "--set", "fast-batch-size=2"]),
    "rl2-ml1-push-tiny": ("configs/rl2/metaworld/ml1-push.yaml",
                          ["--num-workers", "0", "--set", "meta-batch-size=2",
                           "--set", "env-kwargs.max_episode_steps=20"]),
    "rl2-ml10-tiny": ("configs/rl2/metaworld/ml10.yaml",
                      ["--num-workers", "0", "--set", "meta-batch-size=4", "--set", "episodes-per-trial=2",
                       "--set", "env-kwargs.max_episode_steps=20"]),
    "maml-ml1-push-tiny-2workers": ("configs/maml/metaworld/ml1-push.yaml",
                                    ["--num-workers", "2", "--set", "meta-batch-size=3", "--set", "fast-batch-size=2",
                                     "--set", "env-kwargs.max_episode_steps=20"]),
    "maml-ml10-tiny": ("configs/maml/metaworld/ml10.yaml",
                       ["--num-workers", "0", "--set", "meta-batch-size=6", "--set", "fast-batch-size=3",
                        "--set", "env-kwargs.max_episode_steps=20"]),
    "pearl-nav-tiny-2workers": ("configs/pearl/2d-navigation.yaml",
                                ["--num-workers", "2", "--set", "hidden-sizes=[32,32]",
                                 "--set", "context-hidden-sizes=[32,32]", "--set", "num-train-tasks=4",
                                 "--set", "meta-batch-size=2", "--set", "num-initial-steps=40",
                                 "--set", "num-steps-prior=40", "--set", "num-extra-rl-steps-posterior=40",
                                 "--set", "num-train-steps-per-itr=5", "--set", "tasks-per-update=2",
                                 "--set", "sac-batch-size=16", "--set", "embedding-batch-size=8",
                                 "--set", "eval-trajectories=1"]),
}


def metrics_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        kept = {key: value for key, value in row.items() if not key.startswith("time")}
        digest.update(json.dumps(kept, sort_keys=True).encode())
    return digest.hexdigest()


def fingerprint(name: str, folder: Path, seed: int) -> str:
    config, extra = RUNS[name]
    command = [sys.executable, str(ROOT / "train.py"), "--config", str(ROOT / config),
               "--output-folder", str(folder), "--seed", str(seed), *SMALL, *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return f"{name}: FAILED (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}"
    policy = hashlib.sha256((folder / "policy.th").read_bytes()).hexdigest()
    return f"{name}: policy {policy[:16]} metrics {metrics_digest(folder / 'metrics.jsonl')[:16]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(RUNS), action="append",
                        help="run only this one (repeatable)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="leave the run folders in this folder")
    args = parser.parse_args()
    names = args.only or list(RUNS)
    with tempfile.TemporaryDirectory() as scratch:
        base = args.keep or Path(scratch)
        for name in names:
            print(fingerprint(name, base / name, args.seed), flush=True)


if __name__ == "__main__":
    main()
