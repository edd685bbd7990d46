"""Module paths of earlier releases, kept importable after the package root was split into layers.

``import maml_rl.episodes`` gives the module ``maml_rl.data.episodes`` itself
(the same object, so its classes are the same classes), with a
:class:`~maml_rl.legacy.warn.LegacyAPIWarning` once per old path that names
the new one. ``maml_rl.baseline`` is pytorch-maml-rl's own path, which
docs/migrating.md promises unchanged: it resolves without a warning.

A finder at the front of ``sys.meta_path`` answers only for these names and
the modules under them (``maml_rl.runs.checkpoints``), so a moved module is
never loaded a second time under its old name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Optional

from maml_rl.legacy.warn import warn_once

__all__ = ["EARLIER", "MOVED_MODULES", "install"]

EARLIER = "a module path of maml_rl 0.1"

#: Old module path -> (new path, whether importing the old one warns).
MOVED_MODULES: dict[str, tuple[str, bool]] = {
    "maml_rl.baseline": ("maml_rl.data.baseline", False),  # pytorch-maml-rl's path, promised unchanged
    "maml_rl.episodes": ("maml_rl.data.episodes", True),
    "maml_rl.trials": ("maml_rl.data.trials", True),
    "maml_rl.hyperparameters": ("maml_rl.config.hyperparameters", True),
    "maml_rl.adaptation": ("maml_rl.metalearners.gradient.adaptation", True),
    "maml_rl.losses": ("maml_rl.metalearners.gradient.losses", True),
    "maml_rl.training": ("maml_rl.app.training", True),
    "maml_rl.evaluation": ("maml_rl.app.evaluation", True),
    "maml_rl.command_line": ("maml_rl.app.command_line", True),
    "maml_rl.report_runs": ("maml_rl.app.report_runs", True),
    "maml_rl.reports": ("maml_rl.app.reports", True),
    "maml_rl.seeds": ("maml_rl.app.multi_seed", True),
    "maml_rl.plotting": ("maml_rl.app.plotting", True),
    "maml_rl.results": ("maml_rl.app.results", True),
    "maml_rl.startup": ("maml_rl.app.startup", True),
    "maml_rl.runs": ("maml_rl.app.runs", True),
    # One folder per algorithm family (0.2).
    "maml_rl.metalearners.adaptation": ("maml_rl.metalearners.gradient.adaptation", True),
    "maml_rl.metalearners.losses": ("maml_rl.metalearners.gradient.losses", True),
    "maml_rl.metalearners.meta_graph": ("maml_rl.metalearners.gradient.meta_graph", True),
    "maml_rl.metalearners.sampling": ("maml_rl.metalearners.gradient.sampling_loop", True),
    "maml_rl.metalearners.maml_trpo": ("maml_rl.metalearners.gradient.maml_trpo", True),
    "maml_rl.metalearners.promp": ("maml_rl.metalearners.gradient.promp", True),
    "maml_rl.metalearners.rl2_ppo": ("maml_rl.metalearners.rl2.learner", True),
    "maml_rl.metalearners.pearl.state": ("maml_rl.metalearners.pearl.task_encoding", True),
    # The config files' reader asks the algorithm registry, so it sits in app/ (0.2).
    "maml_rl.config.loading": ("maml_rl.app.config_files", True),
}


def new_name(old: str) -> Optional[tuple[str, str, bool]]:
    """``(old root, new module name, warns)`` for a moved module or one under it, else ``None``."""
    for root, (new_root, warns) in MOVED_MODULES.items():
        if old == root or old.startswith(root + "."):
            return root, new_root + old[len(root):], warns
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("maml_rl.") or new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        root, new, warns = new_name(spec.name)
        if warns:
            warn_once(root, f"it moved to {MOVED_MODULES[root][0]}: import that instead", whose=EARLIER)
        # The module under its new name: the import system keeps its name and spec, and binds it to the old one.
        return importlib.import_module(new)

    def exec_module(self, module):
        """Already executed under its new name."""


_FINDER = _MovedModules()


def install() -> None:
    """Put the finder in front of ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
