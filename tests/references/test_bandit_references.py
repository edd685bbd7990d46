"""UCB1, Thompson sampling and the bounds on Bernoulli bandits, against plain loops of their formulas."""

import math

import numpy as np
import pytest

from maml_rl.envs import BernoulliBanditEnv
from maml_rl.references import (
    BANDIT_AGENTS,
    OracleArm,
    RandomArm,
    ThompsonSampling,
    UCB1,
    bandit_references,
    play_bandit,
    summarise_bandits,
)


def bandit(means):
    return BernoulliBanditEnv(len(means), task={"mean": np.asarray(means, dtype=float)})


def naive_ucb1(env, pulls, env_seed):
    """Auer et al.'s UCB1 as written: each arm once, then argmax of mean + sqrt(2 ln n / n_a), first max wins."""
    k = env.k
    counts, sums, arms = [0] * k, [0.0] * k, []
    env.reset(seed=env_seed)
    for n in range(pulls):
        if n < k:
            arm = n
        else:
            best, arm = -math.inf, None
            for a in range(k):
                value = sums[a] / counts[a] + math.sqrt(2 * math.log(n) / counts[a])
                if value > best:
                    best, arm = value, a
        reward = env.step(arm)[1]
        counts[arm] += 1
        sums[arm] += reward
        arms.append(arm)
    return arms


def naive_thompson(env, pulls, env_seed, rng):
    """Beta(1, 1) Thompson sampling: one Beta draw per arm, arm 0 first, from the same generator."""
    k = env.k
    wins, losses, arms = [0] * k, [0] * k, []
    env.reset(seed=env_seed)
    for _ in range(pulls):
        draws = [rng.beta(1 + wins[a], 1 + losses[a]) for a in range(k)]
        arm = max(range(k), key=lambda a: (draws[a], -a))
        reward = env.step(arm)[1]
        wins[arm] += reward == 1.0
        losses[arm] += reward == 0.0
        arms.append(arm)
    return arms


def test_ucb1_pulls_each_arm_once_then_follows_the_formula():
    env = bandit([0.3, 0.7, 0.5, 0.55, 0.1, 0.65])
    trial = play_bandit(UCB1(6), env, 300, env_seed=11, rng=np.random.default_rng(0))
    assert trial.arms[:6].tolist() == [0, 1, 2, 3, 4, 5]
    assert trial.arms.tolist() == naive_ucb1(env, 300, env_seed=11)
    assert len(set(trial.arms[6:].tolist())) > 1  # not a trivial sequence


def test_thompson_sampling_equals_a_plain_loop_on_the_same_draws():
    env = bandit([0.2, 0.6, 0.5, 0.45, 0.8])
    trial = play_bandit(ThompsonSampling(5), env, 200, env_seed=3, rng=np.random.default_rng(42))
    assert trial.arms.tolist() == naive_thompson(env, 200, env_seed=3, rng=np.random.default_rng(42))
    other = play_bandit(ThompsonSampling(5), env, 200, env_seed=3, rng=np.random.default_rng(43))
    assert other.arms.tolist() != trial.arms.tolist()


def test_regret_is_far_below_random_and_sublinear_on_easy_bandits():
    env = bandit([0.2, 0.9, 0.2, 0.3, 0.1])
    agents = {"random": RandomArm, "ucb1": UCB1, "thompson": ThompsonSampling}
    curves = {name: np.mean([play_bandit(make(5), env, 400, seed, np.random.default_rng(seed)).regret_per_pull
                             for seed in range(8)], axis=0).cumsum() for name, make in agents.items()}
    # Random's expected regret per pull is the mean gap to the best arm, (0.7 + 0.7 + 0.6 + 0.8) / 5.
    assert curves["random"][-1] / 400 == pytest.approx(0.56, abs=0.03)
    for name in ("ucb1", "thompson"):
        assert curves[name][-1] < 0.2 * curves["random"][-1], name
        # Sublinear: the second 200 pulls cost less than half what the first 200 did.
        assert curves[name][-1] - curves[name][199] < 0.5 * curves[name][199], name


def test_the_oracle_pulls_the_best_arm_and_random_spreads_over_all():
    env = bandit([0.1, 0.9, 0.4])
    assert play_bandit(OracleArm(3, env.get_task()["mean"]), env, 50, 0, np.random.default_rng(0)).arms.tolist() \
        == [1] * 50
    arms = play_bandit(RandomArm(3), env, 3000, 0, np.random.default_rng(0)).arms
    assert np.all(np.abs(np.bincount(arms, minlength=3) - 1000) < 120)


def test_rewards_are_the_envs_and_summary_sums_them():
    results = bandit_references(arms=3, pulls=20, num_tasks=4, seed=5, algorithms=["thompson"])
    summary = summarise_bandits(results)["thompson"]
    assert summary["total_reward"]["mean"] == pytest.approx(results["thompson"]["rewards"].sum() / 4)
    assert summary["cumulative_regret"][-1] == pytest.approx(summary["regret"]["mean"])
    assert set(np.unique(results["thompson"]["rewards"])) <= {0.0, 1.0}


def test_the_same_seed_gives_the_same_numbers_whichever_algorithms_run():
    everything = bandit_references(arms=4, pulls=30, num_tasks=5, seed=9)
    alone = bandit_references(arms=4, pulls=30, num_tasks=5, seed=9, algorithms=["thompson"])
    assert np.array_equal(everything["thompson"]["arms"], alone["thompson"]["arms"])
    other = bandit_references(arms=4, pulls=30, num_tasks=5, seed=10, algorithms=["thompson"])
    assert not np.array_equal(other["thompson"]["arms"], alone["thompson"]["arms"])


@pytest.mark.parametrize("name", list(BANDIT_AGENTS))
def test_one_arm_and_one_pull(name):
    one_arm = bandit_references(arms=1, pulls=7, num_tasks=2, seed=0, algorithms=[name])[name]
    assert np.all(one_arm["arms"] == 0) and np.all(one_arm["regret"] == 0)
    one_pull = bandit_references(arms=5, pulls=1, num_tasks=3, seed=0, algorithms=[name])[name]
    assert one_pull["arms"].shape == (3, 1)
    if name == "ucb1":
        assert np.all(one_pull["arms"] == 0)


def test_misuse_is_refused():
    env = bandit([0.5, 0.5])
    with pytest.raises(ValueError, match="pulls"):
        play_bandit(UCB1(2), env, 0, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="k=2"):
        play_bandit(UCB1(3), env, 5, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least one arm"):
        UCB1(0)
    with pytest.raises(ValueError, match="choose from"):
        bandit_references(arms=2, pulls=5, num_tasks=2, seed=0, algorithms=["gittins"])
    with pytest.raises(ValueError, match="num_tasks"):
        bandit_references(arms=2, pulls=5, num_tasks=0, seed=0)
