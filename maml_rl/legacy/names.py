"""The functions and classes of pytorch-maml-rl's modules that moved or changed.

The old module paths (``maml_rl.utils.helpers``, ``maml_rl.utils.reinforcement_learning``,
``maml_rl.episode``) have no file: :mod:`maml_rl.legacy.moved`'s finder makes
each a module whose ``__getattr__`` is :func:`~maml_rl.legacy.warn.module_getattr`
over :data:`MOVED` and :data:`GONE`: a name is looked up here when a script
imports it, which warns once.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["GONE", "MOVED"]


def get_policy_for_env(env: Any, hidden_sizes: Sequence[int] = (100, 100), nonlinearity: Any = "relu"):
    """pytorch-maml-rl's factory: its default activation was ReLU (this package's is tanh)."""
    from maml_rl.policies import get_policy_for_env as new

    return new(env, hidden_sizes=hidden_sizes, nonlinearity=nonlinearity)


def get_input_size(env: Any) -> int:
    """The flattened observation size (the input of the policy and of the baseline)."""
    from gymnasium import spaces

    return int(spaces.flatdim(env.observation_space))


def get_returns(episodes: Sequence[Any]) -> np.ndarray:
    """``[tasks, B]``: each episode's undiscounted return, one row per task's batch."""
    return np.stack([batch.total_rewards.detach().cpu().numpy() for batch in episodes], axis=0)


def reinforce_loss(policy: Any, episodes: Any, params: Any = None):
    """The reference's REINFORCE loss: each episode's mean over its steps, then the mean over episodes."""
    from maml_rl.metalearners.gradient.losses import reinforce_loss as new

    return new(policy, episodes, params=params, averaging="episode")


def _batch_episodes():
    from maml_rl.data.episodes import BatchEpisodes

    return BatchEpisodes


#: Old module -> moved name -> (its value, what to write instead).
MOVED: dict[str, dict[str, tuple[Callable[[], Any], str]]] = {
    "maml_rl.utils.helpers": {
        "get_policy_for_env": (lambda: get_policy_for_env,
                               "use maml_rl.policies.get_policy_for_env(env, hidden_sizes, nonlinearity); "
                               "its default nonlinearity is 'tanh', the reference's was 'relu'"),
        "get_input_size": (lambda: get_input_size, "use gymnasium.spaces.flatdim(env.observation_space)"),
    },
    "maml_rl.utils.reinforcement_learning": {
        "get_returns": (lambda: get_returns,
                        "use torch.stack([batch.total_rewards for batch in episodes]) "
                        "(maml_rl.data.episodes.BatchEpisodes.total_rewards)"),
        "reinforce_loss": (lambda: reinforce_loss,
                           "use maml_rl.metalearners.gradient.losses.reinforce_loss(policy, episodes, params, averaging='episode') "
                           "('episode' is the reference's averaging)"),
    },
    "maml_rl.episode": {
        "BatchEpisodes": (_batch_episodes,
                          "use maml_rl.data.episodes.BatchEpisodes (built from whole arrays: "
                          "BatchEpisodes(observations, actions, rewards, lengths), no append())"),
    },
}

#: Old module -> name with no counterpart here -> why.
GONE: dict[str, dict[str, str]] = {
    "maml_rl.utils.reinforcement_learning": {
        name: "it computed TabularMDP's optimal values for the MAML paper's comparison, and nothing here "
              "uses it; copy it from pytorch-maml-rl if you need it"
        for name in ("value_iteration", "value_iteration_finite_horizon")
    },
}
