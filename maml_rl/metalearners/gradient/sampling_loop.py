"""MAML's sampling, on the sampler's rollout primitive: roll out, adapt every task, roll out again.

The sampler knows rollouts and nothing of adaptation; a gradient-based
meta-learner runs this loop (``GradientMetaLearner.sample``) with its own
inner loop and baseline, so the parameters it samples with are those its
update differentiates, bit for bit.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import torch

from maml_rl.metalearners.gradient.adaptation import InnerLoop
from maml_rl.data.baseline import fit_advantages
from maml_rl.data.episodes import BatchEpisodes
from maml_rl.metalearners.gradient.keys import DEFAULTS
from maml_rl.policies.policy import require_params_argument
from maml_rl.policies.task_params import TaskParams

__all__ = ["rollout_for_adaptation", "sample_adapt_sample"]


def rollout_for_adaptation(sampler: Any, tasks: Sequence[Any], params: Any, inner_loop: InnerLoop, baseline: Any,
                           gamma: float, gae_lambda: float, device: Union[str, torch.device],
                           actions: str = "sample") -> List[BatchEpisodes]:
    """One rollout of ``tasks`` under ``params`` (``rollout()``'s argument), with advantages from ``baseline``
    normalised with ``inner_loop.averaging``; each batch records the inner loop that will adapt on it."""
    episodes = sampler.rollout(tasks, params, gamma=gamma, device=device, actions=actions)
    if baseline is not None:
        fit_advantages(episodes, baseline, gae_lambda=gae_lambda, averaging=inner_loop.averaging)
    for batch in episodes:
        batch.inner_loop = inner_loop
    return episodes


def sample_adapt_sample(
    sampler: Any,
    tasks: Sequence[Any],
    num_steps: Optional[int] = None,
    fast_lr: Optional[float] = None,
    gamma: float = DEFAULTS.gamma,
    gae_lambda: float = DEFAULTS.gae_lambda,
    device: Union[str, torch.device] = "cpu",
    averaging: Optional[str] = None,
    *,
    inner_loop: Optional[InnerLoop] = None,
    baseline: Any = None,
    valid_actions: str = "sample",
    on_rollout: Optional[Callable[[], None]] = None,
) -> Tuple[List[List[BatchEpisodes]], List[BatchEpisodes]]:
    """Roll out each task, adapt, and roll out again with the adapted parameters.

    What pytorch-maml-rl's ``sampler.sample`` did, with the sampler as the
    first argument. The adaptation is :class:`~maml_rl.metalearners.gradient.adaptation.InnerLoop`'s:
    give ``num_steps``, ``fast_lr`` and ``averaging`` (defaults from
    :data:`~maml_rl.config.hyperparameters.DEFAULTS`) or ``inner_loop`` (e.g. a
    learner's own), not both.

    :param sampler: a :class:`~maml_rl.samplers.MultiTaskSampler` (anything with its ``rollout``).
    :param baseline: fits the advantages the inner steps use; ``None``: the
        sampler's ``baseline`` (pytorch-maml-rl gave it to the sampler).
    :param valid_actions: ``"mean"`` rolls out the adapted policies' most likely
        actions after the last step (evaluation); adaptation episodes are always sampled.
    :param on_rollout: called after each of the ``num_steps + 1`` rollouts (progress).
    :returns: ``(train_episodes, valid_episodes)``: ``train_episodes[step][task]``
        gathered before inner step ``step``, ``valid_episodes[task]`` after the
        last. With ``num_steps=0`` ``train_episodes`` is empty and
        ``valid_episodes`` uses the current policy.
    """
    inner_loop = InnerLoop.resolve(inner_loop, num_steps, fast_lr, averaging)
    tasks = list(tasks)
    if not tasks:
        raise ValueError("sample_adapt_sample() needs at least one task")
    baseline = getattr(sampler, "baseline", None) if baseline is None else baseline
    policy = sampler.policy
    if getattr(policy, "is_recurrent", False):
        raise TypeError(f"sample_adapt_sample() adapts a feed-forward policy's parameters; {type(policy).__name__} "
                        "is recurrent: use sampler.rollout_trials(tasks, episodes_per_trial) (RL2PPO.sample)")
    if inner_loop.num_steps > 0:
        if baseline is None:
            raise ValueError("sample_adapt_sample() adapts with advantages, which need a baseline: pass "
                             "baseline=LinearFeatureBaseline(observation_size), or use num_steps=0")
        require_params_argument(policy, "sample_adapt_sample() adapts, then calls policy(observations, params=...)")
    params: Any = None
    stacked = None
    train_episodes = []
    for _ in range(inner_loop.num_steps):
        episodes = rollout_for_adaptation(sampler, tasks, params, inner_loop, baseline, gamma, gae_lambda, device)
        train_episodes.append(episodes)
        if on_rollout is not None:
            on_rollout()
        stacked = inner_loop.sampling_step(policy, episodes, stacked, device)
        params = TaskParams.from_stacked(stacked)
    valid_episodes = rollout_for_adaptation(sampler, tasks, params, inner_loop, baseline, gamma, gae_lambda, device,
                                            valid_actions)
    if on_rollout is not None:
        on_rollout()
    return train_episodes, valid_episodes

