"""The configuration keys of the gradient-based algorithms, beside their code: those of every member
(:data:`GRADIENT_KEYS`), then MAML-TRPO's and ProMP's own. ``DEFAULTS`` holds their defaults and the shared
ones, for the constructors' keywords."""

from __future__ import annotations

from maml_rl.data.episodes import LOSS_AVERAGING
from maml_rl.config.hyperparameters import (
    BOOLEAN,
    POSITIVE_INT,
    SHARED_KEYS,
    Hyperparameter,
    choice,
    defaults_of,
    integer,
    number,
    optional,
)

__all__ = ["DEFAULTS", "GRADIENT_KEYS", "MAML_TRPO_KEYS", "PROMP_KEYS"]

#: The keys of every gradient-based algorithm: the inner loop and how its losses weigh steps.
GRADIENT_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("num-steps", int, 1, POSITIVE_INT, "Inner (adaptation) gradient steps per task.",
                   argument="num_steps"),
    Hyperparameter("fast-lr", float, 0.5, number(0.0, open_low=True),
                   "Step size of the inner gradient steps; left out, the same default as the Python API "
                   "(every shipped config gives it).", argument="fast_lr"),
    Hyperparameter("loss-averaging", str, LOSS_AVERAGING[0], choice(*LOSS_AVERAGING),
                   'How a task\'s losses weigh its steps: "step" (each valid step alike) or "episode" '
                   "(mean of per-episode means, as pytorch-maml-rl).", argument="averaging"),
)

#: The keys of MAML with a TRPO meta-update (:class:`~maml_rl.metalearners.MAMLTRPO`).
MAML_TRPO_KEYS: tuple[Hyperparameter, ...] = (
    *GRADIENT_KEYS,
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

#: The keys of ProMP (:class:`~maml_rl.metalearners.ProMP`): the LVC inner step, then several Adam
#: steps on the clipped post-adaptation objective with a KL penalty on the pre-adaptation policy.
#: Defaults are ProMP's published settings (its HalfCheetahRandDirec run script).
PROMP_KEYS: tuple[Hyperparameter, ...] = (
    *GRADIENT_KEYS,
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

#: Every default of the family and the shared keys (``DEFAULTS.fast_lr``).
DEFAULTS = defaults_of(SHARED_KEYS, MAML_TRPO_KEYS, PROMP_KEYS, name="GradientDefaults", module=__name__)
