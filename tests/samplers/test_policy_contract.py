"""The contract with a user's own policy and env (docs/sampler.md, "Your own
policy and env"): the same bits on every layout, no silent wrong data at the
edge, and errors that name the culprit before any env sees a bad action."""

from __future__ import annotations

import gc
import glob
import os
import types

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical

from maml_rl.policies import CategoricalMLPPolicy, NormalMLPPolicy
from maml_rl.samplers import EnvOutputError, MultiTaskSampler, PolicyOutputError, WorkerDiedError, WorkerError
from maml_rl.samplers.rollout.noise import actions_from_noise
from maml_rl.samplers.workers.batched_child_env import mujoco_batch
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers.contract_envs import echo_factory
from helpers.naive_sampler import PlainMLP
from helpers.process_utils import mapped_semaphores

pytestmark = [pytest.mark.processes, pytest.mark.mujoco_version]

SEED = 11
# The fast path needs mujoco.batch (MuJoCo >= 4); CI's MuJoCo 3.3 venv runs the other layouts, and its
# MuJoCo 4 venv sets MAML_RL_REQUIRE_FAST_PATH so that the fast-path layouts cannot be left out there.
FAST_PATH = mujoco_batch is not None or bool(os.environ.get("MAML_RL_REQUIRE_FAST_PATH"))


def rollouts(policy, batch_size, *calls, env="HalfCheetahVel-v5", **kwargs):
    """The episodes of successive rollout calls (each a params argument) on one sampler."""
    with MultiTaskSampler(env, {}, batch_size, policy, None, seed=SEED, max_episode_steps=12, **kwargs) as sampler:
        tasks = sampler.sample_tasks(5)
        return [sampler.rollout(tasks, params=params(policy) if callable(params) else params) for params in calls]


def equal_copies(policy):
    """One dict per task, each a copy of the policy's own values."""
    return [{name: p.detach().clone() for name, p in policy.named_parameters()} for _ in range(5)]


def assert_same(a, b, label):
    for k, (x, y) in enumerate(zip(a, b)):
        for name in ("observations", "actions", "rewards", "lengths"):
            assert torch.equal(getattr(x, name), getattr(y, name)), (label, k, name)


# -- one rule for a policy without stacked parameters ------------------------

@pytest.mark.parametrize("batch_size", [1, 2, 3, 5])
def test_a_generic_policy_gives_the_same_bits_in_every_layout(batch_size):
    """Before: one call over all K*B rows when tasks shared parameters, one per
    task otherwise (and on Ray): with 1-3 episodes per task the actions
    differed from step 0 (max 2.4e-7), and a list of equal dicts differed from
    params=None. Now every layout calls the policy once per task on its B rows."""
    policy = PlainMLP(20, 6)
    reference = rollouts(policy, batch_size, None, None, num_workers=0, mujoco_batch=False)
    layouts = [dict(num_workers=0, mujoco_batch=True), dict(num_workers=2, mujoco_batch=False),
               dict(num_workers=2, partial=True, mujoco_batch=True), dict(num_workers=2, partial=True)]
    layouts = [layout for layout in layouts if FAST_PATH or not layout.get("mujoco_batch")]
    for layout in layouts:
        first, listed = rollouts(policy, batch_size, None, equal_copies, **layout)
        assert_same(first, reference[0], layout)
        assert_same(listed, reference[1], ("a list of equal dicts", layout))


# -- what the policy returns, checked before any env sees it ---------------

def test_nan_actions_are_the_policys_error_at_the_first_step():
    policy = PlainMLP(3, 2)
    with torch.no_grad():
        policy.l2.bias[1] = float("nan")
    with MultiTaskSampler(None, None, 2, policy, None, env_fn=echo_factory(), seed=0, num_workers=0) as sampler:
        with pytest.raises(PolicyOutputError) as info:
            sampler.rollout(sampler.sample_tasks(2))
    assert str(info.value) == (
        "the policy PlainMLP returned the non-finite action [0.0, nan] at step 0 in env slot 0 (task 0: {'id': 0}), "
        "in 4 running slot(s) of that step; no env was stepped with it. Check the policy (its parameters after "
        "adaptation, its inputs' scale)."
    ).replace("[0.0, nan]", str(info.value).split("action ")[1].split(" at step")[0])
    assert "nan" in str(info.value).split(" at step")[0]


@pytest.mark.parametrize("size", [5, 7])
def test_actions_of_the_wrong_size_are_refused_at_construction(size):
    with pytest.raises(PolicyOutputError) as info:
        MultiTaskSampler("HalfCheetahVel-v5", {}, 2, NormalMLPPolicy(20, size), None, num_workers=0)
    assert str(info.value) == (
        f"the policy NormalMLPPolicy returns a Normal of mean shape (1, {size}) for one observation, but the action "
        f"space needs actions of shape (6,): build it with (6,) outputs"
    )


class DropsARow(torch.nn.Module):
    """Returns one row fewer than it is given, when given more than one."""

    def __init__(self):
        super().__init__()
        self.inner = PlainMLP(3, 2)

    def forward(self, observations, params=None):
        return self.inner(observations[:-1] if len(observations) > 1 else observations, params)


def test_actions_for_the_wrong_number_of_rows_are_refused_naming_the_task():
    with MultiTaskSampler(None, None, 3, DropsARow(), None, env_fn=echo_factory(), seed=0, num_workers=0) as sampler:
        with pytest.raises(PolicyOutputError) as info:
            sampler.rollout(sampler.sample_tasks(2))
    assert str(info.value) == (
        "the policy DropsARow returned a Normal of mean shape (2, 2) at step 0 for task 0 ({'id': 0}); the action "
        "space needs a mean of shape (3, 2) (rows x action shape). Build the policy for this env's spaces "
        "(e.g. maml_rl.policies.get_policy_for_env)."
    )


def test_a_categorical_policy_over_more_categories_than_the_space_is_refused_at_construction():
    """Before: actions 3 and 4 reached a Discrete(3) env that did not check."""
    env_fn = echo_factory(action_space=gym.spaces.Discrete(3))
    with pytest.raises(PolicyOutputError) as info:
        MultiTaskSampler(None, None, 2, CategoricalMLPPolicy(3, 5), None, env_fn=env_fn, num_workers=0)
    assert str(info.value) == ("the policy CategoricalMLPPolicy returns a Categorical over 5 categories, but the action "
                               "space is Discrete(3): build it with 3 outputs")


def test_sample_without_tasks_and_a_negative_seed_are_named():
    with MultiTaskSampler(None, None, 2, PlainMLP(3, 2), None, env_fn=echo_factory(), num_workers=0) as sampler:
        with pytest.raises(ValueError, match=r"^sample_adapt_sample\(\) needs at least one task$"):
            sample_adapt_sample(sampler, [], num_steps=0)
        with pytest.raises(ValueError, match=r"^rollout\(\) needs at least one task$"):
            sampler.rollout([])
    with pytest.raises(ValueError, match=r"^seed must be an int >= 0 \(or None to draw one\), got -1$"):
        MultiTaskSampler(None, None, 2, PlainMLP(3, 2), None, env_fn=echo_factory(), seed=-1, num_workers=0)


# -- the eight silent cases ------------------------------------------------

@pytest.mark.parametrize("num_workers, partial", [(0, False), (2, False), (2, True)])
def test_discrete_start_is_mapped_and_the_record_holds_indices(num_workers, partial):
    """Discrete(3, start=1): the env got 0, 1, 2 (a third of them outside its space)."""
    env_fn = echo_factory(horizon=6, action_space=gym.spaces.Discrete(3, start=1))
    torch.manual_seed(0)
    with MultiTaskSampler(None, None, 4, CategoricalMLPPolicy(3, 3), None, env_fn=env_fn, seed=1,
                          num_workers=num_workers, partial=partial) as sampler:
        batches = sampler.rollout(sampler.sample_tasks(3))
    for batch in batches:
        received = batch.observations[1:, :, 0]  # the action each env got, observed at the next step
        recorded = batch.actions[:-1]
        assert set(recorded.unique().tolist()) <= {0, 1, 2}
        assert torch.equal(received, (recorded + 1).to(received.dtype))


@pytest.mark.parametrize("num_workers, partial", [(0, False), (2, False), (2, True)])
def test_an_env_clipping_its_action_in_place_leaves_the_record_alone(num_workers, partial):
    """Before: sampled [-2.21, -0.98] was recorded as [-0.5, -0.5], so the policy
    gradient used actions the policy never sampled."""
    out = {}
    for clip in (False, True):
        env_fn = echo_factory(horizon=6, clip_in_place=clip)
        with MultiTaskSampler(None, None, 4, NormalMLPPolicy(3, 2), None, env_fn=env_fn, seed=1,
                              num_workers=num_workers, partial=partial) as sampler:
            out[clip] = sampler.rollout(sampler.sample_tasks(2))
    for plain, clipped in zip(out[False], out[True]):
        # Step 0 sees the same observations either way: the same sampled actions recorded.
        assert torch.equal(plain.actions[0], clipped.actions[0])
        assert clipped.actions.abs().max() > 0.5  # unclipped values were recorded
        got = clipped.observations[1:, :, :2].to(torch.float32)
        assert torch.equal(got, clipped.actions[:-1].clamp(-0.5, 0.5))  # the env saw its clipped copy


def test_per_task_parameters_that_leave_a_key_out_take_the_policys_own():
    """Before: stacking by the first dict's keys sampled task 1 with the policy's
    own sigma while recording its dict's; the other order raised KeyError."""
    policy = NormalMLPPolicy(3, 2, hidden_sizes=(4,))
    own = {name: p.detach().clone() for name, p in policy.named_parameters()}
    missing = {name: value for name, value in own.items() if name != "sigma"}
    wide = {**own, "sigma": own["sigma"] + 1.0}
    for given, complete in (([missing, wide], [own, wide]), ([wide, missing], [wide, own])):
        results = []
        for params in (given, complete):
            with MultiTaskSampler(None, None, 3, policy, None, env_fn=echo_factory(), seed=2, num_workers=0) as s:
                results.append(s.rollout(s.sample_tasks(2), params=params))
        assert_same(results[0], results[1], "a dict without sigma is the policy's own sigma")
        for batch, expected in zip(results[0], complete):
            assert torch.equal(batch.behaviour_params["sigma"], expected["sigma"])
    with MultiTaskSampler(None, None, 3, policy, None, env_fn=echo_factory(), seed=2, num_workers=0) as sampler:
        with pytest.raises(ValueError, match=r"params name \['bogus'\], which are not parameters of the policy "
                                             r"NormalMLPPolicy \(its parameters: \['sigma', 'layer1.weight'"):
            sampler.rollout(sampler.sample_tasks(1), params={**own, "bogus": torch.zeros(1)})


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_float64_value_beyond_float32_is_named_as_the_envs():
    """Before: no error (the check read the float64 buffer); the episode held inf.
    The cast that finds it is expected to overflow: no "overflow encountered in cast" warning."""
    env_fn = echo_factory(value=[1e39, 0.0, 1.0])
    with MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 2), None, env_fn=env_fn, seed=0, num_workers=0) as sampler:
        with pytest.raises(EnvOutputError) as info:
            sampler.rollout(sampler.sample_tasks(1))
    message = str(info.value)
    assert message.startswith("EchoEnv returned a non-finite observation [1e+39, 0.0, 1.0] from step() 0 of env slot 0")
    assert "float32" in message


def test_the_inverse_cdf_never_selects_a_category_of_probability_zero():
    """Logits [0.3, -1.2, -inf]: the float32 CDF stops at 0.99999994, and a draw
    at or above it selected the impossible category 2 (log-probability -inf)."""
    distribution = Categorical(logits=torch.tensor([[0.3, -1.2, -float("inf")]]))
    cdf = distribution.probs.cumsum(-1)
    assert cdf[0, -1] < 1  # the case at hand
    for u in (cdf[0, 1].item(), np.nextafter(np.float32(1), np.float32(0))):
        action = actions_from_noise(distribution, torch.tensor([u], dtype=torch.float32), 0)
        assert action.tolist() == [1] and distribution.log_prob(action).isfinite().all()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_float_observations_for_an_integer_space_are_refused(num_workers):
    """Before: [0.7, 2.9] was stored as [0, 2] silently."""
    space = gym.spaces.Box(0, 10, (3,), np.int64)
    env_fn = echo_factory(observation_space=space, value=np.array([0.7, 2.9, 1.0]))
    with MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 2), None, env_fn=env_fn, seed=0,
                          num_workers=num_workers) as sampler:
        with pytest.raises(WorkerError, match=r"EchoEnv.step\(\) returned float64 observations, but its "
                                              r"observation_space has dtype int64, into which they would be "
                                              r"truncated \(e.g. 2.9 -> 2\)"):
            sampler.rollout(sampler.sample_tasks(1))


def test_a_read_only_mapping_of_parameters_is_one_set_for_every_task():
    """Before: a MappingProxyType was taken for a list ("got 5 parameter sets for 3 tasks")."""
    policy = NormalMLPPolicy(3, 2)
    own = {name: p.detach().clone() for name, p in policy.named_parameters()}
    results = []
    for params in (own, types.MappingProxyType(own)):
        with MultiTaskSampler(None, None, 2, policy, None, env_fn=echo_factory(), seed=3, num_workers=0) as sampler:
            results.append(sampler.rollout(sampler.sample_tasks(3), params=params))
    assert_same(*results, "read-only mapping")


def test_box_actions_outside_the_bounds_reach_the_env_unclipped():
    """gymnasium's convention, documented: the env clips (or not) as it likes."""
    with MultiTaskSampler(None, None, 4, NormalMLPPolicy(3, 2), None, env_fn=echo_factory(horizon=6), seed=1,
                          num_workers=0) as sampler:
        batch = sampler.rollout(sampler.sample_tasks(1))[0]
    received = batch.observations[1:, :, :2].to(torch.float32)
    assert received.abs().max() > 0.5 and torch.equal(received, batch.actions[:-1])


# -- clean-up after a worker's death ---------------------------------------

@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_no_named_semaphore_outlives_a_dead_worker_without_a_garbage_collection(start_method, probe_sampler):
    """Three sem.mp-* files stayed until gc.collect() (a reference cycle through the error's traceback)."""
    before = set(glob.glob("/dev/shm/sem.mp-*"))
    gc.disable()
    try:
        from maml_rl.data.baseline import LinearFeatureBaseline

        sampler = probe_sampler(baseline=LinearFeatureBaseline(3), num_workers=2, start_method=start_method)
        sampler.rollout([{"value": 0.0, "length": 5}])
        # The workers' semaphores exist: those made since that this process maps (another process on the machine,
        # the other pytest-xdist worker say, makes and frees its own meanwhile).
        ours = (set(glob.glob("/dev/shm/sem.mp-*")) - before) & mapped_semaphores([os.getpid()])
        assert ours
        with pytest.raises(WorkerDiedError) as info:
            sampler.rollout([{"value": 0.0, "length": 5}, {"value": 0.0, "length": 5, "kill_at": 1}])
        # Even while the error (and its traceback) is held:
        assert ours & set(glob.glob("/dev/shm/sem.mp-*")) == set()
        del info
        sampler.close()
    finally:
        gc.enable()


class NoParamsPolicy(torch.nn.Module):
    """A user's policy whose forward takes observations only (no ``params=``)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        self.log_std = torch.nn.Parameter(torch.zeros(2))

    def forward(self, observations):
        normal = torch.distributions.Normal(self.linear(observations), self.log_std.exp())
        return torch.distributions.Independent(normal, 1)


def test_policy_without_params_argument_rolls_out_and_is_refused_early_where_params_are_needed():
    """docs/sampler.md called params= optional, but sample() then failed deep in the inner loss with
    "NoParamsPolicy.forward() got an unexpected keyword argument 'params'"; now it is refused before any rollout."""
    import maml_rl.envs  # noqa: F401  (registers the envs)
    from maml_rl.data.baseline import LinearFeatureBaseline

    policy = NoParamsPolicy()
    with MultiTaskSampler("2DNavigation-v0", {}, 3, policy, LinearFeatureBaseline(2), seed=SEED,
                          num_workers=0) as sampler:
        tasks = sampler.sample_tasks(2)
        assert len(sampler.rollout(tasks)) == 2
        assert len(sample_adapt_sample(sampler, tasks, num_steps=0)[1]) == 2
        state = sampler.state_dict()
        with pytest.raises(TypeError, match=r"sample\(\) adapts.* NoParamsPolicy.forward\(\) takes no "
                                            r"params= argument: give it one"):
            sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1)
        with pytest.raises(TypeError, match=r"parameters were given to the rollout.*takes no params= argument"):
            sampler.rollout(tasks, dict(policy.named_parameters()))
        assert sampler.state_dict() == state  # refused before any rollout
        assert len(sampler.rollout(tasks, [None, None])) == 2
