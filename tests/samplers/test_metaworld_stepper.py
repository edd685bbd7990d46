"""The sampler's Meta-World fast path (``StepperChildEnv`` driving ``MetaWorldStepper``) against the per-env
path: the same sampler with ``mujoco_batch=False`` steps every slot through its own ``env.step`` (the fast
classes, which ``tests/envs/test_metaworld_fast.py`` checks against Meta-World's own, bit for bit). Every
case compares whole batches of episodes bit for bit: observations, actions, rewards, lengths, successes."""

import pickle

import numpy as np
import pytest
import torch
from torch.distributions import Independent, Normal

try:
    import metaworld  # noqa: F401
except ImportError:
    metaworld = pytest.importorskip("metaworld")
import metaworld.env_dict
from metaworld.policies import ENV_POLICY_MAP

from maml_rl.envs import make_env
from maml_rl.envs import metaworld as metaworld_env
from maml_rl.envs.metaworld import MetaWorldEnv
from maml_rl.envs.metaworld_fast.batched import SPECS, BatchedSawyer, mujoco_batch
from maml_rl.envs.metaworld_fast.batched.stepper import MIN_GROUP, MetaWorldStepper
from maml_rl.samplers import MultiTaskSampler
from maml_rl.samplers.workers.processes import usable_cpus
from maml_rl.samplers.workers.stepper_child_env import StepperChildEnv

from helpers.naive_sampler import ElementwisePolicy

pytestmark = [pytest.mark.metaworld, pytest.mark.mujoco_version,
              pytest.mark.skipif(mujoco_batch is None, reason="the Meta-World fast path needs mujoco.batch")]


class ScriptedPolicy(torch.nn.Module):
    """Meta-World's scripted policy for one class as the mean of a narrow Gaussian (episodes that succeed)."""

    supports_batched_params = False

    def __init__(self, name: str):
        super().__init__()
        self.script = ENV_POLICY_MAP[name]()
        self.log_scale = torch.nn.Parameter(torch.full((4,), -2.0))

    def forward(self, observations, params=None):
        rows = observations.detach().reshape(-1, 39).double().numpy()
        loc = torch.as_tensor(np.stack([self.script.get_action(row) for row in rows]), dtype=torch.float32)
        loc = loc.reshape(*observations.shape[:-1], 4)
        return Independent(Normal(loc, self.log_scale.exp().expand_as(loc)), 1)


def sample(env_id, policy, *, fast, calls=2, tasks=3, batch_size=2, steps=30, trials=None, batched=None, **kwargs):
    """Each call's batches. In this process (``num_workers=0``) with ``fast``, ``batched`` says whether the
    last call stepped some class's slots as one batch (so a case cannot pass without the batches)."""
    env_fn = make_env(env_id, max_episode_steps=steps)
    out = []
    with MultiTaskSampler(None, None, batch_size, policy, None, env_fn=env_fn, seed=7, mujoco_batch=fast,
                          **kwargs) as sampler:
        assert sampler.mujoco_batch is fast
        for _ in range(calls):
            chosen = sampler.sample_tasks(tasks)
            if trials is None:
                out.append(sampler.rollout(chosen))
            else:
                out.append(sampler.rollout_trials(chosen, trials))
        if sampler.num_workers == 0:
            assert isinstance(sampler.rollout_backend.pool.child, StepperChildEnv) is fast
            if fast and batched is not None:
                assert bool(sampler_groups(sampler)) is batched, sampler_groups(sampler)
    return out


def assert_same(fast, slow):
    successes = 0
    for fast_call, slow_call in zip(fast, slow, strict=True):
        for got, want in zip(fast_call, slow_call, strict=True):
            for name in ("observations", "actions", "rewards", "lengths"):
                assert torch.equal(getattr(got, name), getattr(want, name)), name
            assert torch.equal(got.infos["success"], want.infos["success"])
            successes += int(got.success().sum())
    return successes


@pytest.mark.parametrize("env_id, steps, tasks, batch_size, num_workers, partial", [
    ("MetaWorld-ML10-v3", 30, 6, 3, 0, False),             # batched groups and single slots in one call
    ("MetaWorld-ML1-pick-place-v3", 1, 1, 3, 0, False),    # horizon 1, one batched group
    ("MetaWorld-ML1-pick-place-v3", 1, 1, 1, 0, False),    # one task, one episode, horizon 1
    pytest.param("MetaWorld-ML10-v3", 40, 8, 3, 2, True, marks=pytest.mark.slow),
    pytest.param("MetaWorld-ML1-reach-v3", 60, 4, 5, 2, False, marks=pytest.mark.slow),
], ids=["ml10-in-process", "horizon-1", "one-episode-horizon-1", "ml10-2-workers-partial", "ml1-reach-2-workers"])
def test_episodes_equal_the_per_env_path(env_id, steps, tasks, batch_size, num_workers, partial):
    policy = ElementwisePolicy(4, discrete=False)
    kwargs = dict(steps=steps, tasks=tasks, batch_size=batch_size, num_workers=num_workers, partial=partial)
    batched = batch_size >= MIN_GROUP if num_workers == 0 else None
    assert_same(sample(env_id, policy, fast=True, batched=batched, **kwargs),
                sample(env_id, policy, fast=False, **kwargs))


def test_episodes_that_succeed_equal_the_per_env_path(monkeypatch):
    """ML1 push under Meta-World's scripted policy: successes, and the gripping steps whose rewards the batch
    hands to each env's own code. The goal is made visible in the observations (the script steers to it)."""

    def visible(env_name, rand_vec):
        data = {"rand_vec": np.array(rand_vec), "env_cls": metaworld.env_dict.ALL_V3_ENVIRONMENTS[env_name],
                "partially_observable": False}
        return metaworld.Task(env_name=env_name, data=pickle.dumps(data))

    monkeypatch.setattr(metaworld_env, "_metaworld_task", visible)  # in this process: num_workers=0
    policy = ScriptedPolicy("push-v3")
    kwargs = dict(steps=120, tasks=2, batch_size=2, num_workers=0, calls=1)
    successes = assert_same(sample("MetaWorld-ML1-push-v3", policy, fast=True, batched=True, **kwargs),
                            sample("MetaWorld-ML1-push-v3", policy, fast=False, **kwargs))
    assert successes > 0


@pytest.mark.slow
def test_trials_across_metaworlds_own_truncation_equal_the_per_env_path():
    """No TimeLimit: Meta-World truncates at 500 steps itself, and the trial's second episode starts from
    the env's own reset after 500 batched steps."""
    policy = ElementwisePolicy(4, discrete=False)
    kwargs = dict(steps=None, tasks=3, batch_size=1, num_workers=0, calls=1, trials=2)
    fast = sample("MetaWorld-ML1-reach-v3", policy, fast=True, batched=True, **kwargs)
    slow = sample("MetaWorld-ML1-reach-v3", policy, fast=False, **kwargs)
    for got, want in zip(fast[0], slow[0], strict=True):
        assert got.observations.shape[0] == 1000
        assert torch.equal(got.observations, want.observations) and torch.equal(got.rewards, want.rewards)
        assert torch.equal(got.infos["success"], want.infos["success"])


def envs_with_tasks(name, count, indices):
    envs = [MetaWorldEnv("ML1", name) for _ in range(count)]
    tasks = envs[0].all_tasks()
    for env, index in zip(envs, indices):
        env.reset_task(tasks[index])
    return envs


def test_a_group_stepped_in_part_steps_those_envs_alone():
    """Steps where only some of a class's envs run (partial sampling) go env by env, and the batch then goes
    on from their states: every env equals a copy stepped through its own step all along."""
    ours, theirs = envs_with_tasks("push-v3", 3, [0, 1, 2]), envs_with_tasks("push-v3", 3, [0, 1, 2])
    stepper = MetaWorldStepper(ours)
    stepper.assign(3)
    assert [rows.tolist() for rows, _ in stepper.groups] == [[0, 1, 2]]
    for i in range(3):
        stepper.before_reset(i)
        np.testing.assert_array_equal(ours[i].reset()[0], theirs[i].reset()[0])
        stepper.after_reset(i)
    rng = np.random.default_rng(0)
    for t in range(12):
        rows = np.array([0, 2]) if 4 <= t < 8 else np.arange(3)
        actions = rng.uniform(-1, 1, (len(rows), 4)).astype(np.float32)
        observations, rewards, _, truncated, infos = stepper.step(rows, actions, ("success", "near_object"))
        for k, i in enumerate(rows):
            expected, reward, _, cut, info = theirs[i].step(actions[k])
            assert observations[k].tobytes() == expected.tobytes() and rewards[k] == reward
            assert truncated[k] == cut and infos[k].tolist() == [info["success"], info["near_object"]]
    with pytest.raises(ValueError, match="no 'score'.*its keys"):
        stepper.step(np.arange(3), np.zeros((3, 4), np.float32), ("score",))


def test_groups_follow_the_classes_and_a_group_of_the_same_envs_keeps_its_batch(monkeypatch):
    # Every Meta-World class is batched: hammer stands for a class that is not (a later one of Meta-World's).
    monkeypatch.delitem(SPECS, "SawyerHammerEnvV3")
    envs = [MetaWorldEnv("ML1", "reach-v3"), MetaWorldEnv("ML1", "hammer-v3"), MetaWorldEnv("ML1", "reach-v3"),
            MetaWorldEnv("ML10")]
    tasks = {task["env_name"]: task for task in envs[3].all_tasks()}
    for env in envs[:3]:
        env.reset_task(env.all_tasks()[0])
    envs[3].reset_task(tasks["push-v3"])
    stepper = MetaWorldStepper(envs, min_group=1)
    stepper.assign(4)
    groups = {type(sawyer.envs[0]).__name__: rows.tolist() for rows, sawyer in stepper.groups}
    assert groups == {"SawyerReachEnvV3": [0, 2], "SawyerPushEnvV3": [3]}  # hammer: not batched, alone
    for i in range(4):
        stepper.before_reset(i)
        envs[i].reset()
        stepper.after_reset(i)
    batches = [sawyer for _, sawyer in stepper.groups]
    stepper.step(np.arange(4), np.zeros((4, 4), np.float32), ())
    stepper.release()
    stepper.assign(4)
    assert [sawyer for _, sawyer in stepper.groups] == batches and all(isinstance(b, BatchedSawyer) for b in batches)
    stepper.release()
    envs[3].reset_task(tasks["reach-v3"])
    stepper.assign(4)
    assert [rows.tolist() for rows, _ in stepper.groups] == [[0, 2, 3]]


def test_misuse_of_the_stepper_is_refused():
    """Rows out of the contract (unsorted, repeated, beyond the last assign's count, before any assign) and a
    wrong number of actions get a clear error before any env steps."""
    envs = envs_with_tasks("reach-v3", 3, [0, 1, 2])
    stepper = MetaWorldStepper(envs)
    actions = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match="call assign before stepping"):
        stepper.step(np.array([0, 1]), actions, ("success",))  # no assign yet: count 0
    stepper.assign(3)
    for i in range(3):
        stepper.before_reset(i)
        envs[i].reset()
        stepper.after_reset(i)
    lengths = [env._env.curr_path_length for env in envs]
    for rows in ([1, 0], [1, 1], [2, 3], [-1, 0]):
        with pytest.raises(ValueError, match="not sorted, distinct rows below 3"):
            stepper.step(np.array(rows), actions, ("success",))
    with pytest.raises(ValueError, match="3 actions for 2 rows"):
        stepper.step(np.array([0, 2]), np.zeros((3, 4), np.float32), ("success",))
    assert [env._env.curr_path_length for env in envs] == lengths  # nothing stepped
    stepper.step(np.array([0, 2]), actions, ("success",))
    stepper.step(np.array([], dtype=np.intp), np.zeros((0, 4), np.float32), ("success",))  # no row: no step


def test_classes_with_few_slots_step_one_env_at_a_time():
    envs = envs_with_tasks("reach-v3", 3, [0, 1, 2])
    stepper = MetaWorldStepper(envs)
    stepper.assign(2)  # two reach slots: fewer than MIN_GROUP
    assert MIN_GROUP == 3 and stepper.groups == []
    stepper.assign(3)
    assert [rows.tolist() for rows, _ in stepper.groups] == [[0, 1, 2]]


def sampler_groups(sampler):
    """The class groups of the in-process sampler's stepper: {class name: rows}."""
    stepper = sampler.rollout_backend.pool.child.stepper
    return {type(sawyer.envs[0]).__name__: rows.tolist() for rows, sawyer in stepper.groups}


def test_ml1_steps_in_this_process_and_ml10_in_worker_processes_by_default():
    policy = ElementwisePolicy(4, discrete=False)
    processes = usable_cpus() if usable_cpus() > 1 else 0  # one CPU: this process, whatever the env
    for env_id, workers in (("MetaWorld-ML1-push-v3", 0), ("MetaWorld-ML10-v3", processes)):
        with MultiTaskSampler(None, None, 1, policy, None, env_fn=make_env(env_id, max_episode_steps=5)) as sampler:
            assert sampler.mujoco_batch and sampler.num_workers == workers, env_id


@pytest.mark.parametrize("kwargs, reason", [({"fast": False}, "fast=False steps Meta-World's own classes"),
                                            ({"reward_function_version": "v1"}, "only the v2 rewards")])
def test_the_fast_path_says_why_it_cannot_step(kwargs, reason):
    env_fn = make_env("MetaWorld-ML1-reach-v3", max_episode_steps=5, **kwargs)
    policy = ElementwisePolicy(4, discrete=False)
    with pytest.raises(ValueError, match=f"mujoco_batch=True, but the fast path cannot step .*{reason}"):
        MultiTaskSampler(None, None, 1, policy, None, env_fn=env_fn, mujoco_batch=True, num_workers=0)
    with MultiTaskSampler(None, None, 1, policy, None, env_fn=env_fn, num_workers=0) as sampler:
        assert sampler.mujoco_batch is False
