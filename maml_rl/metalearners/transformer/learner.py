"""PPO over a causal Transformer: the trial learner (:class:`~maml_rl.metalearners.trials.TrialPPO`) with a
:class:`~maml_rl.policies.transformer.TransformerPolicy`, which samples with a key/value cache and trains on
each whole trial in one causal pass (TrMRL's recipe, on this package's sampler)."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np
from gymnasium import spaces

from maml_rl.config.hyperparameters import Hyperparameter
from maml_rl.metalearners.transformer.keys import TRANSFORMER_PPO_KEYS
from maml_rl.metalearners.trials.critic import critic_memory
from maml_rl.metalearners.trials.learner import TrialPPO
from maml_rl.policies.trial_inputs import InputFormat
from maml_rl.policies.transformer import TransformerPolicy

__all__ = ["TransformerPPO"]


class TransformerPPO(TrialPPO):
    """PPO on trials with a causal Transformer policy (``algorithm: transformer-ppo``)."""

    hyperparameters: ClassVar[tuple[Hyperparameter, ...]] = TRANSFORMER_PPO_KEYS
    protocol_name: ClassVar[str] = "transformer-trials"
    label: ClassVar[str] = " (Transformer)"
    evaluation_in_trial: ClassVar[bool] = True
    #: A few seconds of 2D navigation: the run the learner contract test trains, resumes and evaluates. With the
    #: learned critic, so the contract holds its weights and optimiser too (RL²'s runs the linear baseline).
    contract_config: ClassVar[dict] = {
        "algorithm": "transformer-ppo", "env-name": "2DNavigation-v0",
        "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 5}, "gamma": 0.99,
        "hidden-sizes": [], "nonlinearity": "tanh", "fast-batch-size": 2, "meta-batch-size": 2,
        "num-batches": 2, "episodes-per-trial": 2, "d-model": 8, "num-layers": 1, "num-heads": 2,
        "ppo-epochs": 2, "ppo-minibatches": 2, "gae-lambda": 0.95, "critic": "gru", "critic-size": 8,
    }
    #: The stages of its evaluation with that config: the trial's episodes, then the evaluation episodes.
    contract_stages: ClassVar[int] = 2 + 1

    def memory_needs(self, config: Mapping[str, Any], observation_size: int, action_size: int,
                     horizon: int) -> dict[str, int]:
        trial = config["episodes-per-trial"] * horizon
        trials = config["meta-batch-size"] * config["fast-batch-size"]
        width = InputFormat(attempt=config["attempt-input"]).size(observation_size, action_size)
        context = min(trial, config["context-window"] or trial)
        per_minibatch = -(-trials // config["ppo-minibatches"])
        fused = config["attention"] == "fused" and config["context-window"] is None
        return {
            "trials of an iteration": trials * trial * (width + action_size + 4) * 4,
            # Each layer keeps its activations (~12 d_model a token) and, per head, a T x T score matrix
            # (masked, whatever the window) and its softmax, for the backward pass.
            # (fused attention over the whole trial keeps no score matrix: a few numbers per token and head).
            "the update's activations": per_minibatch * config["num-layers"] * 4 * (
                12 * trial * config["d-model"] + (4 * config["num-heads"] * trial if fused else
                                                  2 * config["num-heads"] * trial * trial)),
            "the sampler's key/value caches": trials * 4 * config["num-layers"] * config["d-model"] * 4 * trial
            if context else 0,
            **critic_memory(config, trials, trial),
        }

    @staticmethod
    def make_policy(env: Any, config: Mapping[str, Any]) -> TransformerPolicy:
        """The Transformer of a configuration, its input the trial format's for the env's spaces; the shared
        ``hidden-sizes`` and ``nonlinearity`` are its token encoder's (``[]``: one linear embedding)."""
        observation_size = int(spaces.flatdim(env.observation_space))
        action_space = env.action_space
        discrete = isinstance(action_space, spaces.Discrete)
        action_size = int(action_space.n) if discrete else int(np.prod(action_space.shape))
        width = InputFormat(attempt=config["attempt-input"]).size(observation_size, action_size)
        return TransformerPolicy(width, action_size, d_model=config["d-model"], num_layers=config["num-layers"],
                                 num_heads=config["num-heads"], window=config["context-window"],
                                 categorical=discrete, hidden_sizes=config["hidden-sizes"],
                                 nonlinearity=config["nonlinearity"], attention=config["attention"])

    @staticmethod
    def config_problems(config: Mapping[str, Any]) -> list[str]:
        if config["d-model"] % config["num-heads"] or config["d-model"] % 2:
            return [f"d-model ({config['d-model']}) must be even and a multiple of num-heads "
                    f"({config['num-heads']})"]
        return []
