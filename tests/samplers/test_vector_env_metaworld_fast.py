"""MultiTaskVectorEnv on Meta-World's benchmarks through the envs' own stepper (each task class's envs of a
worker as one BatchedSawyer) against gymnasium's SyncVectorEnv over the same env functions: the same
observations, rewards, flags and infos (bool, int and float values, each class's order of keys), bit for bit,
in every autoreset mode, in this process and in worker processes, with calls between steps (which unbind the
envs until each is reset) and Meta-World's own 500-step truncation."""

import os
import warnings

import numpy as np
import pytest

if os.environ.get("MAML_RL_REQUIRE_METAWORLD"):
    import metaworld  # noqa: F401  (CI installs the extra: a missing Meta-World fails here instead of skipping)
else:
    pytest.importorskip("metaworld")
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from maml_rl.envs import make_env
from maml_rl.envs.metaworld_fast.batched import mujoco_batch
from maml_rl.samplers import MultiTaskVectorEnv
from maml_rl.samplers.workers.processes import usable_cpus

from helpers.vector_envs import assert_same

pytestmark = [pytest.mark.metaworld, pytest.mark.processes,
              pytest.mark.skipif(mujoco_batch is None, reason="batched stepping needs mujoco.batch (MuJoCo >= 4)")]


def mixed(tasks, num_envs):
    """``num_envs`` of ``tasks``, shuffled: 4 of each of the three classes drawn most, then one of each other."""
    by_class = {}
    for task in tasks:
        by_class.setdefault(task["env_name"], []).append(task)
    names = sorted(by_class, key=lambda name: -len(by_class[name]))
    chosen = [task for name in names[:3] for task in by_class[name][:4]]
    chosen += [by_class[name][0] for name in names[3:3 + num_envs - len(chosen)]]
    assert len(chosen) == num_envs
    return [chosen[i] for i in np.random.default_rng(0).permutation(num_envs)]


def drive(env_id, num_envs, mode, *, steps, num_workers=0, max_episode_steps=None, call_at=(), seed=3, mix=False,
          scripted=False):
    """Both vector envs side by side, the tasks from ``reset_tasks`` (with ``mix``, a mix of classes:
    :func:`mixed`); ``call("get_task")`` after each step in ``call_at``; with ``scripted``, Meta-World's scripted
    policy acts (its episodes succeed), else random actions. Returns the episodes ended and, in this process, the
    sizes of the class groups the stepper held."""
    env_fn = make_env(env_id, max_episode_steps=max_episode_steps)
    ours = MultiTaskVectorEnv([env_fn] * num_envs, num_workers=num_workers, start_method="fork",
                              autoreset_mode=mode, mujoco_batch=True)
    reference = SyncVectorEnv([env_fn] * num_envs, autoreset_mode=mode)
    ended, groups = 0, set()
    try:
        assert ours.mujoco_batch
        tasks = ours.sample_tasks(num_envs, seed=seed) if not mix else mixed(ours.sample_tasks(30 * num_envs, seed=seed),
                                                                              num_envs)
        ours.reset_tasks(tasks)
        for env, task in zip(reference.envs, tasks):
            env.unwrapped.reset_task(task)
        observations, info = reference.reset(seed=seed)
        assert_same(ours.reset(seed=seed), (observations, info), "reset")
        space = reference.action_space
        space.seed(seed)
        done = np.zeros(num_envs, dtype=bool)
        for t in range(steps):
            if mode is AutoresetMode.DISABLED and done.any():
                seeds = [seed + 100 * (t + 1) + i for i in range(num_envs)]
                options = {"reset_mask": done.copy()}
                assert_same(ours.reset(seed=seeds, options=dict(options)), reference.reset(seed=seeds, options=options),
                            f"reset with a mask before step {t}")
            if num_workers == 0:
                groups |= {len(rows) for rows, _ in ours.env_pool.child.stepper.groups}
            actions = space.sample() if not scripted else scripted_actions(reference, observations)
            expected = reference.step(actions)
            observations = expected[0]
            assert_same(ours.step(actions), expected, f"step {t}")
            done = expected[2] | expected[3]
            ended += int(done.sum())
            if t in call_at:
                assert_same(ours.call("get_task"), reference.call("get_task"), f"get_task after step {t}")
    finally:
        ours.close()
        reference.close()
    return ended, groups


def scripted_actions(reference, observations):
    """Meta-World's scripted policy's action for each env of ``reference`` (a SyncVectorEnv)."""
    from metaworld.policies import ENV_POLICY_MAP

    actions = []
    for env, observation in zip(reference.envs, observations):
        observation = observation.copy()
        observation[-3:] = env.unwrapped._env._get_pos_goal()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actions.append(ENV_POLICY_MAP[env.unwrapped._task["env_name"]]().get_action(observation))
    return np.asarray(actions, dtype=np.float32)


# Every autoreset mode in this process; in two workers (the same code on each worker's envs), one mode.
ML1_CASES = [*(pytest.param(mode, 0, id=f"{mode.value}-in process") for mode in AutoresetMode),
             pytest.param(AutoresetMode.NEXT_STEP, 2, marks=pytest.mark.slow, id="NextStep-2 workers")]


@pytest.mark.parametrize(("mode", "num_workers"), ML1_CASES)
def test_ml1_as_sync_vector_env(mode, num_workers):
    """Four push envs, one batch (or two of two in two workers, which step one at a time: stepper.MIN_GROUP);
    a 7-step time limit ends every episode thrice; a call after step 9 unbinds the envs, which step one at a time
    until each has been reset, then as one batch again."""
    ended, groups = drive("MetaWorld-ML1-push-v3", 4, mode, steps=24, num_workers=num_workers, max_episode_steps=7,
                          call_at=(9,))
    assert ended == 12
    if num_workers == 0:
        assert groups == {4}


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
# ML45's task lists are built once per process: with test_metaworld.py's ML45 test, on one xdist worker.
@pytest.mark.parametrize("env_id", ["MetaWorld-ML10-v3", pytest.param("MetaWorld-ML45-v3",
                                                                      marks=pytest.mark.xdist_group("metaworld-ML45"))])
def test_a_mix_of_classes_as_sync_vector_env(env_id, mode):
    """16 envs of a mix in this process: three classes of 4 envs step as batches, the rest one at a time, and
    the infos keep each class's keys, order and types (door-open's bool and int, sweep's and door-close's order)."""
    ended, groups = drive(env_id, 16, mode, steps=14, max_episode_steps=6, call_at=(4,), mix=True)
    assert ended == 32 and groups == {4}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["door-open-v3", "sweep-v3", "door-close-v3", "drawer-close-v3", "faucet-open-v3",
                                  "assembly-v3"])
def test_each_classes_info_keys_order_and_types(name):
    """gymnasium's vector infos take their keys' order and their arrays' types from the first env: door-open's
    grasp_success is a bool and its obj_to_target an int, sweep and door-close order their keys otherwise,
    drawer-close's grasp_reward is a float32 where the gripper action is in (0, 1], door-close's and
    faucet-open's unscaled_reward the int 10 where they succeed, assembly's grasp_success a NumPy bool where it
    grips (an object array). Meta-World's scripted policy acts, so the episodes succeed."""
    ended, groups = drive(f"MetaWorld-ML1-{name}", 3, AutoresetMode.SAME_STEP, steps=300, max_episode_steps=150,
                          scripted=True)
    assert ended == 6 and groups == {3}


@pytest.mark.slow
def test_metaworlds_own_truncation_at_500_steps():
    """No time limit of ours: Meta-World's max_path_length ends the episode at step 500, and the next step resets."""
    ended, groups = drive("MetaWorld-ML1-reach-v3", 3, AutoresetMode.NEXT_STEP, steps=503)
    assert ended == 3 and groups == {3}


def test_the_fast_path_is_taken_where_it_can_be_and_refused_where_asked_for_and_impossible():
    """Meta-World's envs take it by default, ML1's in this process (one class, one batch), the mixes' in a worker
    process per CPU (as the sampler: metaworld.MetaWorldEnv.batch_in_process); fast=False is refused by name."""
    cpus = usable_cpus()
    for env_id, workers in (("MetaWorld-ML1-reach-v3", 0), ("MetaWorld-ML10-v3", 0 if cpus == 1 else min(cpus, 3))):
        envs = MultiTaskVectorEnv([make_env(env_id)] * 3, start_method="fork")
        try:
            assert envs.mujoco_batch and envs.num_workers == workers
        finally:
            envs.close()
    slow = make_env("MetaWorld-ML1-reach-v3", fast=False)
    envs = MultiTaskVectorEnv([slow] * 2, num_workers=0)
    try:
        assert not envs.mujoco_batch
    finally:
        envs.close()
    with pytest.raises(ValueError, match="mujoco_batch=True, but the fast path cannot step these envs: fast=False "
                                         "steps Meta-World's own classes"):
        MultiTaskVectorEnv([slow] * 2, num_workers=0, mujoco_batch=True)
