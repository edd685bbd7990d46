"""Classic Bernoulli-bandit algorithms, played on :class:`maml_rl.envs.BernoulliBanditEnv`.

Each agent chooses an arm from what it has seen (its pull counts and successes) and a
``numpy.random.Generator`` of its own, so a trial is fixed by the task, the env's seed and the agent's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping

import numpy as np

from maml_rl.envs.bandit import BernoulliBanditEnv

__all__ = ["BANDIT_AGENTS", "BanditAgent", "BanditTrial", "OracleArm", "RandomArm", "ThompsonSampling", "UCB1",
           "play_bandit"]


class BanditAgent(ABC):
    """Counts of a ``k``-armed Bernoulli bandit's pulls and successes, and a rule to choose the next arm."""

    def __init__(self, k: int):
        if int(k) < 1:
            raise ValueError(f"A bandit agent needs at least one arm, got k={k}.")
        self.k = int(k)
        self.pulls = np.zeros(self.k, dtype=np.int64)
        self.successes = np.zeros(self.k, dtype=np.float64)

    @abstractmethod
    def choose(self, rng: np.random.Generator) -> int:
        """The arm to pull next."""

    def observe(self, arm: int, reward: float) -> None:
        self.pulls[arm] += 1
        self.successes[arm] += reward


class RandomArm(BanditAgent):
    """A uniformly random arm at every pull: the lower bound."""

    def choose(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.k))


class OracleArm(BanditAgent):
    """The arm of the highest mean, known from the task: the upper bound (no regret)."""

    def __init__(self, k: int, means: np.ndarray):
        super().__init__(k)
        self.best = int(np.argmax(means))

    def choose(self, rng: np.random.Generator) -> int:
        return self.best


class UCB1(BanditAgent):
    """UCB1 (Auer, Cesa-Bianchi and Fischer, 2002): each arm once, in order; then the arm of the highest
    ``mean_a + sqrt(2 ln n / n_a)``, ``n`` the pulls so far (ties: the lowest arm). Uses no randomness."""

    def choose(self, rng: np.random.Generator) -> int:
        untried = np.flatnonzero(self.pulls == 0)
        if untried.size:
            return int(untried[0])
        n = self.pulls.sum()
        index = self.successes / self.pulls + np.sqrt(2.0 * np.log(n) / self.pulls)
        return int(np.argmax(index))


class ThompsonSampling(BanditAgent):
    """Thompson sampling with Beta(1, 1) priors: a draw from each arm's posterior
    Beta(1 + successes, 1 + failures), arm 0 first, and the arm of the highest draw."""

    def choose(self, rng: np.random.Generator) -> int:
        draws = rng.beta(1.0 + self.successes, 1.0 + self.pulls - self.successes)
        return int(np.argmax(draws))


#: Name -> constructor from the number of arms and the task's means (only the oracle reads them).
BANDIT_AGENTS: Mapping[str, Callable[[int, np.ndarray], BanditAgent]] = {
    "random": lambda k, means: RandomArm(k),
    "ucb1": lambda k, means: UCB1(k),
    "thompson": lambda k, means: ThompsonSampling(k),
    "oracle": OracleArm,
}


class BanditTrial:
    """One trial's arms and rewards, and its regret against the task's best arm."""

    def __init__(self, means: np.ndarray, arms: np.ndarray, rewards: np.ndarray):
        self.means, self.arms, self.rewards = means, arms, rewards

    @property
    def regret_per_pull(self) -> np.ndarray:
        """``best mean - mean of the pulled arm`` at each pull: the expected (pseudo-)regret."""
        return self.means.max() - self.means[self.arms]


def play_bandit(agent: BanditAgent, env: BernoulliBanditEnv, pulls: int, env_seed: int,
                rng: np.random.Generator) -> BanditTrial:
    """``pulls`` pulls of ``agent`` on ``env``'s current task, the env's rewards seeded by ``env_seed``
    (every pull is an episode of one step, as the env defines it)."""
    pulls = int(pulls)
    if pulls < 1:
        raise ValueError(f"A trial needs at least one pull, got pulls={pulls}.")
    if agent.k != env.k:
        raise ValueError(f"The agent has {agent.k} arms and the env {env.k}: make the agent with k={env.k}.")
    arms = np.empty(pulls, dtype=np.int64)
    rewards = np.empty(pulls, dtype=np.float64)
    env.reset(seed=int(env_seed))
    for t in range(pulls):
        arm = agent.choose(rng)
        _, reward, *_ = env.step(arm)
        agent.observe(arm, reward)
        arms[t], rewards[t] = arm, reward
    return BanditTrial(env.get_task()["mean"], arms, rewards)
