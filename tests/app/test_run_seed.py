"""The run seed reaches every random draw of every algorithm.

Every generator in a training run is seeded from numbers that must derive from the run seed:
``torch.manual_seed`` (the policy's initial weights) and every ``np.random.SeedSequence`` (the
sampler's tasks, per-slot action noise and env resets, gymnasium's env seeding, RL²'s PPO
minibatch order). Recording the entropy of each seeding call in two runs that differ only in
their seed, the calls must pair up one to one and differ in every pair: a draw seeded by a
constant (RL²'s minibatch order once was, ``SeedSequence([update, 7])``) shows as an equal pair,
and a draw from fresh entropy as ``SeedSequence()`` without arguments.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch
import yaml

from maml_rl.metalearners import METALEARNERS

from helpers import ROOT
from helpers.scripts import train

ALGORITHMS = {
    "maml-trpo": {},
    "promp": {"algorithm": "promp", "outer-steps": 2},
    "rl2-ppo": {"algorithm": "rl2-ppo", "episodes-per-trial": 2, "gru-size": 8, "ppo-epochs": 2,
                "ppo-minibatches": 2, "bptt-chunk": 7, "update-per-chunk": True, "bptt-overlap": 2},
    "pearl": {"algorithm": "pearl", "fast-batch-size": 1, "meta-batch-size": 2, "latent-size": 2,
              "context-hidden-sizes": [8], "num-train-tasks": 3, "num-initial-steps": 20, "num-steps-prior": 10,
              "num-extra-rl-steps-posterior": 10, "num-train-steps-per-itr": 2, "tasks-per-update": 2,
              "sac-batch-size": 4, "embedding-batch-size": 3, "replay-capacity": 100},
}


def seeding_calls(monkeypatch, config, output, seed):
    calls = []
    real_sequence, real_manual_seed = np.random.SeedSequence, torch.manual_seed

    def sequence(entropy=None, *args, **kwargs):
        calls.append(("SeedSequence", None if entropy is None else np.asarray(entropy).tolist()))
        return real_sequence(entropy, *args, **kwargs)

    def manual_seed(value):
        calls.append(("torch.manual_seed", int(value)))
        return real_manual_seed(value)

    monkeypatch.setattr(np.random, "SeedSequence", sequence)
    monkeypatch.setattr(torch, "manual_seed", manual_seed)
    try:
        train.main(["--config", str(config), "--output-folder", str(output), "--num-workers", "0",
                    "--seed", str(seed)])
    finally:
        monkeypatch.undo()
    return calls


@pytest.mark.parametrize("algorithm", sorted(METALEARNERS))
def test_every_draw_of_a_run_derives_from_its_seed(tmp_path, monkeypatch, algorithm, small_config):
    if algorithm in ALGORITHMS:
        changes = dict(ALGORITHMS[algorithm], **{"num-batches": 2})
        config = small_config(tmp_path, **changes)
        if algorithm in ("rl2-ppo", "pearl"):  # MAML's inner-loop key is not one of theirs
            config.write_text("\n".join(line for line in config.read_text().splitlines()
                                        if not line.startswith("fast-lr")) + "\n")
    else:  # a learner these settings predate: its own tiny config
        config = tmp_path / "contract.yaml"
        config.write_text(yaml.safe_dump({**METALEARNERS[algorithm].contract_config, "num-batches": 2}))
    first = seeding_calls(monkeypatch, config, tmp_path / "a", 11)
    again = seeding_calls(monkeypatch, config, tmp_path / "b", 11)
    other = seeding_calls(monkeypatch, config, tmp_path / "c", 12)
    assert first == again  # the recording itself is deterministic
    assert len(first) == len(other) and len(first) > 5
    assert ("torch.manual_seed", 11) in first
    fresh = [call for call in first if call[1] is None]
    assert not fresh, f"seeded from fresh entropy, not from the run seed: {fresh}"
    same = [a for a, b in zip(first, other) if a == b]
    assert not same, f"{len(same)} of {len(first)} seeding calls do not depend on the run seed: {same[:5]}"


def test_the_check_catches_a_constant_seed(tmp_path, monkeypatch, small_config):
    """The old minibatch order (the update count alone) fails the check above."""
    from maml_rl.metalearners.rl2 import learner as rl2_ppo

    original = rl2_ppo.RL2PPO.step

    def constant_order(self, trials):
        np.random.SeedSequence([self.num_updates, 7])
        return original(self, trials)

    monkeypatch.setattr(rl2_ppo.RL2PPO, "step", constant_order)
    changes = dict(ALGORITHMS["rl2-ppo"], **{"num-batches": 1})
    config = small_config(tmp_path, **changes)
    config.write_text("\n".join(line for line in config.read_text().splitlines()
                                if not line.startswith("fast-lr")) + "\n")
    first = seeding_calls(monkeypatch, config, tmp_path / "a", 11)
    monkeypatch.setattr(rl2_ppo.RL2PPO, "step", constant_order)
    other = seeding_calls(monkeypatch, config, tmp_path / "c", 12)
    assert [a for a, b in zip(first, other) if a == b] == [("SeedSequence", [0, 7])]


def test_a_seed_is_drawn_in_one_place_only():
    """Fresh entropy (``SeedSequence()`` with no argument, ``np.random.seed()``, ``default_rng()``) is drawn by
    ``maml_rl.utils.seeding.draw_seed`` alone: every other draw in the package is seeded from a given seed."""
    import ast

    package = ROOT / "maml_rl"
    unseeded = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"SeedSequence", "default_rng", "seed", "RandomState"}
                    and not node.args and not node.keywords):
                unseeded.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.func.attr}()")
    assert unseeded == ["maml_rl/utils/seeding.py:13 SeedSequence()"]


def test_the_process_wide_generators_start_from_the_run_seed(tmp_path, small_config):
    """A run seeds NumPy's and Python's global generators too, so what it draws from them and the state its
    checkpoint keeps do not depend on what the process drew before it (a resume once differed from the
    uninterrupted run when another test had drawn from ``np.random`` in between)."""
    import random

    from helpers.runs import assert_same_state

    config = small_config(tmp_path, **{"num-batches": 1})
    states = []
    for name, draws in (("a", 0), ("b", 84)):
        np.random.random(draws)
        random.random()
        train.main(["--config", str(config), "--output-folder", str(tmp_path / name), "--num-workers", "0",
                    "--seed", "5"])
        states.append(torch.load(tmp_path / name / "checkpoint.pt", weights_only=False)["rng"])
    assert_same_state(states[0], states[1], "rng")
