"""Per-step info values carried into the episodes (``info_keys``), and episode success.

The values themselves are checked bit for bit against the naive reference in
test_sampler_differential.py (its envs declare ``info_keys``); here: the
choice of keys, misuse, the MuJoCo fast path, and ``BatchEpisodes.success``
on hand-made episodes.
"""

import pytest
import torch

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler, WorkerError

from helpers.episodes import zero_episodes

pytestmark = pytest.mark.mujoco_version


def test_the_env_declares_the_default_keys_and_the_caller_may_choose(drift_sampler):
    with drift_sampler(False, 5, 2, seed=3, num_workers=0) as sampler:
        assert sampler.info_keys == ("near", "x")
        (batch,) = sampler.rollout(sampler.sample_tasks(1))
        assert list(batch.infos) == ["near", "x"]
    with drift_sampler(False, 5, 2, seed=3, num_workers=0, info_keys=["x"]) as sampler:
        (only_x,) = sampler.rollout(sampler.sample_tasks(1))
        assert list(only_x.infos) == ["x"] and torch.equal(only_x.infos["x"], batch.infos["x"])
    with drift_sampler(False, 5, 2, seed=3, num_workers=0, info_keys=()) as sampler:
        (none,) = sampler.rollout(sampler.sample_tasks(1))
        assert none.infos == {}
        assert torch.equal(none.observations, batch.observations)
    # Past an episode's end the values are zero, as everything else is.
    lengths = batch.lengths.tolist()
    for b, n in enumerate(lengths):
        assert torch.all(batch.infos["x"][n:, b] == 0)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_key_the_env_does_not_provide_is_a_worker_error_naming_it(num_workers, drift_sampler):
    with drift_sampler(False, 5, 2, seed=3, num_workers=num_workers, info_keys=("near", "goal_reached")) as sampler:
        with pytest.raises(WorkerError, match=r"info\['goal_reached'\].*info_keys=\('near', 'goal_reached'\).*"
                                              r"\['near', 'note', 'x'\]"):
            sampler.rollout(sampler.sample_tasks(2))


def test_a_value_that_is_not_a_number_is_a_worker_error(drift_sampler):
    with drift_sampler(False, 5, 2, seed=3, num_workers=0, info_keys=("note",)) as sampler:
        with pytest.raises(WorkerError, match=r"info\['note'\] = 'not carried'.*a number \(or bool\)"):
            sampler.rollout(sampler.sample_tasks(1))


@pytest.mark.parametrize("keys", ["near", ("near", "near"), (1,)])
def test_malformed_info_keys_are_refused(keys, drift_sampler):
    with pytest.raises(ValueError, match="info_keys"):
        drift_sampler(False, 5, 2, seed=3, num_workers=0, info_keys=keys)


def test_info_keys_step_mujoco_envs_one_at_a_time():
    """The fast path computes no info: asking for keys takes the per-env path (or refuses mujoco_batch=True)."""
    policy = NormalMLPPolicy(20, 6, hidden_sizes=(8,))
    kwargs = dict(env_kwargs={}, batch_size=2, policy=policy, seed=0, num_workers=0, max_episode_steps=4)
    # The default (the fast path where MuJoCo has mujoco.batch) gives the same episodes, without the info.
    with MultiTaskSampler("HalfCheetahVel-v5", **kwargs) as sampler:
        assert sampler.info_keys == ()
        default = sampler.rollout(sampler.sample_tasks(2))
    with MultiTaskSampler("HalfCheetahVel-v5", **kwargs, info_keys=("forward_velocity",)) as sampler:
        assert not sampler.mujoco_batch
        carried = sampler.rollout(sampler.sample_tasks(2))
    for a, b in zip(default, carried):
        assert torch.equal(a.observations, b.observations)
        assert a.infos == {} and b.infos["forward_velocity"].abs().sum() > 0
    with pytest.raises(ValueError, match="computes no step info"):
        MultiTaskSampler("HalfCheetahVel-v5", **kwargs, info_keys=("forward_velocity",), mujoco_batch=True)


def hand_batch(success_rows, lengths):
    return zero_episodes(lengths, len(success_rows), infos={"success": torch.tensor(success_rows, dtype=torch.float64)})


def test_success_is_any_step_of_the_episode_by_hand():
    batch = hand_batch([[0, 1, 0, 0],
                        [0, 0, 0, 1],
                        [1, 0, 1, 0]], [3, 3, 1, 2])
    # Episode 0: at step 2. Episode 1: at step 0. Episode 2: only at step 2, past its end (length 1).
    # Episode 3: at step 1, within its length 2.
    assert batch.success().tolist() == [True, True, False, True]


def test_success_of_one_step_episodes_and_of_none():
    assert hand_batch([[1, 0]], [1, 1]).success().tolist() == [True, False]
    assert hand_batch([[0]], [1]).success().tolist() == [False]


def test_success_without_the_key_says_how_to_carry_it():
    batch = zero_episodes([2], 2)
    with pytest.raises(KeyError, match=r"info_keys=\('success',\)"):
        batch.success()


def test_infos_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match=r"infos\['success'\] must be \[T, B\]"):
        zero_episodes([2], 2, infos={"success": torch.zeros(3, 1)})
