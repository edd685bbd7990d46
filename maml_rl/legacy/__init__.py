"""pytorch-maml-rl's user-level API, kept so that its users' scripts run here.

This package shares pytorch-maml-rl's import name. Everything of that
repository's API that scripts built on its ``train.py``/``test.py`` use is
served from here, each name with a :class:`LegacyAPIWarning` (a
``DeprecationWarning``) once per process that names the call replacing it;
``docs/migrating.md`` lists every name, config key and env id. Nothing else
in ``maml_rl`` uses this package (a test checks it): it can be removed
without touching the rest.

- ``maml_rl.utils.helpers`` (``get_policy_for_env``, ``get_input_size``),
  ``maml_rl.utils.reinforcement_learning`` (``get_returns``,
  ``reinforce_loss``) and ``maml_rl.episode`` (``BatchEpisodes``): modules at
  the old paths whose names resolve to :mod:`maml_rl.legacy.names`.
- ``MultiTaskSampler(..., env=env)``, ``sample_async``/``sample_wait``:
  :mod:`maml_rl.legacy.sampler`.
- ``MAMLTRPO(policy, fast_lr, first_order, device)`` and
  ``MAMLTRPO.step(*futures, max_kl=..., ...)``: :mod:`maml_rl.legacy.trpo`.
"""

from maml_rl.legacy.warn import LegacyAPIWarning, warn_once

__all__ = ["LegacyAPIWarning", "warn_once"]
