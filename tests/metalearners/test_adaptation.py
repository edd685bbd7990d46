"""One adaptation path: the sampler's adapted parameters are the learner's, bit for bit,
the TRPO update starts exactly on-policy, and off-policy or stale episodes are refused."""

from __future__ import annotations

import inspect
from collections import OrderedDict

import gymnasium as gym
import pytest
import torch

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.metalearners.gradient.adaptation import InnerLoop
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.app.config_files import ConfigError, all_config_keys, validate_config
from maml_rl.envs import make_env
from maml_rl.metalearners.gradient.keys import DEFAULTS
from maml_rl.metalearners import MAMLTRPO, METALEARNERS, MetaLearner, StaleEpisodesError, make_metalearner
from maml_rl.policies import get_policy_for_env
from maml_rl.samplers import MultiTaskSampler
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample
from helpers.sampler_envs import ProbeEnv


class RandomLengthEnv(ProbeEnv):
    """ProbeEnv whose episodes last 1 to 6 steps, drawn at each reset: lengths vary within a task."""

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed)
        self.task = {**self.task, "length": int(self.np_random.integers(1, 7))}
        return observation, info


def make_random_length_env():
    return gym.wrappers.TimeLimit(RandomLengthEnv(), max_episode_steps=6)


def sampled(env_id, num_tasks, inner_loop, seed=1, batch_size=4, policy_seed=0, **sample_kwargs):
    """``(policy, train, valid)`` from a fresh policy; ``env_id`` ``"random-length"``: episodes of 1 to 6 steps."""
    env_fn = make_random_length_env if env_id == "random-length" else make_env(env_id)
    env = env_fn()
    torch.manual_seed(policy_seed)
    policy = get_policy_for_env(env, hidden_sizes=(16, 16), nonlinearity="tanh")
    baseline = LinearFeatureBaseline(env.observation_space.shape[0])
    env.close()
    with MultiTaskSampler(None, None, batch_size, policy, baseline, env_fn=env_fn, seed=seed, num_workers=0) as sampler:
        tasks = sampler.sample_tasks(num_tasks)
        if inner_loop is not None:
            sample_kwargs["inner_loop"] = inner_loop
        train, valid = sample_adapt_sample(sampler, tasks, gamma=0.9, **sample_kwargs)
    return policy, train, valid


# Bandit episodes last one step; 2D navigation's end at different steps.
@pytest.mark.parametrize("env_id, num_tasks", [("2DNavigation-v0", 3), ("2DNavigation-v0", 1), ("Bandit-K5-v0", 1),
                                               ("Bandit-K5-v0", 3)])
@pytest.mark.parametrize("num_steps, first_order, curvature", [(1, False, "auto"), (1, True, "auto"),
                                                               (2, False, "autograd"), (2, False, "auto")])
def test_sampler_adapts_exactly_as_the_learner(env_id, num_tasks, num_steps, first_order, curvature):
    inner_loop = InnerLoop(fast_lr=0.3, num_steps=num_steps)
    policy, train, valid = sampled(env_id, num_tasks, inner_loop)
    learner = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps, first_order=first_order, curvature=curvature)
    assert learner.inner_loop == inner_loop
    adapted = learner.adapt(train)
    meta = OrderedDict(policy.named_meta_parameters())
    for k, batch in enumerate(valid):
        assert batch.inner_loop == inner_loop
        for name, value in adapted.items():
            assert torch.equal(batch.behaviour_params[name], value[k].detach()), (k, name)
        assert any(not torch.equal(batch.behaviour_params[name], meta[name].detach()) for name in meta), \
            "the adaptation moved nothing"
        for name, value in meta.items():
            assert torch.equal(train[0][k].behaviour_params[name], value.detach())
    logs = learner.step(train, valid)
    # Before the update the new and old policies are the same distribution: exactly.
    assert logs["ratio_deviation_before"] == 0.0
    assert logs["kl_before"] == 0.0


def test_behaviour_params_are_copies():
    """Later changes of the policy do not rewrite what sampled earlier episodes."""
    policy, train, valid = sampled("2DNavigation-v0", 2, InnerLoop(fast_lr=0.3))
    recorded = {name: p.clone() for name, p in train[0][0].behaviour_params.items()}
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(1.0)
    for name, p in recorded.items():
        assert torch.equal(train[0][0].behaviour_params[name], p)


@pytest.mark.parametrize("change", [{"fast_lr": 0.1}, {"averaging": "episode"}])
def test_learner_refuses_episodes_adapted_differently(change):
    """A sampler adapting with another fast_lr or averaging gives off-policy data: refused, not used."""
    policy, train, valid = sampled("random-length", 3, InnerLoop(**{"fast_lr": 0.3, **change}))
    assert len({int(length) for length in valid[0].lengths}) > 1, "averaging would change nothing"
    learner = MAMLTRPO(policy, fast_lr=0.3)
    before = [p.detach().clone() for p in policy.parameters()]
    with pytest.raises(StaleEpisodesError) as info:
        learner.step(train, valid)
    message = str(info.value)
    assert "valid_episodes were sampled by other parameters than the ones this update starts from" in message
    assert f"They were adapted with {valid[0].inner_loop}" in message and "InnerLoop(fast_lr=0.3," in message
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))


def test_learner_refuses_the_same_episodes_twice():
    policy, train, valid = sampled("2DNavigation-v0", 2, InnerLoop(fast_lr=0.3))
    learner = MAMLTRPO(policy, fast_lr=0.3)
    assert learner.step(train, valid)["accepted"]
    with pytest.raises(StaleEpisodesError, match=r"train_episodes\[0\].*Sample new episodes after every step"):
        learner.step(train, valid)


def test_sample_inner_loop_arguments():
    policy, train, valid = sampled("2DNavigation-v0", 1, None, num_steps=2, fast_lr=0.2, averaging="episode")
    assert len(train) == 2 and valid[0].inner_loop == InnerLoop(fast_lr=0.2, num_steps=2, averaging="episode")
    _, train, valid = sampled("2DNavigation-v0", 1, None)
    assert len(train) == DEFAULTS.num_steps and valid[0].inner_loop == InnerLoop()
    with pytest.raises(ValueError, match="give inner_loop or fast_lr, not both"):
        sampled("2DNavigation-v0", 1, InnerLoop(), fast_lr=0.1)
    with pytest.raises(ValueError, match="num_steps must be an int >= 0"):
        sampled("2DNavigation-v0", 1, None, num_steps=-1)
    with pytest.raises(ValueError, match="fast_lr must be a finite number > 0"):
        InnerLoop(fast_lr=float("nan"))
    with pytest.raises(ValueError, match="loss averaging"):
        InnerLoop(averaging="steps")


def test_one_source_of_defaults():
    """The config, the learner and the sampler default every hyperparameter to the same value."""
    learner_defaults = inspect.signature(MAMLTRPO).parameters
    sample_defaults = inspect.signature(sample_adapt_sample).parameters
    rollout_defaults = inspect.signature(MultiTaskSampler.rollout).parameters
    loop_defaults = InnerLoop()
    config_keys = all_config_keys()
    for field in inspect.signature(type(DEFAULTS)).parameters:
        value = getattr(DEFAULTS, field)
        key = field.replace("_", "-")
        if key in config_keys and not config_keys[key].required:
            assert config_keys[key].default == value, key
        name = {"loss_averaging": "averaging"}.get(field, field)
        if name in learner_defaults:
            assert learner_defaults[name].default == value, field
        if field in ("gamma", "gae_lambda"):
            assert sample_defaults[field].default == value, field
        if field == "gamma":  # the sampler sets the returns; the advantages are the learner's
            assert rollout_defaults[field].default == value, field
        if hasattr(loop_defaults, name):
            assert getattr(loop_defaults, name) == value, field


def test_algorithm_key_chooses_the_learner(monkeypatch):
    raw = {"env-name": "2DNavigation-v0", "gamma": 0.9, "hidden-sizes": [4], "nonlinearity": "tanh",
           "fast-batch-size": 2, "fast-lr": 0.2, "num-batches": 1, "meta-batch-size": 1, "max-kl": 0.05}
    config = validate_config(raw)
    assert config["algorithm"] == "maml-trpo"
    policy = get_policy_for_env(make_env("2DNavigation-v0")(), hidden_sizes=(4,))
    learner = make_metalearner(config, policy)
    assert isinstance(learner, MAMLTRPO) and learner.max_kl == 0.05 and learner.inner_loop.fast_lr == 0.2
    with pytest.raises(ConfigError, match="algorithm: got 'reptile'.*one of: maml-trpo"):
        validate_config({**raw, "algorithm": "reptile"})

    class Other(MAMLTRPO):
        """A second algorithm is one entry in the table."""

    assert issubclass(Other, MetaLearner)
    monkeypatch.setitem(METALEARNERS, "other", Other)
    assert type(make_metalearner(validate_config({**raw, "algorithm": "other"}), policy)) is Other
