"""PEARL's evaluation on held-out tasks: online adaptation, the posterior updated after each trajectory."""

from __future__ import annotations

from typing import Any, List

import numpy as np
import torch

from ..base import Evaluation
from .encoder import Posterior

__all__ = ["online_adaptation"]


def online_adaptation(learner: Any, sampler: Any, tasks: List[Any], actions: str) -> Evaluation:
    """Oyster's ``collect_paths`` for every slot of every task at once: ``eval-trajectories`` trajectories,
    z drawn from the prior for the first ``num-exp-traj-eval`` and afterwards from ``q(z | c)`` of all the
    transitions that slot has collected (its own online context). ``[trajectories, tasks, slots]``.

    :param learner: the :class:`~maml_rl.metalearners.pearl.PEARL` learner (its encoder, seed and settings).
    """
    K, B, latent = len(tasks), sampler.batch_size, learner.latent_size
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([learner.seed, 13]).generate_state(1)[0]))
    stages = learner.eval_trajectories
    returns = np.zeros((stages, K, B))
    success = np.zeros((stages, K, B))
    has_success = True
    contexts: List[List[torch.Tensor]] = [[] for _ in range(K * B)]
    posterior = Posterior.prior(K * B, latent)
    for stage in range(stages):
        with torch.no_grad():
            z = posterior.sample(generator).reshape(K, B, latent)
        collected = sampler.rollout_transitions(tasks, conditioning=z, actions=actions, device=learner.device)
        for k, transitions in enumerate(collected):
            episodes = transitions.split_episodes()  # one per slot, in slot order
            for b, episode in enumerate(episodes):
                returns[stage, k, b] = float(episode.rewards.double().sum())
                if "success" in episode.infos:
                    success[stage, k, b] = float(episode.infos["success"].max() > 0)
                else:
                    has_success = False
                rows = {"observations": episode.observations, "actions": episode.actions,
                        "rewards": episode.rewards, "next_observations": episode.next_observations}
                contexts[k * B + b].append(learner.context_rows(rows))
        if stage + 1 >= learner.num_exp_traj_eval:
            with torch.no_grad():
                parts = [learner.posterior(torch.cat(context).unsqueeze(0)) for context in contexts]
            posterior = Posterior(torch.cat([p.means for p in parts]).cpu(), torch.cat([p.variances for p in parts]).cpu())
    return Evaluation(returns, success if has_success else None)
