"""A checkpoint's checksum cannot be switched off by the bytes it guards: a checkpoint of the sealed format
(version 2) that reads as unsealed is refused, so a flip in its record and one in its content together are
caught; the checkpoints written before the checksum (version 1, as under docs/runs/) still load."""

import io
import struct

import pytest
import torch

from maml_rl.app.config_files import ConfigError
from maml_rl.app.runs.checkpoints import read_checkpoint

from helpers import ROOT
from helpers.runs import load_policy, run

# The archive's end record: 22 bytes whose last two are the comment's length, then the comment
# "maml_rl sha256 <64 hex digits>".
COMMENT_SIZE = len(b"maml_rl sha256 ") + 64
LENGTH_AND_MARKER = range(-COMMENT_SIZE - 2, -64)  # the 17 bytes (136 bits) the check relied on to know it applies


@pytest.fixture(scope="module")
def sealed(tmp_path_factory, small_config):
    """A one-iteration run's checkpoint bytes, and where one of its weights' bytes are."""
    folder = tmp_path_factory.mktemp("sealed")
    run(small_config(folder, **{"num-batches": 1}), folder / "run", "--seed", "3")
    data = (folder / "run" / "checkpoint.pt").read_bytes()
    weight = data.find(load_policy(folder / "run")["layer1.weight"].numpy().tobytes())
    assert weight > 0 and data[-COMMENT_SIZE:].startswith(b"maml_rl sha256 ")
    return data, weight


def flipped(data, *offsets_and_bits):
    data = bytearray(data)
    for offset, bit in offsets_and_bits:
        data[offset] ^= 1 << bit
    return bytes(data)


def refused(data, tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=r"checkpoint.pt is damaged: ") as error:
        read_checkpoint(path)
    return str(error.value)


def test_the_sealed_checkpoint_reads(sealed, tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(sealed[0])
    assert read_checkpoint(path)["version"] == 2


@pytest.mark.parametrize("bits", [pytest.param("one-per-byte", id="one-bit-per-byte"),
                                  pytest.param("every", id="every-bit", marks=pytest.mark.slow)])
def test_a_flip_in_the_record_and_one_in_a_weight_are_refused(sealed, tmp_path, bits):
    """A flip in the comment's length or its marker read as "no digest", and a flipped weight then loaded."""
    data, weight = sealed
    for offset in LENGTH_AND_MARKER:
        for bit in range(8) if bits == "every" else [offset % 8]:
            message = refused(flipped(data, (offset, bit), (weight + 5, 4)), tmp_path)
            assert "this one's record is missing or unreadable" in message, (offset, bit)


@pytest.mark.parametrize("weight_too", [False, True], ids=["comment-only", "and-a-weight"])
def test_a_stripped_comment_is_refused(sealed, tmp_path, weight_too):
    data, weight = sealed
    data = flipped(data, (weight + 5, 4)) if weight_too else data
    stripped = data[:-COMMENT_SIZE - 2] + struct.pack("<H", 0)
    assert torch.load(io.BytesIO(stripped), weights_only=False)["version"] == 2  # torch reads it
    assert "record is missing or unreadable" in refused(stripped, tmp_path)


def test_a_flipped_digit_of_the_digest_is_a_mismatch(sealed, tmp_path):
    assert "its bytes changed since it was written" in refused(flipped(sealed[0], (-1, 0)), tmp_path)


@pytest.mark.parametrize("run_folder", ["ant-dir/seed-1", "metaworld-ml10/maml-trpo/seed-1"])
def test_checkpoints_from_before_the_checksum_still_load(run_folder):
    """The committed runs' checkpoints are version 1 and unsealed: read as before, unchecked."""
    path = ROOT / "docs" / "runs" / run_folder / "checkpoint.pt"
    state = read_checkpoint(path)
    assert state["version"] == 1 and not path.read_bytes()[-COMMENT_SIZE:].startswith(b"maml_rl sha256 ")
