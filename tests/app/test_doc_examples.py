"""The python examples of the README, docs/sampler.md and docs/vector.md run as written and print the same on every run.

Each example runs twice in a fresh interpreter (as a reader would run it): the same seed must give the
same output, so the printed figures can be quoted. The README's example printed a different number on
every run because its policy's initial weights were not seeded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.processes


def python_blocks(relative_path: str):
    """The ```python blocks of a markdown file that are meant to run: those with a main guard
    (the others show signatures or fragments)."""
    text = (ROOT / relative_path).read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    return [block for block in blocks if 'if __name__ == "__main__":' in block]


# docs/vector.md's PPO loop trains for a few seconds more than the others run.
SLOW_EXAMPLES = ("docs/vector.md",)
EXAMPLES = [pytest.param(path, i, code, id=f"{path}-{i}", marks=[pytest.mark.slow] if path in SLOW_EXAMPLES else [])
            for path in ("README.md", "docs/sampler.md", "docs/vector.md") for i, code in enumerate(python_blocks(path))]


def run_example(code: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    script = cwd / "example.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_readme_has_a_runnable_example():
    assert python_blocks("README.md"), "the README's sampler example (with its main guard) was not found"


@pytest.mark.parametrize(("path", "index", "code"), [p for p in EXAMPLES if p.values[0] not in SLOW_EXAMPLES])
def test_documented_example_runs_and_prints(path, index, code, tmp_path):
    assert run_example(code, tmp_path).strip(), f"{path}'s example {index} printed nothing"


# Twice, in the full tier: each run starts torch and the sampler's workers, and the quick tier has run it once.
@pytest.mark.slow
@pytest.mark.parametrize(("path", "index", "code"), EXAMPLES)
def test_documented_example_prints_the_same_on_every_run(path, index, code, tmp_path):
    first = run_example(code, tmp_path)
    assert first.strip(), f"{path}'s example {index} printed nothing"
    assert run_example(code, tmp_path) == first
