"""What the checkpoint's SHA-256 costs: a write with it against one without, interleaved, and a verification.

Writes a state of ``--mib`` MiB of float32 through ``atomic_save`` (temporary file, fsync, rename), alternating
with and without ``checksum=True``, and times ``verify_digest`` of the result (what ``--resume`` and test.py
add before reading). The default 2048 MiB is above the largest shipped configuration's checkpoint at the end of
its run: configs/pearl/halfcheetah-vel.yaml saves its replays' filled rows, about 0.6 GB after 500 iterations
(2,000 initial rows for each of 100 tasks, then about 5,500 an iteration, 189 bytes each).

    python benchmarks/checkpoint_checksum.py --mib 2048 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from maml_rl.app.runs.checksum import verify_digest
from maml_rl.app.runs.files import atomic_save


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=2048, help="size of the saved state (default: 2048)")
    parser.add_argument("--rounds", type=int, default=3, help="writes of each kind (default: 3)")
    parser.add_argument("--folder", default=None, help="where to write (default: a temporary folder)")
    args = parser.parse_args()
    state = {"rows": torch.randn(args.mib * 2**18)}
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        path = Path(folder) / "checkpoint.pt"
        times = {False: [], True: []}
        verify = []
        for _ in range(args.rounds):
            for checksum in (False, True):
                start = time.perf_counter()
                atomic_save(state, path, checksum=checksum)
                times[checksum].append(time.perf_counter() - start)
            start = time.perf_counter()
            assert verify_digest(path)
            verify.append(time.perf_counter() - start)
    plain, summed, check = (statistics.median(t) for t in (times[False], times[True], verify))
    print(f"{args.mib} MiB, median of {args.rounds}: write {plain:.2f} s, write with SHA-256 {summed:.2f} s "
          f"(x{summed / plain:.2f}, {summed - plain:+.2f} s), verification {check:.2f} s "
          f"({args.mib / 1024 / check:.2f} GiB/s)")


if __name__ == "__main__":
    main()
