"""How many cases the sampler's replay property needs: plant bugs in the sampler, count the cases until one fails.

Each mutant is one line of the package changed into a plausible bug (an off-by-one, a missing copy, a view of a
shared buffer, an input that is no longer realigned). For each, this copies ``maml_rl/`` and ``tests/`` into a
temporary folder, changes the line, and runs in a fresh interpreter there (the copy first on ``sys.path``, for
the worker processes too):

* the quick tier's replay test as it is (10 derandomised cases, the explicit examples, the forkserver cases);
* the full tier's strategy (``test_episodes_replay_and_match_across_layouts_large``'s bounds and start methods)
  under each seed, stopping at the first case that fails (generation only, no shrinking).

The output is a line per mutant: caught by the quick tier or not, and the number of the first failing case per
seed (``-`` where none of ``--cases`` failed). A mutant whose first failures are spread over tens or hundreds of
cases is one that fewer cases would miss; ``--cases`` over the mean first failure says how often.

    python tools/property_mutants.py --seeds 0 1 2 3 4 5 6 7 8 9 --cases 250
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name: (file, the line as it is, the bug)
MUTANTS = {
    "episode-mask-off-by-one": (
        "maml_rl/samplers/trajectories.py",
        "invalid = (torch.arange(horizon).unsqueeze(1) >= lengths.unsqueeze(0))",
        "invalid = (torch.arange(horizon).unsqueeze(1) > lengths.unsqueeze(0))"),
    "reset-seeds-ignore-the-call": (
        "maml_rl/samplers/rollout/noise.py",
        "return np.random.SeedSequence([seed, call]).generate_state(num_slots)",
        "return np.random.SeedSequence([seed]).generate_state(num_slots)"),
    "discrete-start-ignored": (
        "maml_rl/samplers/workers/child_env.py",
        "action = actions[slot].copy() if box else actions[slot] + start",
        "action = actions[slot].copy() if box else actions[slot]"),
    "box-action-not-copied": (
        "maml_rl/samplers/workers/child_env.py",
        "action = actions[slot].copy() if box else actions[slot] + start",
        "action = actions[slot] if box else actions[slot] + start"),
    "episodes-a-view-of-the-buffer": (
        "maml_rl/samplers/trajectories.py",
        "tensor = tensor.reshape(horizon, K, B, *rest).transpose(0, 1).clone(memory_format=torch.contiguous_format)",
        "tensor = tensor.reshape(horizon, K, B, *rest).transpose(0, 1).contiguous()"),
    "lengths-a-view-of-the-buffer": (
        "maml_rl/samplers/trajectories.py",
        "lengths = torch.from_numpy(trajectories.lengths[:K * B].copy())",
        "lengths = torch.from_numpy(trajectories.lengths[:K * B])"),
    "truncation-at-the-first-step-missed": (
        "maml_rl/samplers/workers/child_env.py",
        "if terminated or truncated or t + 1 == episode_end[slot - first_slot]:",
        "if terminated or (truncated and t > 0) or t + 1 == episode_end[slot - first_slot]:"),
    "horizon-one-not-ended": (
        "maml_rl/samplers/workers/child_env.py",
        "if terminated or truncated or t + 1 == episode_end[slot - first_slot]:",
        "if terminated or truncated or (t + 1 == episode_end[slot - first_slot] and t > 0):"),
    # The bug this property found (see ALIGNMENT_CASES in the test): the policy's input no longer a fresh
    # tensor, so lockstep reads a row of the shared buffer and partial mode a gathered copy, at other addresses.
    "policy-input-not-realigned": (
        "maml_rl/samplers/rollout/actions.py",
        "obs = torch.tensor(observations, dtype=torch.float32, device=self.device)",
        "obs = torch.from_numpy(np.ascontiguousarray(observations, dtype=np.float32)).to(self.device)"),
}

# Run inside the copy: the quick test, or the large strategy under one seed.
PROBE = r'''
import json, os, sys, time
sys.path[:0] = [os.path.join(os.getcwd(), "tests"), os.path.join(os.getcwd(), "tests", "samplers")]
import maml_rl
assert maml_rl.__file__.startswith(os.getcwd()), maml_rl.__file__
from hypothesis import HealthCheck, Phase, given, seed, settings
import test_property_replay as T

def first_line(e):
    return type(e).__name__ + ": " + (str(e).splitlines() or [""])[0][:120]

mode = sys.argv[1]
if mode == "quick":
    try:
        T.test_episodes_replay_and_match_across_layouts()
        for case in T.FORKSERVER_CASES:
            T.check_case(case, T.layouts("forkserver"))
        print(json.dumps({"caught": None}))
    except Exception as e:
        print(json.dumps({"caught": first_line(e)}))
else:
    number, cases = int(sys.argv[2]), int(sys.argv[3])
    state = {"n": 0, "failed_at": None, "error": None}

    @seed(number)
    @settings(max_examples=cases, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(T.cases_and_methods(T.METHODS, max_tasks=6, max_batch=6, max_horizon=20))
    def run(case_and_method):
        state["n"] += 1
        case, method = case_and_method
        try:
            T.check_case(case, T.layouts(method))
        except Exception as e:
            if state["failed_at"] is None:
                state["failed_at"], state["error"] = state["n"], first_line(e)
            raise

    try:
        run()
    except Exception:
        pass
    print(json.dumps({"failed_at": state["failed_at"], "error": state["error"]}))
'''


def mutated_copy(name: str, folder: Path) -> None:
    for part in ("maml_rl", "tests"):
        shutil.copytree(ROOT / part, folder / part, ignore=shutil.ignore_patterns("__pycache__"))
    if name == "none":
        return
    path, old, new = MUTANTS[name]
    text = (folder / path).read_text()
    if text.count(old) != 1:
        raise SystemExit(f"{name}: the line to change is not in {path} once; update MUTANTS")
    (folder / path).write_text(text.replace(old, new))


def probe(folder: Path, *args: str, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(folder), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=folder, env=env, capture_output=True, text=True,
                         timeout=timeout)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        raise SystemExit(f"the probe failed ({' '.join(args)}):\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", nargs="+", default=list(MUTANTS), choices=[*MUTANTS, "none"])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    parser.add_argument("--cases", type=int, default=250, help="cases per seed at most (the full tier's: 250)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per probe")
    args = parser.parse_args(argv)
    print(f"{'mutant':38} quick tier | first failing case per seed (of {args.cases}) | seconds", flush=True)
    for name in args.mutants:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
            folder = Path(tmp)
            mutated_copy(name, folder)
            quick = probe(folder, "quick", timeout=args.timeout)["caught"]
            firsts = [probe(folder, "large", str(s), str(args.cases), timeout=args.timeout) for s in args.seeds]
        cells = " ".join("-" if f["failed_at"] is None else str(f["failed_at"]) for f in firsts)
        print(f"{name:38} {'caught' if quick else 'not caught':10} | {cells} | {time.monotonic() - started:.0f}",
              flush=True)
        for f in firsts:
            if f["error"]:
                print(f"{'':38}   e.g. {f['error']}", flush=True)
                break


if __name__ == "__main__":
    main()
