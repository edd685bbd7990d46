"""Training runs of train.py in-process, and their files."""

from __future__ import annotations

import json
from pathlib import Path

import torch

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
