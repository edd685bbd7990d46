"""A checkpoint that proves its content: the SHA-256 of the archive, kept in the archive's own comment.

``torch.save`` writes a zip archive whose last record (the end of the central
directory) ends with an empty comment. :class:`DigestWriter` hashes the bytes
on their way to the file, and :func:`seal` then writes ``maml_rl sha256 <hex>``
into that comment. ``torch.load`` and ``zipfile`` ignore the comment, so the
file reads as before; :func:`verify_digest` recomputes the digest of the
archive as torch wrote it and compares.

A file with no such comment is read unchecked here: the comment's absence is
bytes like any other, so whoever reads a kind of file that is always sealed
(a checkpoint, since its format's version 2: :mod:`~maml_rl.app.runs.checkpoints`)
refuses it when it lacks one.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import BinaryIO

__all__ = ["ChecksumMismatch", "DigestWriter", "seal", "verify_digest"]

_MARKER = b"maml_rl sha256 "
_END_RECORD = b"PK\x05\x06"  # the zip end-of-central-directory signature; the record is 22 bytes + its comment
_END_RECORD_SIZE = 22
_COMMENT_SIZE = len(_MARKER) + 64


class ChecksumMismatch(Exception):
    """A file's bytes differ from those whose digest it records."""


class DigestWriter:
    """A binary file's ``write``, hashed and counted on the way (what ``torch.save`` needs of a file)."""

    def __init__(self, file: BinaryIO):
        self.file = file
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


def seal(file: BinaryIO, writer: DigestWriter) -> None:
    """Record ``writer``'s digest in the comment of the zip archive it wrote to ``file`` (still open)."""
    file.flush()
    file.seek(-_END_RECORD_SIZE, os.SEEK_END)
    end = file.read(_END_RECORD_SIZE)
    if end[:4] != _END_RECORD or end[-2:] != b"\0\0":
        raise ValueError("seal: the file does not end with a zip archive's end record and an empty comment")
    comment = _MARKER + writer.sha256.hexdigest().encode()
    file.seek(-2, os.SEEK_END)
    file.write(struct.pack("<H", len(comment)) + comment)


def verify_digest(source: str | Path | bytes) -> bool:
    """Whether the file (its path, or its bytes) records a digest (False: nothing to check).

    :raises ChecksumMismatch: it recorded one and its bytes no longer give it.
    """
    data = Path(source).read_bytes() if isinstance(source, (str, Path)) else source
    size = len(data)
    tail_size = _END_RECORD_SIZE + _COMMENT_SIZE
    if size < tail_size:
        return False
    tail = data[size - tail_size:]
    comment = tail[_END_RECORD_SIZE:]
    if tail[:4] != _END_RECORD or not comment.startswith(_MARKER) \
            or struct.unpack("<H", tail[_END_RECORD_SIZE - 2:_END_RECORD_SIZE])[0] != _COMMENT_SIZE:
        return False
    recorded = comment[len(_MARKER):].decode("ascii", errors="replace")
    # The archive as torch wrote it: everything up to the comment's length, which was zero.
    digest = hashlib.sha256(memoryview(data)[:size - _COMMENT_SIZE - 2])
    digest.update(b"\0\0")
    if digest.hexdigest() != recorded:
        raise ChecksumMismatch(f"its SHA-256 is {digest.hexdigest()[:16]}..., it recorded {recorded[:16]}...")
    return True
