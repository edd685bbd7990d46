"""Bad input to the sampler is named, never silently used: env outputs, concurrent use,
requests too large for memory, envs without a time limit."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import EnvOutputError, InsufficientMemoryError, MultiTaskSampler, WorkerError
from maml_rl.samplers.workers import memory
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers.bad_envs import BadOutputEnv, NoTimeLimitEnv, make_bad_output_env

GOOD = {}


def bad_sampler(num_workers, **kwargs):
    return MultiTaskSampler(None, None, 2, NormalMLPPolicy(2, 1), LinearFeatureBaseline(2), env_fn=make_bad_output_env,
                            seed=0, num_workers=num_workers, **kwargs)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_wrong_observation_shape_is_named(num_workers):
    """A scalar observation was broadcast into the row; now: the env, the call, the slot, the step."""
    with bad_sampler(num_workers) as sampler:
        with pytest.raises(WorkerError) as info:
            sampler.rollout([GOOD, {"bad": "scalar", "at_step": 3}])
    message = str(info.value)
    assert "BadOutputEnv.step() returned an observation of shape () (float)" in message
    assert "observation_space needs a numpy array of shape (2,)" in message
    assert "step 3 in env slot 2" in message


@pytest.mark.parametrize("num_workers", [0, 1])
def test_array_reward_is_refused(num_workers):
    with bad_sampler(num_workers) as sampler, pytest.raises(WorkerError, match=r"reward of shape \(2,\).*scalar"):
        sampler.rollout([{"bad": "array_reward", "at_step": 0}])


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("bad, shown", [("string_reward", "the reward '1.5' of type str"),
                                        ("none_reward", "the reward None of type NoneType"),
                                        ("string_terminated", "terminated='False' of type str")])
def test_non_numeric_reward_and_non_bool_terminated_are_refused(num_workers, bad, shown):
    """The reward "1.5" was stored as 1.5, None reported as "non-finite reward nan", and
    terminated="False" (truthy) ended the episode; now each is refused with the env, value, type and slot."""
    with bad_sampler(num_workers) as sampler, pytest.raises(WorkerError) as info:
        sampler.rollout([GOOD, {"bad": bad, "at_step": 1}])
    message = str(info.value)
    assert f"BadOutputEnv.step() returned {shown}" in message
    assert "step 1 in env slot 2" in message and repr(bad) in message


@pytest.mark.parametrize("num_workers", [0, 2])
def test_integer_terminated_is_accepted(num_workers):
    """terminated=1 (an older env's int) is unambiguous: the episode ends after that step."""
    with bad_sampler(num_workers) as sampler:
        batches = sampler.rollout([{"bad": "int_terminated", "at_step": 2}])
    assert batches[0].lengths.tolist() == [3, 3]


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_value_beyond_float32_is_named_with_its_place(num_workers):
    """float64 1e300 became inf in the float32 buffer and was blamed later as 'non-finite' advantages.
    Storing it overflows on purpose: no "overflow encountered in cast" warning."""
    with bad_sampler(num_workers) as sampler, pytest.raises(EnvOutputError) as info:
        sampler.rollout([GOOD, GOOD, {"bad": "huge", "at_step": 1}])
    message = str(info.value)
    assert "BadOutputEnv returned a non-finite observation" in message and "inf" in message
    assert "from step() 1 of env slot 4" in message and "float32" in message


@pytest.mark.parametrize("num_workers", [0, 2])
def test_nan_reward_is_named_before_the_baseline(num_workers):
    with bad_sampler(num_workers) as sampler, pytest.raises(EnvOutputError) as info:
        sample_adapt_sample(sampler, [GOOD, {"bad": "nan_reward", "at_step": 2}], num_steps=1)
    assert "non-finite reward nan from step() 2 of env slot 2 (task {'bad': 'nan_reward'" in str(info.value)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_unpicklable_task_is_refused_in_both_layouts(num_workers):
    """With workers it was a bare "cannot pickle '_thread.lock' object"; with 0 workers it was accepted.
    Now both layouts refuse it, naming the task and its entry, and the refused call changes no later seed."""
    bad_task = {"goal": 1.0, "lock": threading.Lock()}
    with bad_sampler(num_workers) as sampler:
        with pytest.raises(TypeError) as info:
            sampler.rollout([GOOD, bad_task])
        after_refusal = sampler.rollout([GOOD])[0].observations
    message = str(info.value)
    assert "task 1 ({'goal': 1.0, 'lock': <unlocked _thread.lock" in message
    assert "its entry ['lock'] = <unlocked _thread.lock" in message and "cannot pickle '_thread.lock'" in message
    assert "pass plain data (numbers, arrays, strings" in message
    with bad_sampler(num_workers) as fresh:
        assert torch.equal(after_refusal, fresh.rollout([GOOD])[0].observations)


def test_env_without_time_limit_runs_and_one_that_never_ends_is_named():
    policy = NormalMLPPolicy(2, 1)
    with MultiTaskSampler(None, None, 2, policy, None, env_fn=NoTimeLimitEnv, seed=0, num_workers=0) as sampler:
        assert sampler.horizon == 1000
        batches = sampler.rollout([{"length": 1}, {"length": 4}])
        assert [b.lengths.tolist() for b in batches] == [[1, 1], [4, 4]]
        assert len(batches[0]) == 4  # the assembled horizon is the longest episode, not the cap
        with pytest.raises(EnvOutputError, match="has no time limit and did not end the episode of env slot 2 .* "
                                                 "within 1000 steps.*max_episode_steps="):
            sampler.rollout([{"length": 2}, {"length": 10**6}])
    with MultiTaskSampler(None, None, 2, policy, None, env_fn=NoTimeLimitEnv, seed=0, num_workers=0,
                          max_episode_steps=5) as sampler:
        assert sampler.rollout([{"length": 10**6}])[0].lengths.tolist() == [5, 5]


class SlowOncePolicy(NormalMLPPolicy):
    """A NormalMLPPolicy whose first forward after ``arm()`` waits half a second: a rollout kept busy, through the
    sampler's public inputs only."""

    def arm(self):
        self.started = threading.Event()

    def forward(self, *args, **kwargs):
        started = self.__dict__.pop("started", None)
        if started is not None:
            started.set()
            time.sleep(0.5)  # keeps the first call busy while the second arrives
        return super().forward(*args, **kwargs)


def test_concurrent_use_is_refused_and_harms_nothing():
    """Two threads on one sampler hung for over a minute or blamed the env; now the second is refused at once."""
    policy = SlowOncePolicy(2, 2)
    with MultiTaskSampler("2DNavigation-v0", {}, 4, policy, LinearFeatureBaseline(2), seed=3, num_workers=1) as sampler:
        tasks = sampler.sample_tasks(2)
        expected = sample_adapt_sample(MultiTaskSampler("2DNavigation-v0", {}, 4, policy, LinearFeatureBaseline(2),
                                                        seed=3, num_workers=0), tasks, num_steps=1, fast_lr=0.1)
        results = {}
        policy.arm()
        started = policy.started

        def first():
            results["first"] = sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1)

        thread = threading.Thread(target=first, name="first-user")
        thread.start()
        assert started.wait(30)
        begin = time.monotonic()
        with pytest.raises(RuntimeError, match="while rollout\\(\\) in thread 'first-user' is still running.*"
                                               "not thread-safe"):
            sampler.rollout(tasks)
        assert time.monotonic() - begin < 1.0
        thread.join(60)
        assert not thread.is_alive()
    train, valid = results["first"]
    for got, want in zip([*train[0], *valid], [*expected[0][0], *expected[1]]):
        assert torch.equal(got.observations, want.observations) and torch.equal(got.actions, want.actions)


def test_request_too_large_for_memory_is_refused_before_any_worker(monkeypatch):
    """200 tasks x 100 episodes of HalfCheetahVel at horizon 200 needs ~23 GB: refuse it up front with the figure."""
    monkeypatch.setattr(memory, "available_memory", lambda: 4 * 10**9)
    policy = NormalMLPPolicy(20, 6)
    with MultiTaskSampler("HalfCheetahVel-v5", {}, 100, policy, None, seed=0, num_workers=2) as sampler:
        begin = time.monotonic()
        with pytest.raises(InsufficientMemoryError) as info:
            sampler.rollout(sampler.sample_tasks(200))
        assert time.monotonic() - begin < 60
        assert sampler.rollout_backend.pool is None  # no worker was started
    message = str(info.value)
    assert "sampling 200 tasks x 100 episodes of HalfCheetahVel-v5 at horizon 200 needs about" in message
    assert "20000 envs x" in message and "only 4.0 GB is available" in message and "meta-batch-size" in message
    estimate = float(message.split("needs about ")[1].split(" GB")[0])
    assert 10 < estimate < 80, estimate  # ~1.1 MB per env, ~3 GB of trajectories and noise


def test_memory_estimate_costs_nothing_for_ordinary_requests(monkeypatch):
    def fail(*args):
        raise AssertionError("a small request should not start a measuring process")

    monkeypatch.setattr(memory, "_measure", fail)
    with MultiTaskSampler("HalfCheetahVel-v5", {"max_episode_steps": 5}, 2, NormalMLPPolicy(20, 6), None, seed=0,
                          num_workers=0) as sampler:
        assert len(sampler.rollout(sampler.sample_tasks(3))) == 3


def test_absurd_request_is_refused_on_any_machine():
    with MultiTaskSampler("HalfCheetahVel-v5", {}, 1000, NormalMLPPolicy(20, 6), None, seed=0,
                          num_workers=0) as sampler:
        with pytest.raises(InsufficientMemoryError, match="2000000 envs"):
            sampler.rollout(sampler.sample_tasks(2000))


def test_bad_output_env_behaves_without_a_bad_task():
    """The misbehaving env is sound otherwise, so each test above fails for its own reason."""
    env = BadOutputEnv()
    env.reset_task(GOOD)
    env.reset(seed=0)
    observation, reward, *_ = env.step([0.5])
    assert observation.shape == (2,) and reward == 0.5


def test_missing_policy_is_named():
    with pytest.raises(TypeError, match=r"policy must be a torch.nn.Module returning a Distribution, got None$"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, None, None)
