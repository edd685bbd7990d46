"""The import-time side of ``maml_rl.legacy``: one finder that serves old module paths and adapts new modules.

It sits at the front of ``sys.meta_path`` (:func:`install`, called by the
package root) and answers for three kinds of names only:

- this package's earlier paths (:data:`MOVED_MODULES`): ``import maml_rl.episodes``
  gives the module ``maml_rl.data.episodes`` itself (the same object, so its
  classes are the same classes), with a
  :class:`~maml_rl.legacy.warn.LegacyAPIWarning` once per old path that names
  the new one, and so do the modules under them (``maml_rl.runs.checkpoints``),
  never loaded a second time under the old name. ``maml_rl.baseline`` is
  pytorch-maml-rl's own path, which docs/migrating.md promises unchanged: it
  resolves without a warning;
- pytorch-maml-rl's module paths (:data:`OLD_MODULES`: ``maml_rl.episode``,
  ``maml_rl.utils.helpers``, ``maml_rl.utils.reinforcement_learning``): a module
  made here, with no file, whose names resolve in :mod:`maml_rl.legacy.names`
  and warn once;
- the modules that keep an old name or argument (:data:`ADAPTERS`): the module
  is found and executed as usual, then a function of ``maml_rl.legacy`` adapts
  it (attaches ``MultiTaskSampler.sample``, wraps ``MAMLTRPO.__init__``, ...).
  The adapters are looked up only when the module is imported, so that
  ``import maml_rl`` (a worker process's, say) loads nothing more.

Every other name is left to the rest of ``sys.meta_path``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading
import types
from typing import Any, Optional

from maml_rl.legacy.warn import module_getattr, warn_once

__all__ = ["ADAPTERS", "EARLIER", "MOVED_MODULES", "OLD_MODULES", "install"]

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

#: pytorch-maml-rl's modules with no file here: their names are :data:`maml_rl.legacy.names.MOVED`'s.
OLD_MODULES = ("maml_rl.episode", "maml_rl.utils.helpers", "maml_rl.utils.reinforcement_learning")

#: Module -> ``"module:function"`` of ``maml_rl.legacy`` called with it once it has been executed.
ADAPTERS: dict[str, str] = {
    "maml_rl.utils.torch_utils": "maml_rl.legacy.tensors:adapt",  # weighted_mean, to_numpy, ...
    "maml_rl.config": "maml_rl.legacy.config:adapt_package",  # maml_rl.config.load_config, ...
    "maml_rl.app.config_files": "maml_rl.legacy.config:adapt_loading",  # the reference's config.json
    "maml_rl.samplers.sampler": "maml_rl.legacy.sampler:adapt",  # env=, sample, sample_async, sample_wait
    "maml_rl.metalearners": "maml_rl.legacy.trpo:adapt",  # MAMLTRPO's positional order, step(max_kl=...)
}


def new_name(old: str) -> Optional[tuple[str, str, bool]]:
    """``(old root, new module name, warns)`` for a moved module or one under it, else ``None``."""
    for root, (new_root, warns) in MOVED_MODULES.items():
        if old == root or old.startswith(root + "."):
            return root, new_root + old[len(root):], warns
    return None


def adapt(module: types.ModuleType) -> None:
    """Run ``module``'s adapter of :data:`ADAPTERS` (each adapter may run again: it changes nothing then)."""
    target = ADAPTERS.get(module.__name__)
    if target is None:
        return
    where, function = target.split(":")
    getattr(importlib.import_module(where), function)(module)


class _Adapting(importlib.abc.Loader):
    """A module's own loader, then its adapter (everything else is the own loader's: ``get_source``, ...)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        adapt(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class _LegacyFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self._finding = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("maml_rl."):
            return None
        if fullname in OLD_MODULES or new_name(fullname) is not None:
            return importlib.util.spec_from_loader(fullname, self)
        if fullname in ADAPTERS and fullname not in getattr(self._finding, "names", ()):
            return self._adapting_spec(fullname, path, target)
        return None

    def _adapting_spec(self, fullname, path, target):
        """The spec the rest of ``sys.meta_path`` finds, its loader wrapped to adapt the module."""
        names = self._finding.__dict__.setdefault("names", set())
        names.add(fullname)
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                spec = None if finder is self or find is None else find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            names.discard(fullname)
        if spec.loader is not None:
            spec.loader = _Adapting(spec.loader)
        return spec

    def create_module(self, spec):
        if spec.name in OLD_MODULES:
            from maml_rl.legacy.names import GONE, MOVED

            module = types.ModuleType(spec.name, f"pytorch-maml-rl's {spec.name}, kept for old scripts "
                                                 "(deprecated: see maml_rl.legacy and docs/migrating.md).")
            module.__getattr__ = module_getattr(spec.name, MOVED[spec.name], GONE.get(spec.name))
            return module
        root, new, warns = new_name(spec.name)
        if warns:
            warn_once(root, f"it moved to {MOVED_MODULES[root][0]}: import that instead", whose=EARLIER)
        # The module under its new name: the import system keeps its name and spec, and binds it to the old one.
        return importlib.import_module(new)

    def exec_module(self, module):
        """Already executed under its new name, or (an old module of pytorch-maml-rl) nothing to execute."""


_FINDER = _LegacyFinder()


def install() -> None:
    """Put the finder in front of ``sys.meta_path`` (once), and adapt the modules already imported."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    for name in ADAPTERS:
        module = sys.modules.get(name)
        if module is not None:
            adapt(module)
