"""Posterior sampling (PSRL) and its bounds on :class:`maml_rl.envs.TabularMDPEnv`.

PSRL (Strens, 2000; Osband, Russo and Van Roy, 2013): before each episode, draw an MDP from the
posterior, solve it by finite-horizon value iteration and act greedily on it for the episode. The prior
is the env's own task distribution: ``transitions[s, a] ~ Dirichlet(1)``, conjugate to the observed
next states, and ``rewards_mean[s, a] ~ N(1, 1)`` with rewards ``N(rewards_mean[s, a], 1)``, a Normal
prior with known noise, conjugate to the observed rewards.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from maml_rl.envs.mdp import TabularMDPEnv

__all__ = ["MDP_AGENTS", "MDPAgent", "MDPPrior", "OraclePolicy", "PSRL", "RandomPolicy", "play_mdp",
           "value_iteration"]


def value_iteration(transitions: np.ndarray, rewards: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Finite-horizon value iteration: ``Q[h, s, a]`` and ``V[h, s]`` with ``h`` steps done of ``horizon``
    (``V[horizon] = 0``); ``Q[h] = rewards + transitions @ V[h + 1]``, undiscounted."""
    horizon = int(horizon)
    if horizon < 1:
        raise ValueError(f"horizon must be at least 1, got {horizon}.")
    S, A = rewards.shape
    if transitions.shape != (S, A, S):
        raise ValueError(f"transitions must have shape {(S, A, S)} for rewards of shape {(S, A)}, "
                         f"got {transitions.shape}.")
    q = np.zeros((horizon, S, A))
    v = np.zeros((horizon + 1, S))
    for h in range(horizon - 1, -1, -1):
        q[h] = rewards + transitions @ v[h + 1]
        v[h] = q[h].max(axis=1)
    return q, v


@dataclass(frozen=True)
class MDPPrior:
    """Conjugate prior of a tabular MDP: ``Dirichlet(dirichlet[s, a])`` over next states,
    ``N(reward_mean[s, a], 1 / reward_precision[s, a])`` over mean rewards, and the rewards' known noise."""

    dirichlet: np.ndarray
    reward_mean: np.ndarray
    reward_precision: np.ndarray
    noise_std: float = 1.0

    @classmethod
    def of_env(cls, env: TabularMDPEnv) -> "MDPPrior":
        """The distribution ``TabularMDPEnv.sample_tasks`` draws from (Dirichlet(1), N(1, 1), noise 1)."""
        S, A = env.num_states, env.num_actions
        return cls(np.ones((S, A, S)), np.ones((S, A)), np.ones((S, A)), 1.0)


class MDPAgent(ABC):
    """Acts in a tabular MDP at step ``h`` of an episode; sees every transition."""

    def start_episode(self, rng: np.random.Generator) -> None:
        """Called before each episode."""

    @abstractmethod
    def act(self, h: int, state: int, rng: np.random.Generator) -> int:
        """The action at step ``h`` of the episode in ``state``."""

    def observe(self, state: int, action: int, reward: float, next_state: int) -> None:
        """Called after each step."""


class RandomPolicy(MDPAgent):
    """A uniformly random action at every step: the lower bound."""

    def __init__(self, num_actions: int):
        self.num_actions = int(num_actions)

    def act(self, h: int, state: int, rng: np.random.Generator) -> int:
        return int(rng.integers(self.num_actions))


class OraclePolicy(MDPAgent):
    """The optimal policy of the true MDP (value iteration on the task): the upper bound."""

    def __init__(self, transitions: np.ndarray, rewards_mean: np.ndarray, horizon: int):
        q, self.values = value_iteration(transitions, rewards_mean, horizon)
        self.policy = q.argmax(axis=2)

    def act(self, h: int, state: int, rng: np.random.Generator) -> int:
        return int(self.policy[h, state])


class PSRL(MDPAgent):
    """Posterior sampling for reinforcement learning, one MDP drawn per episode from the posterior of
    ``prior`` given the transitions seen so far (Dirichlet counts; Normal mean with known noise)."""

    def __init__(self, prior: MDPPrior, horizon: int):
        self.prior, self.horizon = prior, int(horizon)
        S, A = prior.reward_mean.shape
        self.counts = np.zeros((S, A, S))
        self.reward_sums = np.zeros((S, A))
        self.visits = np.zeros((S, A))
        self.policy = np.zeros((self.horizon, S), dtype=np.int64)

    def draw_mdp(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """An MDP from the posterior: transitions by normalised Gamma draws (a Dirichlet draw for each
        ``(s, a)``), then mean rewards."""
        gammas = rng.standard_gamma(self.prior.dirichlet + self.counts)
        transitions = gammas / gammas.sum(axis=-1, keepdims=True)
        noise_precision = 1.0 / self.prior.noise_std ** 2
        precision = self.prior.reward_precision + noise_precision * self.visits
        mean = (self.prior.reward_precision * self.prior.reward_mean
                + noise_precision * self.reward_sums) / precision
        rewards = mean + rng.standard_normal(mean.shape) / np.sqrt(precision)
        return transitions, rewards

    def start_episode(self, rng: np.random.Generator) -> None:
        q, _ = value_iteration(*self.draw_mdp(rng), self.horizon)
        self.policy = q.argmax(axis=2)

    def act(self, h: int, state: int, rng: np.random.Generator) -> int:
        return int(self.policy[h, state])

    def observe(self, state: int, action: int, reward: float, next_state: int) -> None:
        self.counts[state, action, next_state] += 1
        self.reward_sums[state, action] += reward
        self.visits[state, action] += 1


#: Name -> constructor from the env (its task set) and the horizon.
MDP_AGENTS: Mapping[str, Callable[[TabularMDPEnv, int], MDPAgent]] = {
    "random": lambda env, horizon: RandomPolicy(env.num_actions),
    "psrl": lambda env, horizon: PSRL(MDPPrior.of_env(env), horizon),
    "oracle": lambda env, horizon: OraclePolicy(env.get_task()["transitions"], env.get_task()["rewards_mean"],
                                                horizon),
}


def play_mdp(agent: MDPAgent, env: TabularMDPEnv, episodes: int, horizon: int, env_seed: int,
             rng: np.random.Generator) -> np.ndarray:
    """``[episodes]`` the returns of ``episodes`` episodes of ``horizon`` steps of ``agent`` on ``env``'s
    current task, one trial: the env seeded by ``env_seed`` at its first reset."""
    episodes, horizon = int(episodes), int(horizon)
    if episodes < 1 or horizon < 1:
        raise ValueError(f"A trial needs at least one episode of one step, got episodes={episodes}, "
                         f"horizon={horizon}.")
    returns = np.zeros(episodes)
    for e in range(episodes):
        observation, _ = env.reset(seed=int(env_seed) if e == 0 else None)
        state = int(np.argmax(observation))
        agent.start_episode(rng)
        for h in range(horizon):
            action = agent.act(h, state, rng)
            observation, reward, *_ = env.step(action)
            next_state = int(np.argmax(observation))
            agent.observe(state, action, reward, next_state)
            returns[e] += reward
            state = next_state
    return returns
