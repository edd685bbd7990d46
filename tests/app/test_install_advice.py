"""What the README, the docs, the configs and the package's messages tell a user to install works as written.

The README's get-going venv has MuJoCo 4; ``pip install -e ".[metaworld]"`` there puts MuJoCo 3.3 over it and
breaks ``import mujoco`` (docs/environments.md, "Installing"), yet a docs block, the Meta-World configs' comments
and the missing-Meta-World message advised just that.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

BREAKING = 'pip install -e ".[metaworld]"'

DOCS = ["README.md", *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md"))]


def shell_blocks(relative_path: str) -> list[str]:
    """The ```bash blocks of a markdown file: commands a reader runs as written."""
    return re.findall(r"^ *```bash\n(.*?)^ *```", (ROOT / relative_path).read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("path", DOCS)
def test_no_command_block_installs_the_metaworld_extra_alone(path):
    """`.[dev,metaworld]` in a venv of its own is one of the two ways; `.[metaworld]` alone assumes no MuJoCo 4."""
    assert not [block for block in shell_blocks(path) if BREAKING in block]


def test_the_metaworld_configs_give_a_way_that_works():
    configs = sorted((ROOT / "configs").rglob("metaworld/*.yaml"))
    assert len(configs) >= 8
    advising = [path.relative_to(ROOT) for path in configs if BREAKING in path.read_text()]
    assert advising == []
    assert all("docs/environments.md#installing" in path.read_text() for path in configs)


@pytest.mark.processes
def test_the_missing_metaworld_message_gives_the_two_ways():
    # Meta-World hidden from a fresh interpreter: what a user without it reads.
    code = "import sys; sys.modules['metaworld'] = None; import maml_rl.envs.metaworld"
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=120)
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError: Meta-World is not installed"), result.stderr
    assert BREAKING not in message
    assert "pip install --no-deps metaworld==3.1.1 && pip install packaging scipy imageio" in message
    assert 'pip install -e ".[dev,metaworld]"' in message and "docs/environments.md#installing" in message


def test_get_going_never_fetches_the_cuda_build_and_continues_with_resume_alone():
    """The get-going line fetched the CUDA build on a Linux box without a GPU, and continuing meant running
    the whole line, pip included, again."""
    readme = (ROOT / "README.md").read_text()
    get_going = readme.split("## Get going", 1)[1].split("\n## ", 1)[0]
    commands = shell_blocks("README.md")[0]
    assert commands in get_going
    lines = commands.splitlines()
    assert lines[-1] == "python train.py --resume"
    assert not any("train.py" in line for line in lines[:-1])
    torch_installs = re.findall(r"pip install torch\S*(?: [^&\n]*)?", commands)
    assert torch_installs and all("--index-url https://download.pytorch.org/whl/cpu" in t for t in torch_installs)
    assert "`python train.py --resume` continues" in " ".join(get_going.split())
