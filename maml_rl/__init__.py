"""maml_rl: MAML for reinforcement learning on gymnasium 1.x and MuJoCo.

One subpackage per layer (docs/architecture.md), bottom to top: ``utils``,
``envs``, ``policies``, ``config`` (the key table and config files), ``data``
(episodes, trials, the baseline), ``samplers`` and ``metalearners`` (side by
side), ``app`` (training, evaluation, run folders, reports). ``legacy`` keeps
the names of pytorch-maml-rl and of this package's earlier module paths: this
file installs it, and no other module imports it.
"""

from maml_rl.legacy import install as _install_legacy

__version__ = "0.1.0"

_install_legacy()
