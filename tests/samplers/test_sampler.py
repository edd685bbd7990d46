"""MultiTaskSampler: episodes, parameters, reproducibility across workers and start methods."""

import functools
import multiprocessing as mp
import pickle
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.distributions import Independent, Normal

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.data.episodes import BatchEpisodes
from maml_rl.policies import CategoricalMLPPolicy, NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers.sampler_envs import ProbeEnv, make_probe_env

pytestmark = pytest.mark.processes

START_METHODS = [m for m in ("fork", "forkserver", "spawn") if m in mp.get_all_start_methods()]


def navigation_sampler(**kwargs):
    torch.manual_seed(0)
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(16, 16))
    kwargs.setdefault("seed", 3)
    return MultiTaskSampler("2DNavigation-v0", {}, 3, policy, LinearFeatureBaseline(2), **kwargs)


def episode_arrays(train, valid):
    arrays = []
    for batch in [b for step in train for b in step] + list(valid):
        arrays += [batch.observations, batch.actions, batch.rewards, batch.lengths]
    return arrays


def assert_identical(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and torch.equal(x, y)


@pytest.fixture(scope="module")
def reference_run():
    with navigation_sampler(num_workers=0) as sampler:
        tasks = sampler.sample_tasks(4)
        return tasks, episode_arrays(*sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1, gamma=0.99))


def test_sample_structure_and_shapes(reference_run):
    with navigation_sampler(num_workers=0) as sampler:
        tasks = sampler.sample_tasks(4)
        train, valid = sample_adapt_sample(sampler, tasks, num_steps=2, fast_lr=0.1)
    assert len(train) == 2 and all(len(step) == 4 for step in train) and len(valid) == 4
    for batch, task in zip(valid, tasks):
        assert isinstance(batch, BatchEpisodes)
        assert batch.observations.shape == (len(batch), 3, 2) and batch.actions.shape == (len(batch), 3, 2)
        assert batch.rewards.shape == (len(batch), 3) and batch.batch_size == 3
        assert batch.task is task
        assert torch.isfinite(batch.advantages).all()
    _, valid_only = sample_adapt_sample(navigation_sampler(num_workers=0), tasks, num_steps=0)
    assert _ == [] and len(valid_only) == 4


def test_tasks_reproducible_from_seed():
    a = navigation_sampler(num_workers=0, seed=5).sample_tasks(6)
    b = navigation_sampler(num_workers=0, seed=5).sample_tasks(6)
    c = navigation_sampler(num_workers=0, seed=6).sample_tasks(6)
    assert all(np.array_equal(x["goal"], y["goal"]) for x, y in zip(a, b))
    assert not all(np.array_equal(x["goal"], y["goal"]) for x, y in zip(a, c))


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_identical_across_num_workers(reference_run, num_workers):
    tasks, expected = reference_run
    with navigation_sampler(num_workers=num_workers) as sampler:
        got = episode_arrays(*sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1, gamma=0.99))
    assert_identical(expected, got)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_identical_across_start_methods_and_partial(reference_run, start_method):
    tasks, expected = reference_run
    for partial in (False, True):
        with navigation_sampler(num_workers=2, start_method=start_method, partial=partial) as sampler:
            got = episode_arrays(*sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1, gamma=0.99))
        assert_identical(expected, got)


def test_different_seeds_give_different_episodes(reference_run):
    tasks, expected = reference_run
    with navigation_sampler(num_workers=0, seed=4) as sampler:
        got = episode_arrays(*sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1, gamma=0.99))
    assert not torch.equal(expected[1], got[1])


def test_mujoco_env_identical_in_process_and_workers():
    torch.manual_seed(0)
    policy = NormalMLPPolicy(20, 6, hidden_sizes=(32, 32))
    runs = []
    for num_workers in (0, 2):
        with MultiTaskSampler("HalfCheetahVel-v5", {"max_episode_steps": 20}, 2, policy, LinearFeatureBaseline(20),
                              seed=1, num_workers=num_workers) as sampler:
            tasks = sampler.sample_tasks(3)
            runs.append(episode_arrays(*sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1)))
    assert_identical(*runs)
    assert runs[0][0].shape == (20, 2, 20)


@pytest.mark.parametrize("env_id,num_steps", [("Bandit-K5-v0", 1), ("TabularMDP-v0", 1)])
def test_discrete_envs(env_id, num_steps):
    torch.manual_seed(0)
    probe = maml_rl.envs.make_env(env_id)()
    obs_size = probe.observation_space.shape[0]
    policy = CategoricalMLPPolicy(obs_size, probe.action_space.n, hidden_sizes=(16,))
    runs = []
    for num_workers in (0, 2):
        with MultiTaskSampler(env_id, {}, 4, policy, LinearFeatureBaseline(obs_size), seed=2, num_workers=num_workers) as sampler:
            tasks = sampler.sample_tasks(3)
            train, valid = sample_adapt_sample(sampler, tasks, num_steps=num_steps, fast_lr=0.5)
            runs.append(episode_arrays(train, valid))
    assert_identical(*runs)
    actions = runs[0][1]
    assert actions.dtype == torch.int64 and actions.min() >= 0 and actions.max() < probe.action_space.n


def test_padding_lengths_and_task_assignment():
    policy = NormalMLPPolicy(3, 1, hidden_sizes=(8,))
    tasks = [{"value": 0.5, "length": 2}, {"value": -0.25, "length": 5}]
    for num_workers in (0, 3):
        with MultiTaskSampler(None, None, 4, policy, None, env_fn=make_probe_env, seed=0, num_workers=num_workers) as sampler:
            first = sampler.rollout(tasks)
            second = sampler.rollout(list(reversed(tasks)))  # stale rows from the first call must not leak
        for batches, order in ((first, tasks), (second, list(reversed(tasks)))):
            for batch, task in zip(batches, order):
                n = task["length"]
                assert len(batch) == 5 and batch.lengths.tolist() == [n] * 4
                assert torch.all(batch.observations[:n, :, 0] == task["value"])
                assert torch.equal(batch.observations[:n, :, 1], torch.arange(n, dtype=torch.float32).unsqueeze(1).expand(n, 4))
                assert torch.all(batch.observations[n:] == 0) and torch.all(batch.rewards[n:] == 0)
                assert torch.all(batch.actions[n:] == 0) and torch.all(batch.rewards[:n] != 0)


def test_workers_import_no_torch():
    policy = NormalMLPPolicy(3, 1)
    with MultiTaskSampler(None, None, 2, policy, None, env_fn=make_probe_env, seed=0, num_workers=2, start_method="spawn") as sampler:
        batches = sampler.rollout([{"value": 0.0, "length": 3}])
    assert torch.all(batches[0].observations[:3, :, 2] == 0)


class PlainPolicy(torch.nn.Module):
    """A policy that knows nothing of batched parameters."""

    def __init__(self):
        super().__init__()
        self.mean = torch.nn.Linear(2, 2)

    def forward(self, observations, params=None):
        if params is None:
            return Independent(Normal(self.mean(observations), 0.1), 1)
        mean = torch.nn.functional.linear(observations, params["mean.weight"], params["mean.bias"])
        return Independent(Normal(mean, 0.1), 1)


def test_per_task_params_batched_equals_plain_module():
    torch.manual_seed(0)
    plain = PlainPolicy()
    mlp = NormalMLPPolicy(2, 2, hidden_sizes=(), init_std=0.1)
    with torch.no_grad():
        mlp.mu.weight.copy_(plain.mean.weight)
        mlp.mu.bias.copy_(plain.mean.bias)
    per_task = [{"mean.weight": plain.mean.weight * s, "mean.bias": plain.mean.bias + s} for s in (0.5, 2.0)]
    per_task_mlp = [{"mu.weight": p["mean.weight"], "mu.bias": p["mean.bias"], "sigma": mlp.sigma.detach()} for p in per_task]
    results = []
    for policy, params in ((plain, per_task), (mlp, per_task_mlp)):
        with MultiTaskSampler("2DNavigation-v0", {}, 3, policy, None, seed=9, num_workers=0) as sampler:
            tasks = sampler.sample_tasks(2)
            results.append(sampler.rollout(tasks, params))
    for a, b in zip(*results):
        torch.testing.assert_close(a.actions, b.actions)
        torch.testing.assert_close(a.observations, b.observations)
    # Adaptation too: a policy without stacked parameters is adapted task by
    # task, the MLP in one batched call; both reach the same parameters.
    adapted = []
    for policy in (plain, mlp):
        with MultiTaskSampler("2DNavigation-v0", {}, 3, policy, LinearFeatureBaseline(2), seed=9,
                              num_workers=0) as sampler:
            _, valid = sample_adapt_sample(sampler, sampler.sample_tasks(2), num_steps=1, fast_lr=0.1)
            adapted.append([batch.behaviour_params for batch in valid])
    for a, b in zip(*adapted):
        torch.testing.assert_close(a["mean.weight"], b["mu.weight"])
        torch.testing.assert_close(a["mean.bias"], b["mu.bias"])
        assert not torch.equal(a["mean.bias"], plain.mean.bias)


def test_env_fn_variants_and_repr():
    policy = NormalMLPPolicy(3, 1)
    factories = [ProbeEnv, lambda: make_probe_env(4), functools.partial(make_probe_env, 4)]
    for env_fn in factories:
        with MultiTaskSampler(None, None, 2, policy, None, env_fn=env_fn, seed=0, num_workers=1, start_method="spawn",
                              max_episode_steps=4) as sampler:
            batches = sampler.rollout(sampler.sample_tasks(2))
            assert len(batches) == 2 and "MultiTaskSampler(" in repr(sampler)


def test_bad_arguments_raise_clear_errors():
    policy = NormalMLPPolicy(3, 1)
    with pytest.raises(ValueError, match="batch_size"):
        MultiTaskSampler(None, None, 0, policy, None, env_fn=make_probe_env)
    with pytest.raises(ValueError, match="start_method"):
        MultiTaskSampler(None, None, 2, policy, None, env_fn=make_probe_env, start_method="thread")
    with pytest.raises(ValueError, match="num_workers"):
        MultiTaskSampler(None, None, 2, policy, None, env_fn=make_probe_env, num_workers=-1)
    with pytest.raises(ValueError, match="either env_name"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, None, env_fn=make_probe_env)
    with pytest.raises(TypeError, match="factory"):
        MultiTaskSampler(None, None, 2, policy, None, env_fn=make_probe_env())
    with pytest.raises(ValueError, match="baseline"):
        sample_adapt_sample(MultiTaskSampler(None, None, 2, policy, None, env_fn=make_probe_env, num_workers=0),
                            [{"value": 0, "length": 2}])
    with pytest.raises(TypeError, match="not a meta-learning environment"):
        MultiTaskSampler("CartPole-v1", {}, 2, policy, None)


def test_unpicklable_env_fn_is_named():
    lock = threading.Lock()

    def env_fn():
        with lock:
            return make_probe_env()

    with pytest.raises(TypeError) as info:
        MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=env_fn)
    message = str(info.value)
    assert "lock" in message and "factory" in message
    with pytest.raises(Exception):
        pickle.dumps(lock)  # the premise: a lock really cannot be pickled


def test_state_dict_resumes_exactly():
    with navigation_sampler(num_workers=0) as sampler:
        sample_adapt_sample(sampler, sampler.sample_tasks(2), num_steps=1)
        state = sampler.state_dict()
        tasks = sampler.sample_tasks(2)
        expected = episode_arrays(*sample_adapt_sample(sampler, tasks, num_steps=1))
    with navigation_sampler(num_workers=2, seed=123) as resumed:
        resumed.load_state_dict(state)
        resumed_tasks = resumed.sample_tasks(2)
        got = episode_arrays(*sample_adapt_sample(resumed, resumed_tasks, num_steps=1))
    assert all(np.array_equal(a["goal"], b["goal"]) for a, b in zip(tasks, resumed_tasks))
    assert_identical(expected, got)


def test_rollouts_default_to_the_device_of_the_policy():
    """Without ``device=`` every rollout method places its batches where the policy's parameters are
    (a policy moved to a GPU samples there untold); a ``device=`` given still wins."""
    torch.manual_seed(0)
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(8,))
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 3}, 2, policy, seed=1, num_workers=0) as sampler:
        tasks = sampler.sample_tasks(2)
        assert sampler.rollout(tasks)[0].observations.device == torch.device("cpu")
        assert sampler.rollout_transitions(tasks)[0].observations.device == torch.device("cpu")
        assert sampler.rollout_trials(tasks, 2)[0].observations.device == torch.device("cpu")
        policy.to("meta")  # what the default reads, without a GPU here
        assert sampler.batch_device() == torch.device("meta")
        assert sampler.batch_device("cpu") == "cpu"
    assert MultiTaskSampler.batch_device(SimpleNamespace(policy=None)) == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_policy_samples_on_cuda_without_being_told():
    torch.manual_seed(0)
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(8,)).to("cuda")
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 3}, 2, policy, seed=1, num_workers=0) as sampler:
        tasks = sampler.sample_tasks(2)
        for batch in (sampler.rollout(tasks)[0], sampler.rollout_transitions(tasks)[0]):
            assert batch.observations.device.type == "cuda"
