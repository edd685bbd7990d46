"""RL²-PPO's configuration keys, beside its code: its GRU's, among the trial learners'
(:mod:`maml_rl.metalearners.trials.keys`); ``DEFAULTS`` holds them and the shared ones."""

from __future__ import annotations

from maml_rl.config.hyperparameters import POSITIVE_INT, SHARED_KEYS, Hyperparameter, choice, defaults_of
from maml_rl.metalearners.trials.keys import trial_keys

__all__ = ["DEFAULTS", "RL2_PPO_KEYS"]

#: The keys of RL² with a PPO update (:class:`~maml_rl.metalearners.RL2PPO`). Defaults follow
#: metaworld-algorithms' RL² (docs/training.md, "RL²", lists where this package departs from it).
RL2_PPO_KEYS: tuple[Hyperparameter, ...] = trial_keys(
    (Hyperparameter("gru-size", int, 256, POSITIVE_INT,
                    "Width of the policy's GRU (after the hidden-sizes encoder)."),),
    chunks=True,
    after_chunks=(
        Hyperparameter("action-head", str, "linear", choice("linear", "tanh"),
                       "The GRU policy's Gaussian head: \"linear\", a linear mean and a learned state-independent "
                       "log-std; \"tanh\", metaworld-algorithms' head, mean and log-std both network outputs "
                       "passed through tanh."),
        Hyperparameter("gru-init", str, "pytorch", choice("pytorch", "xavier"),
                       "The GRU's initial weights: \"pytorch\", the recurrent weights orthogonal as one matrix, the "
                       "input weights and biases PyTorch's; \"xavier\", metaworld-algorithms', per gate "
                       "Xavier-uniform input and orthogonal recurrent weights, zero biases."),
    ),
)

#: Every default of RL²-PPO's keys and the shared ones (``DEFAULTS.episodes_per_trial``).
DEFAULTS = defaults_of(SHARED_KEYS, RL2_PPO_KEYS, name="RL2Defaults", module=__name__)
