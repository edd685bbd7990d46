"""``BatchEpisodes`` built by hand, for tests of what consumes episodes (losses, learners, success).

* :func:`zero_episodes`: all-zero observations and actions, episodes of given lengths;
* :func:`random_episodes`: one batch per task of random steps with ragged lengths (the first episode of
  each batch runs to the horizon) and advantages from a fitted linear baseline.
"""

from __future__ import annotations

import torch

from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.data.episodes import BatchEpisodes


def zero_episodes(lengths, horizon, *, observation_size=1, action_size=1, rewards=None, **kwargs) -> BatchEpisodes:
    """Episodes of ``lengths`` over ``horizon`` steps: observations ``[T, B, observation_size]`` and actions
    ``[T, B, action_size]`` all zero, ``rewards`` ``[T, B]`` (zero by default); ``kwargs`` go to
    ``BatchEpisodes`` (``gamma``, ``task``, ``infos``...)."""
    batch_size = len(lengths)
    if rewards is None:
        rewards = torch.zeros(horizon, batch_size)
    return BatchEpisodes(torch.zeros(horizon, batch_size, observation_size),
                         torch.zeros(horizon, batch_size, action_size), rewards, lengths, **kwargs)


def random_episodes(num_tasks, batch_size, horizon, seed, *, observation_size, action_size=None, policy=None,
                    min_length=1, masked=False, numbered_tasks=False, gamma=0.99, gae_lambda=1.0):
    """One ``BatchEpisodes`` per task, drawn from a generator seeded ``seed``: per task the lengths
    (``min_length`` to ``horizon``, the first episode's ``horizon``), observations, actions, then rewards,
    all standard normal; the advantages are normalised GAE with a ``LinearFeatureBaseline`` fitted to them.

    ``policy``: actions sampled from it instead (torch's global seed set to ``seed * 100 + task`` first), so
    that the episodes are on-policy. ``masked``: observations, actions and rewards are zero past each
    episode's end. ``numbered_tasks``: the batch of task ``k`` has ``task=k`` (else ``None``).
    """
    generator = torch.Generator().manual_seed(seed)
    out = []
    for task in range(num_tasks):
        lengths = torch.randint(min_length, horizon + 1, (batch_size,), generator=generator)
        lengths[0] = horizon
        mask = (torch.arange(horizon).view(-1, 1) < lengths).float()
        observations = torch.randn(horizon, batch_size, observation_size, generator=generator)
        if masked:
            observations = observations * mask.unsqueeze(-1)
        if policy is None:
            actions = torch.randn(horizon, batch_size, action_size, generator=generator)
        else:
            with torch.no_grad():
                torch.manual_seed(seed * 100 + task)
                actions = policy(observations).sample()
        if masked:
            actions = actions * (mask.unsqueeze(-1) if actions.dim() == 3 else mask).to(actions.dtype)
        rewards = torch.randn(horizon, batch_size, generator=generator)
        if masked:
            rewards = rewards * mask
        episodes = BatchEpisodes(observations, actions, rewards, lengths, task=task if numbered_tasks else None,
                                 gamma=gamma)
        baseline = LinearFeatureBaseline(observation_size)
        baseline.fit(episodes)
        episodes.compute_advantages(baseline, gae_lambda=gae_lambda, normalize=True)
        out.append(episodes)
    return out
