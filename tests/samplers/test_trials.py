"""Trials: several episodes per slot, a recurrent policy's state carried across
the resets inside a trial. The truth is the naive reference's plain loop
(one env per slot, the policy stepped slot by slot, ``naive_trials``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from maml_rl.policies.recurrent import GRUPolicy, rl2_input_size, rl2_inputs
from maml_rl.samplers import InsufficientMemoryError, MultiTaskSampler, PolicyOutputError
from maml_rl.samplers.workers.batched_child_env import mujoco_batch
from maml_rl.data.trials import stack_start
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers import ROOT
from helpers.differential_envs import factory
from helpers.differential_trials import (ACT, CATEGORIES, OBS, SEED, SHAPES, assert_trials_equal, recurrent_policy,
                                         run_shapes)
from helpers.naive_sampler import ElementwisePolicy
from helpers.naive_trials import CountingRecurrentPolicy, reference_trials

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
@pytest.mark.parametrize("num_workers, partial", [(0, False), (3, False), (3, True)],
                         ids=["in-process", "3-workers", "3-workers-partial"])
def test_trials_equal_the_naive_reference(discrete, num_workers, partial):
    run_shapes(discrete, SHAPES, num_workers=num_workers, partial=partial)


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_mean_action_trials_equal_the_naive_reference(discrete):
    run_shapes(discrete, SHAPES, actions="mean", num_workers=3, partial=True)


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_start_methods_give_the_reference_trials(start_method):
    run_shapes(False, SHAPES[2:4], num_workers=2, start_method=start_method)


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_a_policy_stepped_task_by_task_gives_the_reference_trials(discrete):
    run_shapes(discrete, SHAPES[2:4], batched=False, num_workers=2, partial=True)


def test_the_state_is_carried_across_resets_and_reset_between_trials(drift_sampler):
    """The counting entry of the state is the step within the trial at every
    step (never reset at an episode's end) and starts at 0 in every trial."""
    tasks = [{"offset": 0.1, "length": 2}, {"offset": -0.3, "length": None}]
    policy = recurrent_policy(False)
    with drift_sampler(False, 5, 3, policy=policy, seed=1, num_workers=2) as sampler:
        for _ in range(2):
            batches = sampler.rollout_trials(tasks, 4, chunk=1)
            for batch in batches:
                counts = batch.chunk_states[..., -1]  # [T, B]: the state before each step
                steps = torch.arange(counts.shape[0], dtype=torch.float32).unsqueeze(1).expand_as(counts)
                assert torch.equal(counts * batch.mask, steps * batch.mask)
                assert torch.equal(batch.final_state[:, -1], batch.lengths.float())
                # Several episodes did happen inside each trial.
                assert (batch.episodes_done == 4).all() and ((batch.dones != 0).sum(0) == 4).all()


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_autoreset_trials_equal_the_naive_reference(discrete):
    run_shapes(discrete, SHAPES, inputs="rl2-autoreset", num_workers=3, partial=True)


@pytest.mark.parametrize("inputs", ["rl2", "rl2-autoreset"])
@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_rl2_inputs_are_the_previous_action_reward_and_done(discrete, inputs, drift_sampler):
    tasks = [{"offset": 0.2, "length": None}]
    policy = recurrent_policy(discrete)
    width = CATEGORIES if discrete else ACT
    seen = []
    step = policy.step

    def spy(inputs, state):
        seen.append(inputs.reshape(-1, inputs.shape[-1]).clone())
        return step(inputs, state)

    policy.step = spy
    with drift_sampler(discrete, 4, 2, policy=policy, seed=3, num_workers=0) as sampler:
        batch = sampler.rollout_trials(tasks, 3, reward_scale=0.5, inputs=inputs)[0]
    assert seen[0].shape[0] == 1  # the construction probe, one zero input
    seen = seen[1:]
    for t in range(len(batch)):
        for b in range(2):
            if t >= batch.lengths[b]:
                continue
            x = seen[t][b]
            assert torch.equal(x[:OBS], batch.observations[t, b])
            if t == 0 or (inputs == "rl2-autoreset" and batch.dones[t - 1, b] != 0):
                # All zero, a discrete action's one-hot included: no previous step yet (with autoreset,
                # none in this episode: the done flag is never seen set).
                assert torch.equal(x[OBS:], torch.zeros(width + 2))
            else:
                previous = batch.actions[t - 1, b]
                if discrete:
                    assert torch.equal(x[OBS:OBS + width], torch.eye(CATEGORIES)[previous])
                else:
                    assert torch.equal(x[OBS:OBS + width], previous)
                assert x[OBS + width] == batch.rewards[t - 1, b] * 0.5
                assert x[OBS + width + 1] == float(batch.dones[t - 1, b] != 0)
    # And the batch rebuilds the same inputs for training.
    assert torch.equal(batch.policy_inputs(0.5)[:, 0][:batch.lengths[0]], torch.stack(seen)[:batch.lengths[0], 0])
    # By default with the scale it was sampled with, which the batch records.
    assert batch.reward_scale == 0.5 and batch.inputs == inputs
    assert (batch.dones[:batch.lengths[0] - 1, 0] != 0).sum() == 2  # the test saw two episode boundaries
    assert torch.equal(batch.policy_inputs(), batch.policy_inputs(0.5))


def test_one_episode_trials_of_a_feed_forward_policy_are_rollout_episodes(drift_sampler):
    tasks = [{"offset": 0.2, "length": None}, {"offset": -0.5, "length": 3}]
    results = []
    for method in ("rollout", "rollout_trials"):
        policy = ElementwisePolicy(ACT, False)
        with drift_sampler(False, 6, 3, policy=policy, seed=9, num_workers=2) as sampler:
            call = getattr(sampler, method)
            results.append([call(tasks) if method == "rollout" else call(tasks, 1) for _ in range(2)])
    for a, b in zip(*results):
        for x, y in zip(a, b):
            for name in ("observations", "actions", "rewards", "lengths"):
                assert torch.equal(getattr(x, name), getattr(y, name)), name


def test_feed_forward_trials_run_several_episodes_per_slot(drift_sampler):
    tasks = [{"offset": 0.2, "length": 2}]
    with drift_sampler(False, 6, 2, policy=ElementwisePolicy(ACT, False), seed=9, num_workers=0) as sampler:
        batch = sampler.rollout_trials(tasks, 3)[0]
    assert batch.lengths.tolist() == [6, 6] and batch.episodes_done.tolist() == [3, 3]
    assert batch.log_probs is None and batch.final_state is None
    returns = batch.episode_returns()
    assert returns.shape == (3, 2)
    assert torch.allclose(returns.sum(0), batch.rewards.sum(0).double())


@pytest.mark.parametrize("inputs", ["rl2", "rl2-autoreset"])
def test_a_continued_trial_equals_the_reference_started_there(inputs, drift_sampler):
    """Meta-World's protocol: evaluation episodes restart from the state after adaptation."""
    tasks = [{"offset": 0.1, "length": None}, {"offset": 0.5, "length": 3}]
    policy = recurrent_policy(False)
    with drift_sampler(False, 5, 2, policy=policy, seed=SEED, num_workers=2) as sampler:
        adapted = sampler.rollout_trials(tasks, 3, inputs=inputs)
        start = stack_start(adapted)
        first = sampler.rollout_trials(tasks, 1, start=start, inputs=inputs)
        second = sampler.rollout_trials(tasks, 1, start=start, inputs=inputs)
    # The counter continues from the adaptation trial's length.
    for batch, before in zip(first, adapted):
        assert torch.equal(batch.final_state[:, -1], before.lengths.float() + batch.lengths.float())
    for call, got in ((1, first), (2, second)):
        reference = reference_trials(factory(False, 5), policy, tasks, 2, SEED, call, 5, 1, start=start,
                                     autoreset=inputs == "rl2-autoreset")
        assert_trials_equal(got, reference, f"continuation {call}")


@pytest.mark.skipif(mujoco_batch is None, reason="the fast path needs mujoco.batch (MuJoCo >= 4)")
def test_fast_path_trials_equal_the_per_env_trials():
    torch.manual_seed(0)
    policy = GRUPolicy(rl2_input_size(20, 6), 6, (16,), 8)
    out = []
    for fast in (True, False):
        with MultiTaskSampler("HalfCheetahVel-v5", {}, 2, policy, seed=4, max_episode_steps=7, mujoco_batch=fast,
                              num_workers=0 if fast else 2) as sampler:
            assert sampler.mujoco_batch is fast
            tasks = sampler.sample_tasks(3)
            out.append([sampler.rollout_trials(tasks, 3, chunk=5) for _ in range(2)])
    for a, b in zip(*out):
        for x, y in zip(a, b):
            for name in ("observations", "actions", "rewards", "dones", "log_probs", "final_state", "chunk_states"):
                assert torch.equal(getattr(x, name), getattr(y, name)), name


def test_gru_policy_sampling_and_training_paths_agree():
    torch.manual_seed(0)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (16, 16), 8)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, 3, policy, seed=2, num_workers=0) as sampler:
        batch = sampler.rollout_trials(sampler.sample_tasks(2), 3, reward_scale=0.1, chunk=4)[0]
    distribution, final = policy.forward_trials(batch.policy_inputs(0.1), policy.initial_state(3), chunk=4)
    log_probs = distribution.log_prob(batch.actions)
    assert torch.allclose(log_probs, batch.log_probs, atol=1e-5)
    assert torch.allclose(final, batch.final_state, atol=1e-5)
    # Categorical head too.
    categorical = GRUPolicy(6, 3, (8,), 4, categorical=True)
    d, h = categorical.step(torch.randn(5, 6), categorical.initial_state(5))
    assert d.probs.shape == (5, 3) and h.shape == (5, 4)


def test_rl2_inputs_by_hand():
    x = rl2_inputs(torch.tensor([[1.0, 2.0]]), torch.tensor([2]), torch.tensor([3.0]), torch.tensor([1]),
                   num_categories=3, reward_scale=0.5)
    assert x.tolist() == [[1.0, 2.0, 0.0, 0.0, 1.0, 1.5, 1.0]]
    # Meta-World's autoreset: after an episode's end the previous values are all zero; elsewhere unchanged.
    x = rl2_inputs(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[0.5, -1.0], [0.25, 2.0]]),
                   torch.tensor([3.0, -2.0]), torch.tensor([2, 0]), reward_scale=0.5, zero_after_done=True)
    assert x.tolist() == [[1.0, 2.0, 0.0, 0.0, 0.0, 0.0], [3.0, 4.0, 0.25, 2.0, -1.0, 0.0]]


def test_misuse_is_refused_with_what_to_do(drift_sampler):
    recurrent = recurrent_policy(False)
    tasks = [{"offset": 0.1, "length": 2}]
    with drift_sampler(False, 4, 2, policy=recurrent, seed=0, num_workers=0) as sampler:
        with pytest.raises(TypeError, match="is recurrent.*rollout_trials"):
            sampler.rollout(tasks)
        with pytest.raises(TypeError, match="is recurrent"):
            sample_adapt_sample(sampler, tasks, num_steps=0)
        with pytest.raises(ValueError, match="episodes_per_trial must be an int >= 1"):
            sampler.rollout_trials(tasks, 0)
        with pytest.raises(TypeError, match="input_size=3"):
            sampler.rollout_trials(tasks, 2, inputs="observations")  # built for RL²'s wider input
        with pytest.raises(ValueError, match="inputs='nope'"):
            sampler.rollout_trials(tasks, 2, inputs="nope")
        with pytest.raises(ValueError, match=r"start\['state'\] has shape"):
            sampler.rollout_trials(tasks, 1, start={"state": np.zeros((1, 7)), "actions": np.zeros((2, 2)),
                                                    "rewards": np.zeros(2), "dones": np.zeros(2)})
        with pytest.raises(ValueError, match="recurrent policy adapts in its state"):
            sampler.rollout_trials(tasks, 1, params={})
        # The sampler still works after the refusals.
        assert sampler.rollout_trials(tasks, 2)[0].episodes_done.tolist() == [2, 2]
    with drift_sampler(False, 4, 2, policy=ElementwisePolicy(ACT, False), seed=0, num_workers=0) as sampler:
        with pytest.raises(ValueError, match="this policy is feed-forward"):
            sampler.rollout_trials(tasks, 1, start={"state": 0})
        with pytest.raises(ValueError, match="not sampled by a recurrent policy"):
            sampler.rollout_trials(tasks, 1)[0].end_points()


def test_policies_off_the_protocol_are_refused_naming_the_cause(drift_sampler):
    tasks = [{"offset": 0.1, "length": 2}]

    class NoDevice(CountingRecurrentPolicy):
        def initial_state(self, n):  # the protocol's is initial_state(n, device=None)
            return super().initial_state(n)

    class Float64State(CountingRecurrentPolicy):
        def initial_state(self, n, device=None):
            return super().initial_state(n, device).double()

    class NotAModule:
        is_recurrent, state_shape = True, (1,)

        def __call__(self, *args):
            raise AssertionError("never called")

        def initial_state(self, n, device=None):
            return torch.zeros(n, 1)

        def step(self, inputs, state):
            raise AssertionError("never called")

    width = rl2_input_size(OBS, ACT)
    for policy, error, match in ((NoDevice(width, ACT, False), TypeError, r"initial_state\(self, n, device=None\)"),
                                 (Float64State(width, ACT, False), PolicyOutputError, "torch.float64.*float32"),
                                 (NotAModule(), TypeError, "not a torch.nn.Module")):
        with drift_sampler(False, 4, 2, policy=policy, seed=0, num_workers=0) as sampler:
            with pytest.raises(error, match=match) as info:
                sampler.rollout_trials(tasks, 2)
            assert "input_size" not in str(info.value)  # not blamed on the input's width


def test_long_trials_that_cannot_fit_are_refused_with_the_figures(monkeypatch, drift_sampler):
    from maml_rl.samplers.workers import memory

    monkeypatch.setattr(memory, "available_memory", lambda: 64 * 2**20)
    policy = GRUPolicy(rl2_input_size(OBS, ACT), ACT, (8,), 256)
    with drift_sampler(False, 500, 10, policy=policy, seed=0, num_workers=0) as sampler:
        with pytest.raises(InsufficientMemoryError, match="trials of 10 episodes") as info:
            sampler.rollout_trials([{"offset": 0.0, "length": None}] * 20, 10, chunk=250)
        assert "GB of memory" in str(info.value)


def test_a_reused_pool_is_checked_again_for_more_recorded_states(monkeypatch, drift_sampler):
    """The env pool is kept between calls; a later call that records more (a shorter
    BPTT chunk) is checked before it allocates, not only the call that built the pool."""
    from maml_rl.samplers.workers import memory

    policy = GRUPolicy(rl2_input_size(OBS, ACT), ACT, (8,), 256)
    tasks = [{"offset": 0.0, "length": None}] * 4
    with drift_sampler(False, 50, 4, policy=policy, seed=0, num_workers=0) as sampler:
        sampler.rollout_trials(tasks, 4, chunk=100)  # 16 slots x 2 chunk states: ~80 KB; the pool is built
        # 4 MiB available: a state recorded at every step (~3.3 MB, twice with its copy) does not fit.
        monkeypatch.setattr(memory, "available_memory", lambda: 4 * 2**20)
        sampler.rollout_trials(tasks, 4, chunk=100)  # nothing new to record: no check refuses it
        with pytest.raises(InsufficientMemoryError, match=r"recording the policy's states.*chunk 1"):
            sampler.rollout_trials(tasks, 4, chunk=1)


def test_the_documented_recurrent_policy_example_runs(capsys):
    """docs/sampler.md's example of a user's own recurrent policy, run as written."""
    text = (ROOT / "docs" / "sampler.md").read_text()
    code = text.split("<!-- recurrent-example -->\n```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 20
    exec(compile(code, "docs/sampler.md", "exec"), {"__name__": "__main__"})
    assert "tensor(" in capsys.readouterr().out


@pytest.mark.parametrize(("categorical", "head"), [(False, "linear"), (False, "tanh"), (True, "linear")])
def test_gru_task_batches_give_each_task_the_bits_of_its_own_call(categorical, head):
    """GRUPolicy takes all tasks in one call per step; a task's numbers must not depend on the
    other tasks of the call (how many, where it sits) or on the thread count, since Ray actors
    and the local sampler group tasks differently."""
    torch.manual_seed(3)
    # Inputs 45 wide: padded products; 16: aligned ones; state 8 and 3 rows: vector tails of sigmoid.
    for input_size, hidden, state_size in ((45, (32, 32), 64), (16, (32,), 64), (6, (16,), 8)):
        policy = GRUPolicy(input_size, 3, hidden, state_size, categorical=categorical, head=head)
        threads = torch.get_num_threads()
        try:
            for B in (1, 2, 3, 5, 20):
                inputs, state = torch.randn(7, B, input_size), torch.randn(7, B, state_size)
                torch.set_num_threads(1)
                with torch.no_grad():
                    whole, whole_state = policy.step(inputs.clone(), state.clone())
                for num_threads in (1, 2):
                    torch.set_num_threads(num_threads)
                    for lo, hi in ((0, 1), (3, 4), (1, 3), (2, 7), (0, 7)):
                        with torch.no_grad():
                            part, part_state = policy.step(inputs[lo:hi].clone(), state[lo:hi].clone())
                        assert torch.equal(part_state, whole_state[lo:hi]), (input_size, B, num_threads, lo, hi)
                        got = part.logits if categorical else part.mean
                        want = whole.logits if categorical else whole.mean
                        assert torch.equal(got, want[lo:hi]), (input_size, B, num_threads, lo, hi)
                        if not categorical:  # the tanh head's std is state-dependent
                            assert torch.equal(part.stddev, whole.stddev[lo:hi]), (input_size, B, num_threads)
        finally:
            torch.set_num_threads(threads)
    # Not the non-batched call's bits (other kernels), but the same numbers to rounding.
    flat, flat_state = policy.step(inputs[0], state[0])
    assert torch.allclose(flat_state, whole_state[0], atol=1e-5)
