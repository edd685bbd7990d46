"""Training runs of train.py in-process, and their files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import yaml

from maml_rl.metalearners import METALEARNERS
from maml_rl.metalearners.pearl import PEARL

from helpers.scripts import train


def run(config, output, *extra):
    """``train.py --config config --output-folder output --num-workers 0 *extra``, in this process."""
    return train.main(["--config", str(config), "--output-folder", str(output), "--num-workers", "0", *extra])


def read_metrics(folder):
    """The rows of a run's metrics.jsonl."""
    return [json.loads(line) for line in (Path(folder) / "metrics.jsonl").read_text().splitlines()]


def load_policy(folder):
    """A run's policy.th (a state dict)."""
    return torch.load(Path(folder) / "policy.th", weights_only=True)


def assert_same_policy(a, b):
    """Two state dicts hold the same names and the same bits."""
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def metrics_without_time(folder):
    """A run's metrics.jsonl rows without their wall-clock columns (``time_*``): what a seed decides."""
    return [{k: v for k, v in row.items() if not k.startswith("time")} for row in read_metrics(folder)]


def read_learner_state(folder):
    """The meta-learner's state in a run's checkpoint.pt (``{}`` for a learner that keeps none)."""
    return torch.load(Path(folder) / "checkpoint.pt", weights_only=False).get("metalearner", {})


def assert_same_state(a, b, where="state"):
    """Two nested states (dicts, lists, tensors, arrays, numbers) are equal, tensors bit for bit; a difference
    names where it is (``state.optimizer.state[0]``)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), where
        for key in a:
            assert_same_state(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}[{i}]")
    elif torch.is_tensor(a):
        assert torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b), where
    else:
        assert a == b, where


#: PEARL's tiny run, its learner's declaration (a few seconds of 2D navigation).
PEARL_TINY = dict(PEARL.contract_config)


def pearl_config(folder, name="pearl.yaml", **changes):
    """:data:`PEARL_TINY` with ``changes``, written as YAML into ``folder``."""
    path = Path(folder) / name
    path.write_text(yaml.safe_dump({**PEARL_TINY, **changes}))
    return path


class ReferenceRuns:
    """One small uninterrupted run of train.py per algorithm (seed :attr:`SEED`, ``--num-workers 0``), trained
    in this process the first time it is asked for and kept: ``reference_runs("promp") -> run folder``.

    :meth:`config` writes the run's config elsewhere, for runs to compare with it. The learner must be in the
    registry when its run is first asked for (a test's own learner: registered by that test).
    """

    SEED = 3

    def __init__(self, root):
        self.root = Path(root)
        self.folders = {}

    def config(self, algorithm, folder):
        """The algorithm's small config, the learner's own declaration (``MetaLearner.contract_config``), written
        into ``folder``; its ``num-batches`` is the run's length."""
        declared = getattr(METALEARNERS.get(algorithm), "contract_config", None)
        if declared is None:
            raise LookupError(f"no small config for algorithm {algorithm!r}: declare its contract_config "
                              "(maml_rl.metalearners.base.MetaLearner)")
        path = Path(folder) / "contract.yaml"
        path.write_text(yaml.safe_dump(dict(declared)))
        return path

    def num_batches(self, algorithm):
        """How many iterations its reference run has."""
        return json.loads((self(algorithm) / "config.json").read_text())["num-batches"]

    def __call__(self, algorithm):
        if algorithm not in self.folders:
            folder = self.root / algorithm
            if folder.exists():
                raise RuntimeError(f"the reference run of {algorithm} failed earlier in this session: see that test")
            folder.mkdir()
            run(self.config(algorithm, folder), folder / "run", "--seed", str(self.SEED))
            self.folders[algorithm] = folder / "run"
        return self.folders[algorithm]
