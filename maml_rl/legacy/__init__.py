"""pytorch-maml-rl's user-level API, and this package's earlier module paths, kept so that old scripts run here.

This package shares pytorch-maml-rl's import name. Everything of that
repository's API that scripts built on its ``train.py``/``test.py`` use is
served from here, each name with a :class:`LegacyAPIWarning` (a
``DeprecationWarning``) once per process that names the call replacing it;
``docs/migrating.md`` lists every name, config key and env id.

It sits at the edge of the package: the package root calls :func:`install`,
and no other module of ``maml_rl`` imports this package (a test checks it).
Each old name is an adapter over the new API, attached from here when the
module it belongs to is imported (:mod:`maml_rl.legacy.moved`); removing this
package and that call leaves the rest working, without the old names.

- ``maml_rl.utils.helpers`` (``get_policy_for_env``, ``get_input_size``),
  ``maml_rl.utils.reinforcement_learning`` (``get_returns``,
  ``reinforce_loss``) and ``maml_rl.episode`` (``BatchEpisodes``): modules
  without a file, made by :mod:`maml_rl.legacy.moved`'s finder, whose names
  resolve to :mod:`maml_rl.legacy.names`.
- ``maml_rl.utils.torch_utils.weighted_mean``, ``to_numpy``, ``vector_to_parameters``:
  :mod:`maml_rl.legacy.tensors`.
- ``MultiTaskSampler(..., env=env)``, ``sample``, ``sample_async``, ``sample_wait``:
  :mod:`maml_rl.legacy.sampler`.
- ``MAMLTRPO(policy, fast_lr, first_order, device)`` and
  ``MAMLTRPO.step(*futures, max_kl=..., ...)``: :mod:`maml_rl.legacy.trpo`.
- the reference's ``config.json``, and ``maml_rl.config.load_config`` and its
  siblings: :mod:`maml_rl.legacy.config`.
- this package's earlier module paths (``maml_rl.episodes``, ...): :mod:`maml_rl.legacy.moved`.
"""

from maml_rl.legacy.moved import install
from maml_rl.legacy.warn import LegacyAPIWarning, warn_once

__all__ = ["LegacyAPIWarning", "install", "warn_once"]
