"""Every hyperparameter's default, written once.

The configuration files (:mod:`maml_rl.config`), the meta-learner
(:class:`~maml_rl.metalearners.MAMLTRPO`) and the sampler
(:meth:`~maml_rl.samplers.MultiTaskSampler.sample`) all take their defaults
from :data:`DEFAULTS`, so that leaving a key out means the same thing
everywhere. Imports nothing heavy: the config module and worker-side code
can read it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULTS", "Hyperparameters"]


@dataclass(frozen=True)
class Hyperparameters:
    """The hyperparameters of MAML-TRPO with their defaults (pytorch-maml-rl's where it had one).

    Config files spell them with dashes (``fast-lr``, ``loss-averaging`` for
    ``loss_averaging``); :mod:`maml_rl.config` lists which a file must give.
    """

    gamma: float = 0.95
    """Discount factor of returns and advantages."""
    gae_lambda: float = 1.0
    """GAE lambda; 1 gives Monte-Carlo returns minus the baseline."""
    fast_lr: float = 0.5
    """Step size of the inner (adaptation) gradient steps."""
    num_steps: int = 1
    """Inner gradient steps per task."""
    loss_averaging: str = "step"
    """How a task's losses weigh its steps: ``"step"`` (every valid step the same) or ``"episode"``."""
    first_order: bool = False
    """Ignore the second derivatives through the inner steps."""
    max_kl: float = 1.0e-2
    """TRPO trust-region radius on the mean KL divergence."""
    cg_iters: int = 10
    """Conjugate-gradient iterations for the natural-gradient direction."""
    cg_damping: float = 1.0e-5
    """Multiple of the identity added to the KL Hessian."""
    ls_max_steps: int = 15
    """Most backtracking line-search trials."""
    ls_backtrack_ratio: float = 0.8
    """Step shrink factor between line-search trials."""
    algorithm: str = "maml-trpo"
    """The meta-learner (a key of :data:`maml_rl.metalearners.METALEARNERS`)."""


#: The defaults used wherever a hyperparameter is not given.
DEFAULTS = Hyperparameters()
