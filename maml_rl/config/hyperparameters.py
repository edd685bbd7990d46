"""The keys every algorithm uses, declared once: their type, default, check and help.

A :class:`Hyperparameter` is the single declaration of one key. Each
algorithm declares its own keys beside its code (``maml_rl/metalearners/<family>/keys.py``,
the learner's ``hyperparameters``); this module holds only :data:`SHARED_KEYS`, the keys of
every algorithm, and :func:`defaults_of`, which turns declarations into the
frozen defaults that the Python API takes (``DEFAULTS.gamma``), so that a key
left out means the same in a config file and in a call.

The configuration files themselves are read and checked against the registered
algorithms' keys by :mod:`maml_rl.app.config_files`. Imports nothing of maml_rl's
but the key declaration (:mod:`.declaration`), and the policies when checking a ``nonlinearity``.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from typing import Any, Iterable, Mapping

from maml_rl.config.declaration import (  # noqa: F401  (the checks are part of this module's API)
    BOOLEAN,
    POSITIVE_INT,
    REQUIRED,
    Check,
    Hyperparameter,
    InvalidValue,
    _env_kwargs,
    _hidden_sizes,
    _name,
    _nonlinearity,
    _seed,
    choice,
    integer,
    number,
    optional,
)

__all__ = [
    "DEFAULTS",
    "EARLIER_SHARED_KEYS",
    "REQUIRED",
    "SHARED_KEYS",
    "BOOLEAN",
    "POSITIVE_INT",
    "Check",
    "Hyperparameter",
    "InvalidValue",
    "choice",
    "defaults_of",
    "integer",
    "number",
    "optional",
]


# -------------------------------------------------------------- declarations
#: The keys of every algorithm, in the order a resolved configuration lists them (after ``algorithm``,
#: whose values and default are the registry's: :mod:`maml_rl.app.config_files`).
SHARED_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("env-name", str, REQUIRED, Check(_name, "a registered environment id (string)"),
                   "Environment id, e.g. 2DNavigation-v0 or HalfCheetahVel-v5."),
    Hyperparameter("env-kwargs", dict, {}, Check(_env_kwargs, "a mapping of keyword arguments for gymnasium.make"),
                   "Keyword arguments of gymnasium.make (max_episode_steps, task ranges, ...)."),
    Hyperparameter("gamma", float, 0.95, number(0.0, 1.0),
                   "Discount factor of returns and advantages; left out, the same default as the Python API "
                   "(every shipped config gives it)."),
    Hyperparameter("gae-lambda", float, 1.0, number(0.0, 1.0),
                   "GAE lambda; 1 gives Monte-Carlo returns minus the baseline.", argument="gae_lambda"),
    Hyperparameter("hidden-sizes", list, REQUIRED, Check(_hidden_sizes, "a list of integers >= 1, e.g. [64, 64]"),
                   "Widths of the policy's hidden layers."),
    Hyperparameter("nonlinearity", str, REQUIRED, Check(_nonlinearity, "an activation name such as tanh or relu"),
                   "Activation of the policy's hidden layers."),
    Hyperparameter("fast-batch-size", int, REQUIRED, POSITIVE_INT,
                   "Episodes per task in each rollout of an iteration (before each inner step and after the "
                   "last one, for the gradient-based algorithms)."),
    Hyperparameter("num-batches", int, REQUIRED, POSITIVE_INT, "Meta-updates (outer iterations) of the run."),
    Hyperparameter("meta-batch-size", int, REQUIRED, POSITIVE_INT, "Tasks per meta-update."),
    Hyperparameter("seed", int, None, Check(_seed, "null or an integer in [0, 2**63)"),
                   "Seed of the run; null draws one (recorded in config.json)."),
)

#: Keys that config.json files and checkpoints of maml_rl 0.1 list for every algorithm, with the value they
#: held there when the algorithm had no use for them: such a key at that value is dropped on reading, so
#: that those runs load and resume. (They are the gradient-based algorithms' keys now.)
EARLIER_SHARED_KEYS: dict[str, Any] = {"num-steps": 1, "fast-lr": 0.5, "loss-averaging": "step"}


def defaults_of(*declarations: Iterable[Hyperparameter], name: str = "Hyperparameters",
                module: str = __name__) -> Any:
    """Every default of ``declarations`` as one frozen dataclass instance, by attribute name
    (``fast-lr`` -> ``fast_lr``); a required key has none.

    :raises ValueError: a key is declared twice with different defaults.
    """
    declared: dict[str, Hyperparameter] = {}
    for hyperparameter in (h for keys in declarations for h in keys):
        other = declared.setdefault(hyperparameter.attribute, hyperparameter)
        if other.default != hyperparameter.default:
            raise ValueError(f"{hyperparameter.key} is declared twice with different defaults")
    fields = [
        (h.attribute, h.type, field(default_factory=h.default_value) if isinstance(h.default, (Mapping, list))
         else field(default=h.default))
        for h in declared.values() if not h.required
    ]
    cls = make_dataclass(name, fields, frozen=True)
    cls.__module__ = module
    cls.__doc__ = "Every declared default, by attribute name (``gae-lambda`` -> ``gae_lambda``)."
    return cls()


#: The shared keys' defaults, used wherever one is not given.
DEFAULTS = defaults_of(SHARED_KEYS)
