"""BatchEpisodes: masks, returns, GAE advantages and stacking, checked by hand."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pytest
import torch

from maml_rl.data.episodes import BatchEpisodes, TaskBatch, loss_weights, stack_episodes
from maml_rl.utils.torch_utils import discounted_cumsum, length_mask, mean_weights, weighted_normalize

from helpers.episodes import zero_episodes


def weighted_mean(
    tensor: torch.Tensor,
    lengths: torch.Tensor | Sequence[int] | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-episode mean over the (leading) time axis, ignoring padded steps.

    Without ``lengths`` and ``mask`` this is the plain mean of the whole tensor.

    :param tensor: time-major tensor ``[T, *S, ...]``.
    :param lengths: episode lengths ``[*S]``; builds the mask when ``mask`` is not given.
    :param mask: validity mask ``[T, *S]``; derived from ``lengths`` when omitted.
    :return: per-episode means ``[*S, ...]``.
    """
    if lengths is None and mask is None:
        return tensor.mean()
    if tensor.dim() < 2:
        raise ValueError(
            f"weighted_mean expects a time-major tensor with at least 2 dimensions, got shape {tuple(tensor.shape)}"
        )
    if lengths is not None:
        lengths = torch.as_tensor(lengths, device=tensor.device)
    if mask is None:
        mask = length_mask(lengths, tensor.shape[0], dtype=tensor.dtype)
    if lengths is None:
        counts = mask.sum(0)
    else:
        counts = lengths.to(tensor.dtype)
    extra = tensor.dim() - mask.dim()
    mask = mask.view(*mask.shape, *([1] * extra))
    counts = counts.view(*counts.shape, *([1] * extra))
    return (tensor * mask).sum(0) / counts


def hand_episodes(**kwargs) -> BatchEpisodes:
    """T=3, B=2: episode 0 lasts 3 steps (rewards 1, 3, 5), episode 1 lasts 2 (rewards 2, 4)."""
    observations = torch.arange(12, dtype=torch.float32).view(3, 2, 2)
    observations[2, 1] = 0.0
    actions = torch.ones(3, 2, 1)
    actions[2, 1] = 0.0
    rewards = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]])
    return BatchEpisodes(observations, actions, rewards, torch.tensor([3, 2]), gamma=0.5, **kwargs)


class ConstantBaseline:
    """Value 1 for every step of episode 0 and 2 for episode 1."""

    def __call__(self, episodes: BatchEpisodes) -> torch.Tensor:
        return torch.tensor([[1.0, 2.0]]).expand(len(episodes), 2)


def test_shapes_and_mask():
    episodes = hand_episodes(task={"velocity": 1.0})
    assert len(episodes) == 3
    assert episodes.batch_size == 2
    assert episodes.observation_shape == (2,)
    assert episodes.action_shape == (1,)
    assert episodes.task == {"velocity": 1.0}
    assert episodes.gamma == 0.5
    assert episodes.mask.dtype == torch.float32
    assert torch.equal(episodes.mask, torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]]))


def test_returns_and_total_rewards_by_hand():
    episodes = hand_episodes()
    # Episode 0: 5; 3 + 0.5 * 5 = 5.5; 1 + 0.5 * 5.5 = 3.75. Episode 1: 4; 2 + 0.5 * 4 = 4.
    expected = torch.tensor([[3.75, 4.0], [5.5, 4.0], [5.0, 0.0]])
    torch.testing.assert_close(episodes.returns, expected)
    torch.testing.assert_close(episodes.total_rewards, torch.tensor([9.0, 6.0]))


def test_rewards_past_the_end_are_ignored():
    episodes = hand_episodes()
    episodes.rewards[2, 1] = 100.0  # garbage after the end of episode 1
    torch.testing.assert_close(episodes.returns[:, 1], torch.tensor([4.0, 4.0, 0.0]))
    torch.testing.assert_close(episodes.total_rewards, torch.tensor([9.0, 6.0]))


def test_gae_advantages_by_hand():
    episodes = hand_episodes()
    advantages = episodes.compute_advantages(ConstantBaseline(), gae_lambda=0.5, normalize=False)
    # Episode 0: values 1, 1, 1 then 0: deltas 0.5, 2.5, 4; gamma * lambda = 0.25.
    # Episode 1: values 2, 2 then 0: deltas 1, 2.
    expected = torch.tensor([[0.5 + 0.25 * 3.5, 1.0 + 0.25 * 2.0], [2.5 + 0.25 * 4.0, 2.0], [4.0, 0.0]])
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(episodes.advantages, expected)


def test_gae_lambda_one_is_returns_minus_values():
    episodes = hand_episodes()
    advantages = episodes.compute_advantages(ConstantBaseline(), gae_lambda=1.0, normalize=False)
    values = torch.tensor([[1.0, 2.0], [1.0, 2.0], [1.0, 0.0]])
    torch.testing.assert_close(advantages, (episodes.returns - values) * episodes.mask)


def test_normalized_advantages_by_hand():
    episodes = hand_episodes()
    advantages = episodes.compute_advantages(ConstantBaseline(), gae_lambda=0.5, normalize=True)
    raw0, raw1 = [1.375, 3.5, 4.0], [1.5, 2.0]
    # Each valid step weighs the same: mean and variance over the 5 steps.
    mean = sum(raw0 + raw1) / 5
    var = sum((a - mean) ** 2 for a in raw0 + raw1) / 5
    std = math.sqrt(var) + 1e-8
    expected = torch.tensor(
        [[(raw0[0] - mean) / std, (raw1[0] - mean) / std], [(raw0[1] - mean) / std, (raw1[1] - mean) / std],
         [(raw0[2] - mean) / std, 0.0]]
    )
    torch.testing.assert_close(advantages, expected)


def test_advantages_before_compute_raise():
    episodes = hand_episodes()
    with pytest.raises(RuntimeError, match="compute_advantages"):
        episodes.advantages


def test_numpy_inputs_and_dtypes():
    observations = np.zeros((4, 3, 5), dtype=np.float32)
    actions = np.zeros((4, 3), dtype=np.int32)
    rewards = np.ones((4, 3), dtype=np.float64)
    episodes = BatchEpisodes(observations, actions, rewards, np.array([4, 2, 1]))
    assert episodes.observations.dtype == torch.float32
    assert episodes.actions.dtype == torch.int64
    assert episodes.rewards.dtype == torch.float32
    assert episodes.lengths.dtype == torch.int64
    assert episodes.action_shape == ()
    # float32 numpy observations are shared, not copied.
    observations[0, 0, 0] = 7.0
    assert episodes.observations[0, 0, 0] == 7.0
    torch.testing.assert_close(episodes.total_rewards, torch.tensor([4.0, 2.0, 1.0]))


def test_horizon_longer_than_every_episode():
    episodes = zero_episodes([2, 3], 6, rewards=torch.ones(6, 2), gamma=1.0)
    torch.testing.assert_close(episodes.returns[:, 0], torch.tensor([2.0, 1.0, 0, 0, 0, 0]))
    torch.testing.assert_close(episodes.returns[:, 1], torch.tensor([3.0, 2.0, 1.0, 0, 0, 0]))


@pytest.mark.parametrize(
    "lengths, match", [([0, 3], "lengths"), ([3, 4], "lengths"), ([3], "lengths must be")]
)
def test_invalid_lengths(lengths, match):
    with pytest.raises(ValueError, match=match):
        BatchEpisodes(torch.zeros(3, 2, 1), torch.zeros(3, 2, 1), torch.zeros(3, 2), lengths)


def test_mismatched_shapes():
    with pytest.raises(ValueError, match="observations"):
        BatchEpisodes(torch.zeros(3, 4, 1), torch.zeros(3, 2, 1), torch.zeros(3, 2), [1, 1])


def test_to_device_keeps_everything():
    episodes = hand_episodes()
    episodes.compute_advantages(ConstantBaseline(), normalize=False)
    moved = episodes.to("cpu")
    assert moved is episodes
    assert moved.device == torch.device("cpu")
    assert moved.advantages.device.type == "cpu"


def test_stack_episodes_pads_time():
    short = BatchEpisodes(torch.ones(2, 2, 3), torch.ones(2, 2, 1), torch.ones(2, 2), [2, 1])
    rewards = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]])
    long = BatchEpisodes(torch.ones(3, 2, 3), torch.ones(3, 2, 1), rewards, [3, 2], gamma=0.5)
    for episodes in (short, long):
        episodes.compute_advantages(ConstantBaseline(), normalize=False)
    stacked = stack_episodes([short, long])
    assert stacked["observations"].shape == (3, 2, 2, 3)
    assert stacked["actions"].shape == (3, 2, 2, 1)
    for key in ("rewards", "mask", "returns", "advantages"):
        assert stacked[key].shape == (3, 2, 2), key
    assert torch.equal(stacked["lengths"], torch.tensor([[2, 1], [3, 2]]))
    assert torch.equal(stacked["mask"][:, 0], torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]))
    torch.testing.assert_close(stacked["returns"][:, 1], long.returns)


def test_stack_episodes_without_advantages_and_batch_mismatch():
    a = hand_episodes()
    assert "advantages" not in stack_episodes([a])
    b = zero_episodes([3], 3, observation_size=2)
    with pytest.raises(ValueError, match="same number of episodes"):
        stack_episodes([a, b])


def test_task_batch_weights_give_step_means():
    a, b = hand_episodes(), hand_episodes()
    for episodes in (a, b):
        episodes.compute_advantages(ConstantBaseline(), normalize=False)
    batch = TaskBatch.from_episodes([a, b])
    assert batch.observations.shape == (2, 6, 2)
    assert batch.num_tasks == 2
    per_task = (batch.advantages * batch.weights).sum(-1)
    # Episodes of 3 and 2 steps: the mean over the 5 valid steps, not the mean of the two episodes' means.
    valid = [a.advantages[t, i].item() for i, length in enumerate((3, 2)) for t in range(length)]
    expected = torch.tensor(sum(valid) / 5)
    assert not torch.isclose(expected, weighted_mean(a.advantages, lengths=a.lengths).mean())
    torch.testing.assert_close(per_task, expected.repeat(2))


def test_weighted_mean_and_normalize():
    x = torch.tensor([[1.0, 4.0], [3.0, 8.0], [5.0, 100.0]])
    lengths = torch.tensor([3, 2])
    torch.testing.assert_close(weighted_mean(x, lengths=lengths), torch.tensor([3.0, 6.0]))
    assert weighted_mean(x).item() == pytest.approx(x.mean().item())
    out = weighted_normalize(x, lengths=lengths)
    assert out[2, 1] == 0.0
    torch.testing.assert_close(weighted_mean(out, lengths=lengths).mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    torch.testing.assert_close(weighted_mean(out**2, lengths=lengths).mean(), torch.tensor(1.0))
    # Per step: the 5 valid entries have mean 0 and variance 1; the per-episode moments do not.
    out = weighted_normalize(x, lengths=lengths, per_step=True)
    valid = out[length_mask(lengths, 3).bool()]
    assert out[2, 1] == 0.0 and valid.numel() == 5
    torch.testing.assert_close(valid.mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    torch.testing.assert_close((valid**2).mean(), torch.tensor(1.0))
    assert abs(weighted_mean(out, lengths=lengths).mean().item()) > 0.1


def test_mean_weights_by_hand():
    # Two tasks (axis 1) of two episodes (axis 2), lengths 3 and 1, then 2 and 2.
    lengths = torch.tensor([[3, 1], [2, 2]])
    mask = length_mask(lengths, 3)
    x = torch.arange(12.0).view(3, 2, 2)
    per_step = mean_weights(mask, lengths, per_step=True, dim=(0, -1))
    per_episode = mean_weights(mask, lengths, dim=(0, -1))
    torch.testing.assert_close((x * per_step).sum((0, -1)), torch.tensor([(0 + 4 + 8 + 1) / 4, (2 + 6 + 3 + 7) / 4]))
    torch.testing.assert_close(
        (x * per_episode).sum((0, -1)), torch.tensor([((0 + 4 + 8) / 3 + 1) / 2, ((2 + 6) / 2 + (3 + 7) / 2) / 2])
    )
    # Over every axis (the default): one mean over the whole batch; padded steps weigh nothing.
    assert mean_weights(mask, lengths).sum().item() == pytest.approx(1.0)
    assert mean_weights(mask, per_step=True)[mask == 0].abs().sum() == 0
    with pytest.raises(ValueError, match="time axis"):
        mean_weights(mask, dim=-1)


@pytest.mark.parametrize("horizon", [5, 1100])
def test_discounted_cumsum_matches_a_loop(horizon):
    x = torch.randn(horizon, 3, dtype=torch.float64)
    expected = torch.zeros_like(x)
    running = torch.zeros(3, dtype=torch.float64)
    for t in range(horizon - 1, -1, -1):
        running = x[t] + 0.9 * running
        expected[t] = running
    torch.testing.assert_close(discounted_cumsum(x, 0.9), expected)


def test_task_batch_weights_give_episode_means_when_asked():
    a, b = hand_episodes(), hand_episodes()
    for episodes in (a, b):
        episodes.compute_advantages(ConstantBaseline(), normalize=False)
    batch = TaskBatch.from_episodes([a, b], averaging="episode")
    per_task = (batch.advantages * batch.weights).sum(-1)
    # pytorch-maml-rl's loss: the mean of the two episodes' own means.
    episode_means = [sum(a.advantages[t, i].item() for t in range(length)) / length for i, length in enumerate((3, 2))]
    torch.testing.assert_close(per_task, torch.tensor(sum(episode_means) / 2).repeat(2))
    # One task's weights (what reinforce_loss uses) are the same.
    torch.testing.assert_close(loss_weights(a.mask, a.lengths, "episode").reshape(-1), batch.weights[0])
    with pytest.raises(ValueError, match="'step' or 'episode'"):
        loss_weights(a.mask, a.lengths, "steps")


def test_normalized_advantages_per_episode_by_hand():
    episodes = hand_episodes()
    advantages = episodes.compute_advantages(ConstantBaseline(), gae_lambda=0.5, normalize=True, averaging="episode")
    raw0, raw1 = [1.375, 3.5, 4.0], [1.5, 2.0]
    # Each episode weighs the same: mean of per-episode means, then the same for squares.
    mean = (sum(raw0) / 3 + sum(raw1) / 2) / 2
    var = (sum((a - mean) ** 2 for a in raw0) / 3 + sum((a - mean) ** 2 for a in raw1) / 2) / 2
    std = math.sqrt(var) + 1e-8
    expected = torch.tensor(
        [[(raw0[0] - mean) / std, (raw1[0] - mean) / std], [(raw0[1] - mean) / std, (raw1[1] - mean) / std],
         [(raw0[2] - mean) / std, 0.0]]
    )
    torch.testing.assert_close(advantages, expected)
