"""PSRL and its bounds on tabular MDPs: value iteration against enumeration, PSRL against the oracle."""

import itertools

import numpy as np
import pytest

from maml_rl.envs import TabularMDPEnv
from maml_rl.references import (
    MDP_AGENTS,
    PSRL,
    MDPPrior,
    OraclePolicy,
    RandomPolicy,
    mdp_references,
    play_mdp,
    summarise_mdps,
    value_iteration,
)


def random_mdp(seed, states, actions):
    env = TabularMDPEnv(states, actions)
    env.reset(seed=seed)
    env.reset_task(env.sample_tasks(1)[0])
    return env


def expected_return(transitions, rewards, policy, start, horizon):
    """Sum over every state path of its probability times its rewards, under a policy[h][s] table."""
    S = rewards.shape[0]
    total = 0.0
    for path in itertools.product(range(S), repeat=horizon):
        probability, ret, state = 1.0, 0.0, start
        for h in range(horizon):
            action = policy[h][state]
            ret += rewards[state, action]
            probability *= transitions[state, action, path[h]]
            state = path[h]
        total += probability * ret
    return total


def test_value_iteration_equals_the_best_of_every_policy_enumerated():
    rng = np.random.default_rng(0)
    S, A, H = 3, 2, 3
    transitions = rng.dirichlet(np.ones(S), size=(S, A))
    rewards = rng.normal(size=(S, A))
    q, v = value_iteration(transitions, rewards, H)
    tables = list(itertools.product(range(A), repeat=S))  # a deterministic action per state
    for start in range(S):
        values = [expected_return(transitions, rewards, policy, start, H)
                  for policy in itertools.product(tables, repeat=H)]
        assert v[0, start] == pytest.approx(max(values), abs=1e-12)
        assert expected_return(transitions, rewards, q.argmax(axis=2), start, H) == pytest.approx(max(values))
    assert np.all(v[H] == 0)
    assert np.allclose(q[H - 1], rewards)


def test_horizon_one_is_the_best_immediate_reward():
    rewards = np.array([[1.0, 3.0], [2.0, -1.0]])
    q, v = value_iteration(np.full((2, 2, 2), 0.5), rewards, 1)
    assert v[0].tolist() == [3.0, 2.0] and q.shape == (1, 2, 2)


def test_psrl_with_a_prior_concentrated_on_the_true_mdp_plays_the_oracle():
    env = random_mdp(1, 6, 3)
    task = env.get_task()
    prior = MDPPrior(dirichlet=1e9 * task["transitions"] + 1e-9, reward_mean=task["rewards_mean"],
                     reward_precision=np.full((6, 3), 1e12))
    oracle = play_mdp(OraclePolicy(task["transitions"], task["rewards_mean"], 5), env, 6, 5, 7,
                      np.random.default_rng(0))
    psrl = play_mdp(PSRL(prior, 5), env, 6, 5, 7, np.random.default_rng(1))
    # The same env draws and the same actions: the same returns, bit for bit.
    assert psrl.tolist() == oracle.tolist()
    random = play_mdp(RandomPolicy(3), env, 6, 5, 7, np.random.default_rng(0))
    assert random.tolist() != oracle.tolist()


def test_psrl_posterior_counts_what_it_saw():
    env = random_mdp(2, 4, 2)
    agent = PSRL(MDPPrior.of_env(env), 3)
    returns = play_mdp(agent, env, 4, 3, 0, np.random.default_rng(0))
    assert agent.counts.sum() == 12 and agent.visits.sum() == 12
    assert agent.reward_sums.sum() == pytest.approx(returns.sum())
    assert np.array_equal(agent.counts.sum(axis=2), agent.visits)


def test_psrl_learns_and_stays_between_the_bounds():
    results = mdp_references(10, 5, 10, 10, num_tasks=30, seed=0)
    summary = summarise_mdps(results)
    totals = {name: summary[name]["total_return"]["mean"] for name in MDP_AGENTS}
    assert totals["random"] < totals["psrl"] < totals["oracle"]
    psrl = summary["psrl"]["return_per_episode"]
    assert np.mean(psrl[-3:]) > np.mean(psrl[:3]) + 2.0
    # The oracle's mean return matches its expected value within the noise.
    optimal = summary["optimal"]["value_per_episode"]["mean"]
    assert np.mean(summary["oracle"]["return_per_episode"]) == pytest.approx(optimal, abs=1.0)


def test_the_same_seed_gives_the_same_numbers_whichever_algorithms_run():
    everything = mdp_references(5, 3, 4, 3, num_tasks=4, seed=3)
    alone = mdp_references(5, 3, 4, 3, num_tasks=4, seed=3, algorithms=["psrl"])
    assert np.array_equal(everything["psrl"]["returns"], alone["psrl"]["returns"])
    assert not np.array_equal(mdp_references(5, 3, 4, 3, num_tasks=4, seed=4, algorithms=["psrl"])["psrl"]["returns"],
                              alone["psrl"]["returns"])


@pytest.mark.parametrize("name", list(MDP_AGENTS))
def test_one_episode_of_one_step_and_one_state(name):
    one_step = mdp_references(4, 2, 1, 1, num_tasks=3, seed=0, algorithms=[name])
    assert one_step[name]["returns"].shape == (3, 1)
    one_state = mdp_references(1, 3, 2, 2, num_tasks=2, seed=0, algorithms=[name])
    assert one_state[name]["returns"].shape == (2, 2)
    summary = summarise_mdps(mdp_references(3, 2, 2, 2, num_tasks=1, seed=0, algorithms=[name]))
    assert summary[name]["total_return"]["sem"] is None


def test_misuse_is_refused():
    env = random_mdp(0, 3, 2)
    with pytest.raises(ValueError, match="horizon"):
        value_iteration(np.full((3, 2, 3), 1 / 3), np.zeros((3, 2)), 0)
    with pytest.raises(ValueError, match="shape"):
        value_iteration(np.full((3, 2, 2), 0.5), np.zeros((3, 2)), 2)
    with pytest.raises(ValueError, match="at least one episode"):
        play_mdp(RandomPolicy(2), env, 0, 3, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="choose from"):
        mdp_references(3, 2, 2, 2, num_tasks=1, seed=0, algorithms=["ucrl2"])
