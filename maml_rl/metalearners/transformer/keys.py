"""Transformer-PPO's configuration keys: its policy's, among the trial learners'
(:mod:`maml_rl.metalearners.trials.keys`); ``DEFAULTS`` holds them and the shared ones."""

from __future__ import annotations

from maml_rl.config.hyperparameters import (BOOLEAN, POSITIVE_INT, SHARED_KEYS, Hyperparameter, choice, defaults_of,
                                            optional)
from maml_rl.metalearners.trials.keys import trial_keys

__all__ = ["DEFAULTS", "TRANSFORMER_PPO_KEYS"]

#: The keys of PPO over a causal Transformer (:class:`~.learner.TransformerPPO`); sizes from TrMRL's and
#: AMAGO's ranges (docs/architecture.md, "Trial policies").
TRANSFORMER_PPO_KEYS: tuple[Hyperparameter, ...] = trial_keys((
    Hyperparameter("d-model", int, 64, POSITIVE_INT, "Width of the Transformer's tokens."),
    Hyperparameter("num-layers", int, 2, POSITIVE_INT, "Pre-LayerNorm blocks of causal self-attention and MLP."),
    Hyperparameter("num-heads", int, 4, POSITIVE_INT, "Attention heads per block (d-model must be a multiple)."),
    Hyperparameter("context-window", int, None, optional(POSITIVE_INT),
                   "Tokens each one attends to at every layer (the current one included); null: the whole trial."),
    Hyperparameter("attention", str, "math", choice("math", "fused"),
                   "How the update attends over whole trials: math (explicit T x T scores) or fused (torch's "
                   "scaled_dot_product_attention: the same to rounding, several times faster on long trials, "
                   "no T x T scores kept). Sampling is the same either way."),
    Hyperparameter("attempt-input", bool, False, BOOLEAN,
                   "Add the attempt index (the episode of the trial) to each step's token.",
                   argument="attempt_input"),
))

DEFAULTS = defaults_of(SHARED_KEYS, TRANSFORMER_PPO_KEYS, name="TransformerDefaults", module=__name__)
