"""The samplers several test files build alike (the ``probe_sampler`` and ``drift_sampler`` fixtures).

* :func:`probe_sampler`: ``ProbeEnv`` (``helpers.sampler_envs``: predictable trajectories, failures on
  demand) under a ``NormalMLPPolicy(3, 1)``;
* :func:`drift_sampler`: the differential tests' ``DriftEnv`` (``helpers.differential_envs``) under the
  naive reference's ``ElementwisePolicy``, so that its episodes can be compared with
  ``naive_sampler.reference_rollout`` bit for bit.

A policy is built when the function is called, after any argument: a test that seeds torch first gets
the same initial weights as when it built the sampler itself.
"""

from __future__ import annotations

from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler

from helpers.differential_envs import factory
from helpers.naive_sampler import ElementwisePolicy, UnbatchedElementwisePolicy
from helpers.sampler_envs import make_probe_env

#: The differential tests' sampler seed (``naive_sampler.reference_rollout`` takes it too).
DRIFT_SEED = 11


def probe_sampler(batch_size=2, policy=None, baseline=None, *, seed=0, **kwargs) -> MultiTaskSampler:
    """A sampler of ``make_probe_env`` envs; ``policy`` defaults to ``NormalMLPPolicy(3, 1)``.

    Its tasks are ``{"value": v, "length": n}`` (and ``"fail"``, ``"kill_at"``, ``"sleep"``...)."""
    policy = NormalMLPPolicy(3, 1) if policy is None else policy
    return MultiTaskSampler(None, None, batch_size, policy, baseline, env_fn=make_probe_env, seed=seed, **kwargs)


def drift_sampler(discrete, horizon, batch_size, batched=True, *, policy=None, baseline=None, seed=DRIFT_SEED,
                  **kwargs) -> MultiTaskSampler:
    """A sampler of ``DriftEnv`` (``DiscreteDriftEnv`` if ``discrete``) envs under a ``TimeLimit`` of ``horizon``;
    ``policy`` (``sampler.policy``) defaults to the reference's ``ElementwisePolicy`` over 2 actions (3 categories),
    or ``UnbatchedElementwisePolicy`` when not ``batched`` (evaluated task by task).

    Its tasks are ``{"offset": o, "length": n or None}``."""
    if policy is None:
        policy = (ElementwisePolicy if batched else UnbatchedElementwisePolicy)(3 if discrete else 2, discrete)
    return MultiTaskSampler(None, None, batch_size, policy, baseline, env_fn=factory(discrete, horizon), seed=seed,
                            **kwargs)
