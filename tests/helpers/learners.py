"""A meta-learner that exists only in the tests: what a new algorithm needs to run through train.py and test.py.

:class:`RandomSearch` is gradient-free: each update nudges the parameters along seeded noise, scaled by the
batch's mean return; it returns its own batch type (:class:`Rollouts`), keeps a state of its own (the update
count, which seeds the noise, so a resume that lost it would differ) and evaluates with one stage.
:func:`register` adds it under ``"random-search"`` for one test.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from maml_rl.data.stats import mean_returns
from maml_rl.metalearners import METALEARNERS, MetaLearner
from maml_rl.metalearners.base import Evaluation

#: The ``algorithm`` name config files give it.
NAME = "random-search"


class Rollouts(NamedTuple):
    """RandomSearch's own batch type: train.py hands it back to the learner and reads none of it."""

    episodes: list


class RandomSearch(MetaLearner):
    """A made-up, gradient-free meta-learner (see the module's docstring)."""

    #: Its tiny run and the one stage of its evaluation, as every learner declares them.
    contract_config = {"algorithm": NAME, "env-name": "2DNavigation-v0",
                       "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10}, "gamma": 0.99,
                       "hidden-sizes": [16, 16], "nonlinearity": "tanh", "fast-batch-size": 4, "num-batches": 3,
                       "meta-batch-size": 3}
    contract_stages = 1

    def __init__(self, policy, device="cpu", **_shared):
        self.policy = policy
        self.updates = 0

    def sample(self, sampler, tasks, gamma=0.95, device="cpu"):
        return Rollouts(sampler.rollout(tasks, gamma=gamma, device=device))

    def batch_stats(self, batch):
        returns = float(mean_returns(batch.episodes).mean())
        return {"env_steps": int(sum(int(b.lengths.sum()) for b in batch.episodes)),
                "return_before": returns, "return_after": returns}

    def update(self, batch):
        score = float(torch.stack([b.rewards.sum(0).mean() for b in batch.episodes]).mean())
        generator = torch.Generator().manual_seed(1000 + self.updates)
        with torch.no_grad():
            for p in self.policy.parameters():
                p.add_(1e-3 * score * torch.randn(p.shape, generator=generator))
        self.updates += 1
        return {"score": score}

    def evaluate(self, sampler, tasks, gamma, device="cpu", *, actions="sample"):
        """One stage: the current policy's returns (it does not adapt)."""
        episodes = sampler.rollout(tasks, gamma=gamma, device=device, actions=actions)
        return Evaluation(torch.stack([b.total_rewards for b in episodes])[None].numpy(), None)

    def state_dict(self):
        return {"updates": self.updates}

    def load_state_dict(self, state):
        self.updates = state["updates"]


def register(monkeypatch, learner: type[MetaLearner] = RandomSearch) -> None:
    """``learner`` under :data:`NAME` in the registry, for the test that holds ``monkeypatch``."""
    monkeypatch.setitem(METALEARNERS, NAME, learner)  # registering an algorithm is this one line
