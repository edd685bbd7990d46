"""RL² with a PPO update: a GRU policy adapts in its recurrent state across the episodes of a trial.

"RL²: Fast Reinforcement Learning via Slow Reinforcement Learning" (Duan et
al., 2016): the trial learner (:class:`~maml_rl.metalearners.trials.TrialPPO`:
PPO, GAE across the trial's episodes, truncated BPTT, minibatches of whole
trials) with a :class:`~maml_rl.policies.GRUPolicy`, whose state is recorded at
the start of each BPTT chunk.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np
from gymnasium import spaces

from maml_rl.config.hyperparameters import Hyperparameter
from maml_rl.metalearners.rl2.keys import DEFAULTS, RL2_PPO_KEYS
from maml_rl.metalearners.trials.critic import critic_memory
from maml_rl.metalearners.trials.learner import TrialPPO
from maml_rl.policies.recurrent import GRUPolicy, rl2_input_size

__all__ = ["RL2PPO"]


class RL2PPO(TrialPPO):
    """RL² trained with PPO on trials from ``MultiTaskSampler.rollout_trials``.

    :param policy: a recurrent policy with ``forward_trials(inputs, state, chunk)``
        (:class:`~maml_rl.policies.GRUPolicy`).
    """

    hyperparameters: ClassVar[tuple[Hyperparameter, ...]] = RL2_PPO_KEYS
    protocol_name: ClassVar[str] = "rl2-trials"
    label: ClassVar[str] = " (RL²)"

    #: A fraction of a second per iteration of 2D navigation (MetaLearner.contract_config): 3 episodes a trial,
    #: then the evaluation episodes.
    contract_config: ClassVar[dict] = {
        "algorithm": "rl2-ppo", "env-name": "2DNavigation-v0",
        "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10}, "gamma": 0.99,
        "hidden-sizes": [16, 16], "nonlinearity": "tanh", "fast-batch-size": 4, "meta-batch-size": 3,
        "num-batches": 2, "episodes-per-trial": 3, "gru-size": 8, "ppo-epochs": 2, "ppo-minibatches": 2,
        "bptt-chunk": 7, "gae-lambda": 0.95}
    contract_stages: ClassVar[int] = 3 + 1

    def memory_needs(self, config: Mapping[str, Any], observation_size: int, action_size: int,
                     horizon: int) -> dict[str, int]:
        # Each step of a trial keeps its inputs and, for the update, the GRU's state.
        steps = config["meta-batch-size"] * config["fast-batch-size"] * config["episodes-per-trial"] * horizon
        width = rl2_input_size(observation_size, action_size) + config["gru-size"] + action_size + 4
        trial = config["episodes-per-trial"] * horizon
        return {"trials of an iteration": steps * width * 4,
                **critic_memory(config, config["meta-batch-size"] * config["fast-batch-size"], trial)}

    @staticmethod
    def make_policy(env: Any, config: Mapping[str, Any]) -> GRUPolicy:
        """The GRU policy of a configuration: RL²'s input for the env's spaces."""
        observation_size = int(spaces.flatdim(env.observation_space))
        action_space = env.action_space
        discrete = isinstance(action_space, spaces.Discrete)
        action_size = int(action_space.n) if discrete else int(np.prod(action_space.shape))
        return GRUPolicy(rl2_input_size(observation_size, action_size), action_size,
                         hidden_sizes=config["hidden-sizes"], state_size=config["gru-size"],
                         nonlinearity=config["nonlinearity"], categorical=discrete,
                         head=config.get("action-head", DEFAULTS.action_head),
                         gru_init=config.get("gru-init", DEFAULTS.gru_init))
