"""Meta-World 3.1.1's own ``metalearning_evaluation`` gives the same figures on MultiTaskVectorEnv as on
gymnasium's AsyncVectorEnv, both over the env functions Meta-World's ``make_vec`` builds (as
metaworld-algorithms builds its test envs)."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

if os.environ.get("MAML_RL_REQUIRE_METAWORLD"):
    import metaworld  # CI installs the extra: a missing Meta-World fails here instead of skipping
else:
    metaworld = pytest.importorskip("metaworld")
import gymnasium as gym
import metaworld.evaluation

import maml_rl.envs.metaworld  # noqa: F401  (its weld shim for MuJoCo >= 3.17, inherited by forked workers)
from maml_rl.samplers import MultiTaskVectorEnv

from helpers import ROOT

pytestmark = [pytest.mark.metaworld, pytest.mark.slow, pytest.mark.processes]


class LinearAgent:
    """A fixed agent (Meta-World's MetaLearningAgent protocol): tanh(obs @ W), nothing adapted."""

    def __init__(self, obs_size, act_size):
        self.weights = np.random.default_rng(3).normal(scale=0.3, size=(obs_size, act_size))

    def init(self):
        pass

    def adapt_action(self, observations):
        return self.eval_action(observations), {}

    def step(self, timestep):
        pass

    def adapt(self):
        pass

    def eval_action(self, observations):
        return np.tanh(observations @ self.weights)

    def reset(self, env_mask):
        pass


def evaluate(envs):
    agent = LinearAgent(envs.single_observation_space.shape[0], envs.single_action_space.shape[0])
    return metaworld.evaluation.metalearning_evaluation(agent, envs, num_evals=1, adaptation_episodes=1,
                                                        evaluation_episodes=1)


def test_metalearning_evaluation_gives_the_same_figures_as_on_async_vector_env():
    theirs = gym.make_vec("Meta-World/ML1-test", env_name="reach-v3", vector_strategy="async", seed=2,
                          meta_batch_size=4, total_tasks_per_cls=8, terminate_on_success=True)
    env_fns = theirs.unwrapped.env_fns
    try:
        expected = evaluate(theirs)
    finally:
        theirs.close()
    ours = MultiTaskVectorEnv(env_fns, num_workers=2, start_method="fork",
                              autoreset_mode=theirs.metadata["autoreset_mode"])
    try:
        result = evaluate(ours)
    finally:
        ours.close()
    assert result[:2] == expected[:2] and dict(result[2]) == dict(expected[2])
    # The agent reaches no goal (ML1's goals are hidden from the observations), so the success figures are 0
    # on both; the mean return is a float over every step of every episode, equal only if they all are.
    assert expected[1] != 0.0


def test_the_documented_example_runs_as_written(tmp_path):
    """docs/vector.md's example, in a fresh interpreter: Meta-World's own envs build on MuJoCo 4 only with the
    weld fix of maml_rl.envs.metaworld, in the caller's process and in the workers (forked, so they inherit it)."""
    section = (ROOT / "docs/vector.md").read_text().split("## Meta-World's own evaluation on it", 1)[1]
    code = re.search(r"^```python\n(.*?)^```", section, flags=re.S | re.M).group(1)
    (tmp_path / "example.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.fullmatch(r"success \d\.\d\d, mean return -?\d+\.\d\d\n", result.stdout), result.stdout
