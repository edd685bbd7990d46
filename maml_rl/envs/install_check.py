"""A MuJoCo install that pip left broken, named with its repair before any env is built.

From 4.0, the ``mujoco`` distribution is a thin shell over ``mujoco-core`` (and ``mujoco-studio``), and all
three write into the same ``mujoco/`` folder. Installing ``mujoco==3.3.0`` (Meta-World's pin) over MuJoCo 4
replaces ``mujoco`` alone: ``mujoco-core`` 4's plugins stay behind and ``import mujoco`` fails with
``OSError: libmujoco.so.4.0.0``, though pip reports success and ``pip check`` finds nothing. Going back with
``pip install mujoco==4.0.0`` deletes the files 3.3 shared with ``mujoco-core``, so that fails too. The check
reads the installed distributions' metadata and file lists only: it imports nothing and costs milliseconds.
"""

from __future__ import annotations

from importlib import metadata
from typing import Mapping, NamedTuple, Optional, Sequence

__all__ = ["BrokenMuJoCoInstallError", "Distribution", "check_mujoco_install", "mujoco_install_problem"]

#: The distributions that install into the ``mujoco`` package folder.
PARTS = ("mujoco", "mujoco-core", "mujoco-studio")


class BrokenMuJoCoInstallError(ImportError):
    """The installed MuJoCo distributions do not fit together: ``import mujoco`` fails or loads a mixture."""


class Distribution(NamedTuple):
    """What the check needs to know of one installed distribution."""

    version: str
    #: Files its RECORD lists in the ``mujoco`` folder that are not on disk (another install removed them).
    missing: Sequence[str] = ()


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def repair_commands(version: str) -> tuple[str, str]:
    """The two repairs: back to MuJoCo 4 (``version`` if it is a 4.x, else 4.0.0), or to MuJoCo 3.3 alone."""
    four = version if _major(version) >= 4 else "4.0.0"
    to_four = ("pip uninstall -y mujoco && pip install --force-reinstall --no-deps "
               + " ".join(f"{name}=={four}" for name in PARTS))
    to_three = "pip uninstall -y mujoco-core mujoco-studio && pip install --force-reinstall --no-deps mujoco==3.3.0"
    return to_four, to_three


def mujoco_install_problem(installed: Mapping[str, Distribution]) -> Optional[str]:
    """What is wrong with the MuJoCo distributions ``installed`` (by name, those of :data:`PARTS` present),
    with the commands that repair it; ``None`` when they fit together (or MuJoCo is not installed)."""
    main = installed.get("mujoco")
    if main is None:
        return None
    others = {name: dist for name, dist in installed.items() if name != "mujoco"}
    if _major(main.version) < 4:
        if not others:
            return _missing_files(installed)
        left = ", ".join(f"{name} {dist.version}" for name, dist in sorted(others.items()))
        cause = (f"mujoco {main.version} is installed over MuJoCo 4 and {left} stayed behind in the same folder, "
                 f"so `import mujoco` fails (OSError: libmujoco.so.<4.x> not found). This happens when Meta-World's "
                 f"mujoco==3.3.0 pin is installed into a venv that has MuJoCo 4 (`pip install -e \".[metaworld]\"` "
                 f"after `.[dev]`)")
    else:
        wrong = {name: dist.version for name, dist in others.items() if dist.version != main.version}
        if "mujoco-core" not in others:
            wrong["mujoco-core"] = "not installed"
        if not wrong:
            return _missing_files(installed)
        cause = (f"mujoco {main.version} needs mujoco-core and mujoco-studio of the same version, found "
                 + ", ".join(f"{name} {version}" for name, version in sorted(wrong.items())))
    return cause + _repair_text(main.version)


def _missing_files(installed: Mapping[str, Distribution]) -> Optional[str]:
    gone = {name: dist.missing for name, dist in installed.items() if dist.missing}
    if not gone:
        return None
    name, files = sorted(gone.items())[0]
    more = f" and {len(files) - 1} more" if len(files) > 1 else ""
    return (f"{name} {installed[name].version} lacks files of its install ({files[0]}{more}): another MuJoCo "
            f"version installed over it and removed them (e.g. `pip install mujoco==4.0.0` after Meta-World's "
            f"mujoco 3.3.0, which took files that mujoco-core shares with it)" + _repair_text(installed["mujoco"].version))


def _repair_text(version: str) -> str:
    to_four, to_three = repair_commands(version)
    return (f".\nRepair it in this venv with one of:\n"
            f"  {to_four}\n"
            f"      MuJoCo 4 (the sampler's fast path); Meta-World then runs beside it without its pin, as "
            f"docs/environments.md#installing says\n"
            f"  {to_three}\n"
            f"      MuJoCo 3.3 alone, as Meta-World pins it (the fast path steps one env at a time)")


def _installed() -> dict[str, Distribution]:
    found = {}
    for name in PARTS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        # The files directly in the package folder: the extension modules and libraries a mixed install loses.
        missing = [str(path) for path in dist.files or ()
                   if len(path.parts) == 2 and path.parts[0] == "mujoco" and not path.name.endswith(".pyc")
                   and not path.locate().exists()]
        found[name] = Distribution(dist.version, missing)
    return found


def check_mujoco_install() -> None:
    """Raise :class:`BrokenMuJoCoInstallError` naming the cause and the repair if the installed MuJoCo
    distributions do not fit together; nothing if they do or MuJoCo is not installed."""
    problem = mujoco_install_problem(_installed())
    if problem is not None:
        raise BrokenMuJoCoInstallError(f"the MuJoCo install is broken: {problem}")
