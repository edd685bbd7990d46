"""Checkpoints: the complete state of a run, written atomically and read without running code.

A resumed run restores the policy, the sampler, the meta-learner's state, the
random generators and the counters, so it continues exactly as a run never
stopped. (Older checkpoints also hold the linear baseline's weights,
which every fit overwrites: they are read and not needed.)
"""

from __future__ import annotations

import io
import json
import pickle
import random
import warnings
import zipfile
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import numpy as np
import torch

from maml_rl.app.config_files import ConfigError, config_diff, validate_config
from maml_rl.app.runs.checksum import ChecksumMismatch, verify_digest
from maml_rl.app.runs.files import atomic_save

__all__ = ["RESUMABLE_CHANGES", "Resumed", "seed_global_generators", "check_checkpoint_config", "check_checkpoint_rows", "load_checkpoint", "read_checkpoint", "safe_load", "save_checkpoint"]

# Version 2: the same content as version 1, always sealed with its SHA-256 (read_checkpoint requires it).
CHECKPOINT_VERSION = 2
_SEALED_SINCE = 2
_READABLE_VERSIONS = (1, 2)

#: Keys a resumed run may change: the run is simply made longer (or shorter).
RESUMABLE_CHANGES = ("num-batches",)


def seed_global_generators(seed: int) -> None:
    """Seeds the process-wide generators a checkpoint keeps (torch's, NumPy's legacy one, Python's), so a run's
    whole random state starts from its seed, not from whatever the process drew before: an env or a library that
    draws from ``np.random`` or ``random`` gets the same numbers in every run of the seed."""
    torch.manual_seed(seed)
    # NumPy's legacy seed takes 32-bit words; a config's seed may use 63 bits.
    np.random.seed(np.random.SeedSequence(seed).generate_state(4))
    random.seed(seed)


def _rng_state() -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _cpu_state_dict(module: torch.nn.Module) -> dict:
    return {name: tensor.detach().cpu().clone() for name, tensor in module.state_dict().items()}


def save_checkpoint(
    path: str | Path,
    *,
    iteration: int,
    config: Mapping[str, Any],
    policy: torch.nn.Module,
    sampler: Any,
    counters: Mapping[str, Any],
    metalearner: Any,
    monitors: Mapping[str, Any] | None = None,
    policy_file_sha256: str | None = None,
    last_row: Mapping[str, Any] | None = None,
) -> None:
    """Write, atomically, everything a resumed run needs to continue exactly.

    :param iteration: number of completed iterations (the next one to run).
    :param counters: running totals to carry over (e.g. the number of env steps).
    :param monitors: objects with a ``state_dict()`` that watch the logged metrics (the decline and stall
        monitors), by name: saved so that their metrics go on exactly even if ``metrics.jsonl`` loses rows.
    :param policy_file_sha256: the SHA-256 of the ``policy.th`` written just before (what ``atomic_save`` returned),
        by which test.py tells that file, unsealed, from a damaged or replaced one.
    :param last_row: the row of ``metrics.jsonl`` logged for the iteration just done, by which a resumed run tells
        that the checkpoint is its folder's own (:func:`check_checkpoint_rows`).
    The file records its own SHA-256 (:mod:`~maml_rl.app.runs.checksum`), which :func:`safe_load` verifies.
    """
    atomic_save(
        {
            "version": CHECKPOINT_VERSION,
            "iteration": int(iteration),
            "config": dict(config),
            "policy": _cpu_state_dict(policy),
            "sampler": sampler.state_dict(),
            "rng": _rng_state(),
            "counters": dict(counters),
            # A meta-learner with state of its own (an optimiser's moments); none is no key, as before.
            **({"metalearner": learner_state} if (learner_state := metalearner.state_dict()) else {}),
            "monitors": {name: monitor.state_dict() for name, monitor in (monitors or {}).items()},
            **({"policy_file_sha256": policy_file_sha256} if policy_file_sha256 is not None else {}),
            # Without its wall-clock columns: a checkpoint holds what the seed decides, the same in every such run.
            **({"last_row": _seeded(last_row)} if last_row is not None else {}),
        },
        path,
        checksum=True,
    )


def _numpy_array_globals() -> list:
    """What unpickling a numeric numpy array needs (the generators' states hold some), and nothing else."""
    core = getattr(np, "_core", None) or np.core
    dtypes = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.float32, np.float64]
    return [core.multiarray._reconstruct, np.ndarray, np.dtype, *(type(np.dtype(t)) for t in dtypes)]


def safe_load(path: str | Path, remedy: str, *, data: bytes | None = None) -> Any:
    """``torch.load`` that cannot run code: tensors, plain Python data and numeric numpy arrays only.

    Read with ``weights_only=True`` and an explicit allow-list of numeric numpy
    arrays (the generators' states hold some): a file asking for anything else
    (a crafted ``__reduce__``, say) is refused before any of it runs.

    A file that records its SHA-256 (a checkpoint) is verified first: one flipped bit is refused.

    :param remedy: what the user can do, appended to the error messages.
    :param data: the file's bytes, already read (so that what a caller hashes is what is loaded); ``path`` then
        only names it.
    :raises ConfigError: the file is missing, damaged or refused.
    """
    return _load(Path(path), remedy, data)[0]


def _load(path: Path, remedy: str, data: bytes | None) -> tuple[Any, bool]:
    """:func:`safe_load`, and whether the file recorded a digest (that its bytes give)."""
    if data is None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ConfigError(f"{path} does not exist") from None
    try:
        sealed = verify_digest(data)
    except ChecksumMismatch as exc:
        raise ConfigError(f"{path} is damaged: its bytes changed since it was written ({exc}), by the disk, "
                          f"a copy or an edit; nothing in it was used. {remedy}") from None
    try:
        # maml_rl's files (and the reference's) are torch.save's default pickle protocol 2 (tested). torch warns
        # "Detected pickle protocol 4" before failing on a plain pickle (Python's default protocol) or a file
        # saved with pickle_protocol=4 (its weights-only reader lacks protocol 4's FRAME): both are refused
        # below with what to do, so the warning adds nothing.
        with torch.serialization.safe_globals(_numpy_array_globals()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True), sealed
    except pickle.UnpicklingError as exc:
        # Only a request for a global (a function to call, a class to build) is a refusal; an unknown
        # opcode ("Unsupported operand 0") is bytes that are no pickle at all: a damaged file.
        if "Weights only load failed" in str(exc) and "GLOBAL" in str(exc):
            unsupported = next((line.strip() for line in str(exc).splitlines() if "GLOBAL" in line), "")
            raise ConfigError(
                f"{path} was refused: it asks to run code or build objects that maml_rl's files never hold "
                f"({unsupported}), so it was not written by maml_rl or was altered; nothing in it was run. {remedy}"
            ) from None
        raise ConfigError(f"{path} is damaged or not a file torch.save wrote ({_damage(data, exc)}). "
                          f"{remedy}") from None
    except Exception as exc:  # torch reports truncation, garbage and empty files in many ways
        raise ConfigError(f"{path} is damaged or not a file torch.save wrote ({_damage(data, exc)}). "
                          f"{remedy}") from None


def _damage(data: bytes, exc: Exception) -> str:
    """What is wrong with a file torch.load could not read, as plainly as the bytes tell."""
    if not data:
        return "the file is empty"
    if not data.strip(b"\0"):
        return f"its {len(data)} bytes are all zero"
    if not zipfile.is_zipfile(io.BytesIO(data)):
        if data[:4] == b"PK\x03\x04":
            return "a zip archive cut short or damaged, e.g. by a copy or a disk that filled up"
        return "it is not the zip archive that torch.save writes"
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def read_checkpoint(path: str | Path, *, data: bytes | None = None) -> dict:
    """The contents of a checkpoint written by :func:`save_checkpoint`, read with :func:`safe_load`.

    A checkpoint of version 2 or later is always sealed (:mod:`~maml_rl.app.runs.checksum`): one that reads as
    unsealed lost its record (a flipped bit in the marker or the comment's length, a stripped comment), so its
    content cannot be trusted either. Version 1, from before the checksum, is read unchecked.

    :param data: the file's bytes, already read.
    :raises ConfigError: the file is missing, damaged, refused or not a checkpoint,
        with what to do about it.
    """
    path = Path(path)
    remedy = (f"Restore a good copy of it, or start the run again from scratch with --overwrite "
              f"(which discards {path.name}).")
    state, sealed = _load(path, remedy, data)
    keys = ("version", "iteration", "config", "policy", "sampler", "rng", "counters")
    if not isinstance(state, dict) or any(key not in state for key in keys):
        raise ConfigError(f"{path} is not a maml_rl training checkpoint (it lacks {', '.join(keys)}). {remedy}")
    if state["version"] not in _READABLE_VERSIONS:
        raise ConfigError(f"{path}: unsupported checkpoint version {state['version']!r}. {remedy}")
    if state["version"] >= _SEALED_SINCE and not sealed:
        raise ConfigError(f"{path} is damaged: a checkpoint of version {state['version']} records its SHA-256 at "
                          "its end, and this one's record is missing or unreadable (its last bytes changed, by the "
                          f"disk, a copy or an edit), so its content cannot be checked; nothing in it was used. "
                          f"{remedy}")
    return state


def check_checkpoint_config(state: Mapping[str, Any], config: Mapping[str, Any], path: str | Path) -> None:
    """Refuse a checkpoint (as :func:`read_checkpoint` read it) written with another configuration than ``config``
    in anything but :data:`RESUMABLE_CHANGES`.

    :raises ConfigError: naming each difference.
    """
    # Resolved again so that a key added since (with its default) is not a change.
    saved = validate_config(state["config"], source=str(path))
    differences = config_diff(saved, config, ignore=RESUMABLE_CHANGES)
    if differences:
        raise ConfigError(f"{path} was written with another configuration:\n  " + "\n  ".join(differences))


def check_checkpoint_rows(state: Mapping[str, Any], rows: list[dict], path: str | Path) -> None:
    """Refuse a checkpoint that is not of the run logged in its folder's ``metrics.jsonl``: the row it recorded
    for its last iteration (``last_row``) against the row logged there, their wall-clock columns aside (two
    runs of one seed and configuration are the same run).

    A checkpoint copied in from another run (another seed, say) matched its own configuration and, without
    ``config.json``, nothing else: the resumed run then logged its rows after the folder's. A checkpoint from before
    the record, or a folder that lost that row, has nothing to compare.

    :raises ConfigError: naming the iteration, what differs, and what to do.
    """
    recorded = state.get("last_row")
    if not isinstance(recorded, Mapping):
        return
    logged = [row for row in rows if row.get("iteration") == recorded.get("iteration")]
    seeded = _seeded(recorded)
    if not logged or any(_same_row(row, seeded) for row in logged):
        return
    row = logged[-1]
    differences = [f"{key}: {row.get(key)!r} logged, {value!r} in the checkpoint" for key, value in seeded.items()
                   if row.get(key) != value][:3]
    raise ConfigError(
        f"{path} is not the checkpoint of the run logged beside it: its iteration {recorded.get('iteration')} "
        f"differs from the row logged for it in metrics.jsonl ({'; '.join(differences)}); the checkpoint's run has "
        f"seed {state['config'].get('seed')}. Restore the run's own {Path(path).name}; or start the run over with "
        "--overwrite, or resume the checkpoint's run in its own folder")


def _seeded(row: Mapping[str, Any]) -> dict:
    """A metrics row without its wall-clock columns (``time_*``)."""
    return {key: value for key, value in row.items() if not key.startswith("time_")}


def _same_row(row: Mapping[str, Any], seeded: Mapping[str, Any]) -> bool:
    # As JSON, as metrics.jsonl holds them: a NaN (a learner's loss, say) equals a NaN.
    return json.dumps(_seeded(row), sort_keys=True) == json.dumps(dict(seeded), sort_keys=True)


class Resumed(NamedTuple):
    """What :func:`load_checkpoint` gives back besides the restored objects."""

    iteration: int  # completed iterations: the next one to run
    counters: dict
    monitors_restored: bool  # False for a checkpoint written before the monitors' state was saved


def load_checkpoint(
    path: str | Path,
    *,
    config: Mapping[str, Any],
    policy: torch.nn.Module,
    sampler: Any,
    metalearner: Any,
    monitors: Mapping[str, Any] | None = None,
    state: Mapping[str, Any] | None = None,
) -> Resumed:
    """Restore the state saved by :func:`save_checkpoint` into the given objects.

    Restores the random generators too, so call it last, just before the loop.

    :param monitors: objects with a ``load_state_dict()``, by the names given to :func:`save_checkpoint`.
    :param state: the checkpoint as :func:`read_checkpoint` read it (read from ``path`` when ``None``).
    :raises ConfigError: the checkpoint belongs to another configuration.
    """
    state = read_checkpoint(path) if state is None else state
    check_checkpoint_config(state, config, path)
    policy.load_state_dict(state["policy"])
    sampler.load_state_dict(state["sampler"])
    if "metalearner" in state or metalearner.state_dict():
        if "metalearner" not in state:
            raise ConfigError(f"{path} holds no state of the meta-learner {type(metalearner).__name__}; "
                              "start the run again with --overwrite")
        metalearner.load_state_dict(state["metalearner"])
    saved_monitors = state.get("monitors", {})
    restored = bool(monitors) and all(name in saved_monitors for name in monitors)
    if restored:
        for name, monitor in monitors.items():
            monitor.load_state_dict(saved_monitors[name])
    _set_rng_state(state["rng"])
    return Resumed(int(state["iteration"]), dict(state["counters"]), restored)
