"""Every configuration key, declared once: its type, default, check and help.

A :class:`Hyperparameter` is the single declaration of one key. Everything
else is derived from the declarations below:

* :mod:`maml_rl.config.loading` validates files with them (and renders the key
  reference of ``docs/training.md`` from them);
* :data:`DEFAULTS` holds every default by attribute name (``fast-lr`` ->
  ``DEFAULTS.fast_lr``): the Python API (:class:`~maml_rl.metalearners.MAMLTRPO`,
  :class:`~maml_rl.metalearners.adaptation.InnerLoop`, the sampler) takes its defaults
  from it, so a key left out means the same in a config file and in a call;
* a meta-learner's ``from_config`` passes each key with an ``argument`` to
  that keyword of its constructor.

Keys are grouped into :data:`SHARED_KEYS`, used by every algorithm, and one
section per algorithm in :data:`ALGORITHM_KEYS`; a configuration may only
hold the shared keys and those of its ``algorithm`` (:mod:`maml_rl.config.loading`
checks that ``algorithm`` names a registered meta-learner). Imports nothing
of maml_rl's but the policies, and only when checking a ``nonlinearity``: the
episodes, the sampler and the meta-learners read :data:`DEFAULTS` from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Callable, Mapping

__all__ = [
    "ALGORITHM_KEYS",
    "DEFAULTS",
    "REQUIRED",
    "SHARED_KEYS",
    "Check",
    "Hyperparameter",
    "Hyperparameters",
    "InvalidValue",
    "MAML_TRPO_KEYS",
    "PROMP_KEYS",
    "RL2_PPO_KEYS",
    "choice",
    "integer",
    "number",
    "optional",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The ``default`` of a key a configuration must give.
REQUIRED: Any = _Required()


class InvalidValue(Exception):
    """Raised by a :class:`Check` for a value it refuses; its message, if any, adds a detail."""


@dataclass(frozen=True)
class Check:
    """A key's validator: ``convert(value)`` returns the normalised value or raises :class:`InvalidValue`.

    :ivar expected: what a valid value is, for error messages and the key reference.
    """

    convert: Callable[[Any], Any]
    expected: str


@dataclass(frozen=True)
class Hyperparameter:
    """One configuration key.

    :ivar key: its name in configuration files (``fast-lr``).
    :ivar type: the Python type of its value, once checked.
    :ivar default: its value when left out, or :data:`REQUIRED`.
    :ivar check: validator and description of the accepted values.
    :ivar help: one line saying what it does.
    :ivar argument: the keyword of the meta-learners' constructors that takes it
        (``None``: the key is used by the training script, not the meta-learner).
    """

    key: str
    type: type
    default: Any
    check: Check
    help: str
    argument: str | None = None

    @property
    def attribute(self) -> str:
        """Its name as an attribute of :data:`DEFAULTS` (``fast-lr`` -> ``fast_lr``)."""
        return self.key.replace("-", "_")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def expected(self) -> str:
        return self.check.expected

    def default_value(self) -> Any:
        """The default, as a fresh copy when it is mutable."""
        return dict(self.default) if isinstance(self.default, Mapping) else self.default


# -------------------------------------------------------------------- checks
def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(minimum: int) -> Check:
    """An integer (not a bool) ``>= minimum``."""

    def convert(value: Any) -> int:
        if not _is_int(value) or value < minimum:
            raise InvalidValue
        return int(value)

    return Check(convert, f"an integer >= {minimum}")


def number(low: float | None = None, high: float | None = None, *, open_low: bool = False,
           open_high: bool = False) -> Check:
    """A finite number (an int is read as a float) in ``[low, high]``; ``open_low``/``open_high`` exclude the bound."""

    def convert(value: Any) -> float:
        if not (_is_int(value) or isinstance(value, float)):
            raise InvalidValue
        value = float(value)
        if not math.isfinite(value):
            raise InvalidValue
        if low is not None and (value < low or (open_low and value == low)):
            raise InvalidValue
        if high is not None and (value > high or (open_high and value == high)):
            raise InvalidValue
        return value

    if low is not None and high is not None:
        expected = f"a number in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
    elif low is not None:
        expected = f"a number {'>' if open_low else '>='} {low:g}"
    else:
        expected = "a number"
    return Check(convert, expected)


def optional(check: Check) -> Check:
    """``null``, or a value that ``check`` accepts."""

    def convert(value: Any) -> Any:
        return None if value is None else check.convert(value)

    return Check(convert, f"null or {check.expected}")


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidValue
    return value


def _env_kwargs(value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(name, str) for name in value):
        raise InvalidValue
    return dict(value)


def _hidden_sizes(value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(_is_int(size) and size >= 1 for size in value):
        raise InvalidValue
    return [int(size) for size in value]


def _nonlinearity(value: Any) -> str:
    from maml_rl.policies import get_nonlinearity

    if not isinstance(value, str):
        raise InvalidValue
    try:
        get_nonlinearity(value)
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidValue
    return value


def _seed(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value < 2**63:
        raise InvalidValue
    return int(value)


def choice(*values: str) -> Check:
    """One of the strings ``values``."""

    def convert(value: Any) -> str:
        if not isinstance(value, str) or value not in values:
            raise InvalidValue
        return value

    return Check(convert, " or ".join(f'"{value}"' for value in values))


BOOLEAN = Check(_boolean, "true or false")
POSITIVE_INT = integer(1)


# -------------------------------------------------------------- declarations
#: The keys of every algorithm, in the order a resolved configuration lists them.
SHARED_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("algorithm", str, "maml-trpo", Check(_name, "a meta-learner name"),
                   "The meta-learner; its own keys are listed in its section below."),
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
                   "Episodes per task before each inner step and after the last one."),
    Hyperparameter("num-steps", int, 1, POSITIVE_INT, "Inner (adaptation) gradient steps per task.",
                   argument="num_steps"),
    Hyperparameter("fast-lr", float, 0.5, number(0.0, open_low=True),
                   "Step size of the inner gradient steps; left out, the same default as the Python API "
                   "(every shipped config gives it).", argument="fast_lr"),
    Hyperparameter("num-batches", int, REQUIRED, POSITIVE_INT, "Meta-updates (outer iterations) of the run."),
    Hyperparameter("meta-batch-size", int, REQUIRED, POSITIVE_INT, "Tasks per meta-update."),
    Hyperparameter("loss-averaging", str, "step", choice("step", "episode"),
                   'How a task\'s losses weigh its steps: "step" (each valid step alike) or "episode" '
                   "(mean of per-episode means, as pytorch-maml-rl).", argument="averaging"),
    Hyperparameter("seed", int, None, Check(_seed, "null or an integer in [0, 2**63)"),
                   "Seed of the run; null draws one (recorded in config.json)."),
)

#: The keys of MAML with a TRPO meta-update (:class:`~maml_rl.metalearners.MAMLTRPO`).
MAML_TRPO_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("first-order", bool, False, BOOLEAN,
                   "Ignore the second derivatives through the inner steps (first-order MAML).",
                   argument="first_order"),
    Hyperparameter("max-kl", float, 1.0e-2, number(0.0, open_low=True),
                   "Trust-region radius on the mean KL divergence.", argument="max_kl"),
    Hyperparameter("cg-iters", int, 10, POSITIVE_INT,
                   "Conjugate-gradient iterations for the natural-gradient direction.", argument="cg_iters"),
    Hyperparameter("cg-damping", float, 1.0e-5, number(0.0),
                   "Multiple of the identity added to the KL Hessian.", argument="cg_damping"),
    Hyperparameter("ls-max-steps", int, 15, POSITIVE_INT,
                   "Most backtracking line-search trials.", argument="ls_max_steps"),
    Hyperparameter("ls-backtrack-ratio", float, 0.8, number(0.0, 1.0, open_low=True, open_high=True),
                   "Step shrink factor between line-search trials.", argument="ls_backtrack_ratio"),
)

#: The keys of RL² with a PPO update (:class:`~maml_rl.metalearners.RL2PPO`). Defaults follow
#: metaworld-algorithms' RL² (docs/training.md, "RL²", lists where this package departs from it).
RL2_PPO_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("episodes-per-trial", int, 10, POSITIVE_INT,
                   "Episodes of one task per trial; the policy's state is kept across them.",
                   argument="episodes_per_trial"),
    Hyperparameter("gru-size", int, 256, POSITIVE_INT, "Width of the policy's GRU (after the hidden-sizes encoder)."),
    Hyperparameter("reward-scale", float, 1.0, number(0.0),
                   "Factor of the previous reward in the policy's input (Meta-World: 0.1).",
                   argument="reward_scale"),
    Hyperparameter("ppo-epochs", int, 10, POSITIVE_INT, "Passes over the iteration's trials.", argument="epochs"),
    Hyperparameter("ppo-minibatches", int, 1, POSITIVE_INT, "Minibatches of whole trials per epoch.",
                   argument="minibatches"),
    Hyperparameter("clip", float, 0.2, number(0.0, open_low=True), "PPO's ratio clip.", argument="clip"),
    Hyperparameter("lr", float, 5.0e-4, number(0.0, open_low=True), "Adam's learning rate.", argument="lr"),
    Hyperparameter("entropy-coef", float, 5.0e-3, number(0.0), "Weight of the entropy bonus.",
                   argument="entropy_coef"),
    Hyperparameter("max-grad-norm", float, 1.0, number(0.0, open_low=True), "Gradient-norm clip of each update.",
                   argument="max_grad_norm"),
    Hyperparameter("bptt-chunk", int, 250, POSITIVE_INT,
                   "Truncated BPTT: gradients flow through the state for at most this many steps.",
                   argument="bptt_chunk"),
    Hyperparameter("normalize-advantages", bool, True, BOOLEAN,
                   "Centre and scale the advantages of each task's trials.", argument="normalize_advantages"),
    Hyperparameter("update-per-chunk", bool, False, BOOLEAN,
                   "Take an Adam step per BPTT chunk of each minibatch, in the trial's order, the state carried "
                   "from the chunk before (metaworld-algorithms' scheme: ~20 steps per epoch on 5,000-step "
                   "trials); false: one step per minibatch of whole trials.", argument="update_per_chunk"),
    Hyperparameter("bptt-overlap", int, 0, integer(0),
                   "With update-per-chunk: steps each chunk shares with the next (chunks start every bptt-chunk "
                   "minus this many steps; the state entering a chunk is the one the chunk before reached "
                   "there); metaworld-algorithms: 50.", argument="bptt_overlap"),
    Hyperparameter("action-head", str, "linear", choice("linear", "tanh"),
                   "The GRU policy's Gaussian head: \"linear\", a linear mean and a learned state-independent "
                   "log-std; \"tanh\", metaworld-algorithms' head, mean and log-std both network outputs "
                   "passed through tanh."),
    Hyperparameter("baseline-inputs", str, "observations", choice("observations", "policy-inputs"),
                   "The linear baseline's features: the observations, or the policy's whole input (observation, "
                   "previous action, scaled reward and done flag), as metaworld-algorithms.",
                   argument="baseline_inputs"),
    Hyperparameter("target-kl", float, None, optional(number(0.0, open_low=True)),
                   "Stop the iteration's PPO updates once an update's approximate KL exceeds 1.5 times this "
                   "(metaworld-algorithms' target_kl); null: never stop early.", argument="target_kl"),
)

#: The keys of ProMP (:class:`~maml_rl.metalearners.ProMP`): the LVC inner step, then several Adam
#: steps on the clipped post-adaptation objective with a KL penalty on the pre-adaptation policy.
#: Defaults are ProMP's published settings (its HalfCheetahRandDirec run script).
PROMP_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("outer-steps", int, 5, POSITIVE_INT,
                   "Adam steps on each iteration's episodes (ProMP's num_promp_steps).", argument="outer_steps"),
    Hyperparameter("outer-lr", float, 1.0e-3, number(0.0, open_low=True),
                   "Adam's learning rate of the meta-update.", argument="outer_lr"),
    Hyperparameter("outer-clip", float, 0.3, number(0.0, open_low=True),
                   "Clip of the post-adaptation likelihood ratio.", argument="outer_clip"),
    Hyperparameter("inner-kl-coef", float, 5.0e-4, number(0.0),
                   "Initial weight of the KL penalty between the sampling and the current pre-adaptation policy, "
                   "per inner step.", argument="inner_kl_coef"),
    Hyperparameter("inner-kl-target", float, 1.0e-2, number(0.0, open_low=True),
                   "With adaptive-inner-kl: the KL the coefficient steers to (halved below target / 1.5, "
                   "doubled above target * 1.5).", argument="inner_kl_target"),
    Hyperparameter("adaptive-inner-kl", bool, False, BOOLEAN,
                   "Adapt the KL coefficient after each iteration (ProMP's HalfCheetah runs keep it fixed).",
                   argument="adaptive_inner_kl"),
    Hyperparameter("outer-kl-limit", float, None, optional(number(0.0, open_low=True)),
                   "Most mean KL of the adapted policies from those that sampled: an Adam step that exceeds it is "
                   "undone and ends the iteration's steps (null: no limit, as ProMP).", argument="outer_kl_limit"),
    Hyperparameter("outer-kl-backtracks", int, 0, integer(0),
                   "With outer-kl-limit: halve an Adam step that exceeds the limit up to this many times and keep "
                   "the first within it, with Adam's moments (0: undo the step and its moments).",
                   argument="outer_kl_backtracks"),
)

#: Each algorithm's own keys, by its ``algorithm`` name (the meta-learner's ``hyperparameters``).
ALGORITHM_KEYS: dict[str, tuple[Hyperparameter, ...]] = {
    "maml-trpo": MAML_TRPO_KEYS,
    "promp": PROMP_KEYS,
    "rl2-ppo": RL2_PPO_KEYS,
}


def _defaults_class() -> type:
    declared: dict[str, Hyperparameter] = {}
    for hyperparameter in (*SHARED_KEYS, *(h for keys in ALGORITHM_KEYS.values() for h in keys)):
        other = declared.setdefault(hyperparameter.attribute, hyperparameter)
        if other.default != hyperparameter.default:
            raise ValueError(f"{hyperparameter.key} is declared twice with different defaults")
    fields = [
        (h.attribute, h.type, field(default_factory=h.default_value) if isinstance(h.default, Mapping)
         else field(default=h.default))
        for h in declared.values() if not h.required
    ]
    cls = make_dataclass("Hyperparameters", fields, frozen=True)
    cls.__module__ = __name__
    cls.__doc__ = "Every declared default, by attribute name (``fast-lr`` -> ``fast_lr``)."
    return cls


#: Every key with a default, as a frozen dataclass (made from the declarations).
Hyperparameters = _defaults_class()

#: The defaults used wherever a hyperparameter is not given.
DEFAULTS = Hyperparameters()
