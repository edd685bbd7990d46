"""pytorch-maml-rl's users' scripts against this package (maml_rl.legacy, docs/migrating.md).

The reference's own train.py and test.py (tests/legacy/reference/) run unchanged in
subprocesses: each deprecated name must warn once with the call replacing it,
and their results must equal, bit for bit, the same run written with this
package's API.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import warnings
from collections import OrderedDict
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.app.config_files import load_config
from maml_rl.envs import make_env
from maml_rl.envs.errors import RetiredEnvError
from maml_rl.envs.retired import RETIRED_ENV_IDS
from maml_rl.data.episodes import BatchEpisodes
from maml_rl.legacy import warn as legacy_warn
from maml_rl.legacy.warn import LegacyAPIWarning
from maml_rl.metalearners import MAMLTRPO, sample_adapt_sample
from maml_rl.policies import CategoricalMLPPolicy, NormalMLPPolicy, get_policy_for_env
from maml_rl.samplers import MultiTaskSampler

from helpers import ROOT

REFERENCE = Path(__file__).resolve().parent / "reference"

pytestmark = pytest.mark.filterwarnings("ignore::maml_rl.legacy.warn.LegacyAPIWarning")

# A reference-style config (its keys and spellings), small enough for a test.
CONFIG = {
    "env-name": "2DNavigation-v0", "env-kwargs": {"low": -0.5, "high": 0.5},
    "gamma": 0.99, "gae-lambda": 1.0, "first-order": False,
    "hidden-sizes": [8, 8], "nonlinearity": "tanh",
    "fast-batch-size": 2, "num-steps": 1, "fast-lr": 0.1,
    "num-batches": 2, "meta-batch-size": 3,
    "max-kl": 1.0e-2, "cg-iters": 10, "cg-damping": 1.0e-5, "ls-max-steps": 15, "ls-backtrack-ratio": 0.8,
}

# Runs a script as __main__ with its argv, recording every DeprecationWarning.
RUNNER = textwrap.dedent("""
    import json, runpy, sys, warnings
    if __name__ == "__main__":
        script, record, *argv = sys.argv[1:]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sys.argv = [script, *argv]
            runpy.run_path(script, run_name="__main__")
        json.dump([[w.category.__name__, str(w.message), w.filename] for w in caught
                   if issubclass(w.category, DeprecationWarning)], open(record, "w"))
""")

# The same training and evaluation as the reference's scripts, in this package's API.
NEW_API = textwrap.dedent("""
    import json, sys
    import gymnasium as gym, numpy as np, torch
    from gymnasium import spaces
    import maml_rl.envs
    from maml_rl.data.baseline import LinearFeatureBaseline
    from maml_rl.metalearners import MAMLTRPO, sample_adapt_sample
    from maml_rl.policies import get_policy_for_env
    from maml_rl.samplers import MultiTaskSampler

    def returns(batches):
        return torch.stack([batch.total_rewards for batch in batches]).numpy()

    if __name__ == "__main__":
        config, out, seed, test_seed = json.load(open(sys.argv[1])), sys.argv[2], 7, 3
        torch.manual_seed(seed)
        env = gym.make(config["env-name"], **config["env-kwargs"])
        policy = get_policy_for_env(env, hidden_sizes=config["hidden-sizes"], nonlinearity=config["nonlinearity"])
        size = spaces.flatdim(env.observation_space)
        env.close()
        learner = MAMLTRPO(policy, fast_lr=config["fast-lr"], first_order=config["first-order"],
                           max_kl=config["max-kl"], cg_iters=config["cg-iters"], cg_damping=config["cg-damping"],
                           ls_max_steps=config["ls-max-steps"], ls_backtrack_ratio=config["ls-backtrack-ratio"])
        adapt = dict(num_steps=config["num-steps"], fast_lr=config["fast-lr"], gamma=config["gamma"],
                     gae_lambda=config["gae-lambda"])
        with MultiTaskSampler(config["env-name"], env_kwargs=config["env-kwargs"], batch_size=config["fast-batch-size"],
                              policy=policy, baseline=LinearFeatureBaseline(size), seed=seed, num_workers=1) as sampler:
            train_returns = []
            for _ in range(config["num-batches"]):
                train, valid = sample_adapt_sample(sampler, sampler.sample_tasks(config["meta-batch-size"]), **adapt)
                learner.step(train, valid)
                train_returns.append((returns(train[0]), returns(valid)))
        torch.save(policy.state_dict(), out + "/policy.th")
        torch.manual_seed(test_seed)  # the reference's test.py builds a new policy and loads the file
        policy = get_policy_for_env(env, hidden_sizes=config["hidden-sizes"], nonlinearity=config["nonlinearity"])
        policy.load_state_dict(torch.load(out + "/policy.th"))
        with MultiTaskSampler(config["env-name"], env_kwargs=config["env-kwargs"], batch_size=config["fast-batch-size"],
                              policy=policy, baseline=LinearFeatureBaseline(size), seed=test_seed,
                              num_workers=1) as sampler:
            train, valid = sample_adapt_sample(sampler, sampler.sample_tasks(2), **adapt)
        np.savez(out + "/results.npz", train_returns=returns(train[0]), valid_returns=returns(valid),
                 iteration_returns=np.array([np.stack(pair) for pair in train_returns]))
""")


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Each in-process test starts as a new process would: no old name used yet."""
    monkeypatch.setattr(legacy_warn, "_warned", set())


def run(args, cwd):
    result = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def legacy_names(record):
    """{old name: [messages]} of the LegacyAPIWarnings in a runner's record."""
    names = {}
    for category, message, _ in json.loads(Path(record).read_text()):
        if category == "LegacyAPIWarning":
            names.setdefault(message.split(": pytorch-maml-rl's API")[0], []).append(message)
    return names


@pytest.mark.slow
@pytest.mark.processes
def test_reference_scripts_run_warn_once_and_equal_the_new_api(tmp_path):
    """pytorch-maml-rl's train.py, then its test.py on the folder it wrote, unchanged.

    Its training loop (sample_async, step(*futures, max_kl=...), sample_wait,
    get_returns) trains the same policy, to the bit, as the loop written with
    sampler.sample and a learner holding the TRPO settings; its evaluation
    writes the same returns. Every old name warns once per process, though the
    loop uses it on every iteration.
    """
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    (tmp_path / "runner.py").write_text(RUNNER)
    (tmp_path / "new_api.py").write_text(NEW_API)
    (tmp_path / "new").mkdir()
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))

    run(["runner.py", REFERENCE / "pmr_train.py", "train.json", "--config", "config.yaml", "--output-folder", "old",
         "--seed", "7", "--num-workers", "1"], tmp_path)
    run(["runner.py", REFERENCE / "pmr_test_script.py", "test.json", "--config", "old/config.json", "--policy",
         "old/policy.th", "--output", "old/results.npz", "--num-batches", "1", "--meta-batch-size", "2", "--seed", "3",
         "--num-workers", "1"], tmp_path)
    run(["new_api.py", "config.json", "new"], tmp_path)

    old_policy = torch.load(tmp_path / "old" / "policy.th")
    new_policy = torch.load(tmp_path / "new" / "policy.th")
    assert set(old_policy) == set(new_policy) == {"layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias",
                                                  "mu.weight", "mu.bias", "sigma"}
    for name in old_policy:
        assert torch.equal(old_policy[name], new_policy[name]), name
    initial = get_policy_for_env(gym.make("2DNavigation-v0"), hidden_sizes=[8, 8])
    assert not torch.equal(initial.state_dict()["mu.weight"], new_policy["mu.weight"])  # it trained
    with np.load(tmp_path / "old" / "results.npz") as old, np.load(tmp_path / "new" / "results.npz") as new:
        for key in ("train_returns", "valid_returns"):
            assert old[key].shape == (2, CONFIG["fast-batch-size"])
            assert np.isfinite(old[key]).all() and (old[key] < 0).all()  # 2D navigation: minus distances
            np.testing.assert_array_equal(old[key], new[key])

    train = legacy_names(tmp_path / "train.json")
    assert {name: len(messages) for name, messages in train.items()} == {
        "maml_rl.utils.helpers.get_policy_for_env": 1,
        "maml_rl.utils.helpers.get_input_size": 1,
        "maml_rl.utils.reinforcement_learning.get_returns": 1,
        "MultiTaskSampler(..., env=env)": 1,
        "MultiTaskSampler.sample_async": 1,
        "MultiTaskSampler.sample_wait": 1,
        "MAMLTRPO.step(..., max_kl=..., cg_iters=..., cg_damping=..., ls_max_steps=..., ls_backtrack_ratio=...)": 1,
    }
    # Each names the new call, and points at the user's line, not at this package.
    replacement = {"get_policy_for_env": "maml_rl.policies.get_policy_for_env(", "get_input_size": "flatdim(",
                   "get_returns": ".total_rewards", "env=env": "env_fn=", "sample_async": "sample_adapt_sample(sampler, ",
                   "sample_wait": "sample_adapt_sample(sampler, ", "max_kl=": "MAMLTRPO(policy, max_kl="}
    for name, (message,) in train.items():
        assert any(old in name and new in message for old, new in replacement.items()), message
        assert "docs/migrating.md" in message
    for _, message, filename in json.loads((tmp_path / "train.json").read_text()):
        if "pytorch-maml-rl's API" in message:
            assert filename.endswith("pmr_train.py"), (message, filename)
    assert set(legacy_names(tmp_path / "test.json")) == {
        "maml_rl.utils.helpers.get_policy_for_env", "maml_rl.utils.helpers.get_input_size",
        "maml_rl.utils.reinforcement_learning.get_returns", "MultiTaskSampler(..., env=env)",
        "MultiTaskSampler.sample"}
    (message,) = legacy_names(tmp_path / "test.json")["MultiTaskSampler.sample"]
    assert "maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...)" in message


# The reference's sampler tests (maml_rl/tests/samplers/test_multi_task_sampler.py), a subset of its grid.
@pytest.mark.processes
@pytest.mark.parametrize("env_name", ["TabularMDP-v0", "2DNavigation-v0"])
@pytest.mark.parametrize("batch_size, num_tasks, num_steps, num_workers", [(1, 1, 1, 1), (7, 5, 3, 3)])
def test_reference_sampler_test(fresh_warnings, env_name, batch_size, num_tasks, num_steps, num_workers):
    from maml_rl.episode import BatchEpisodes as OldBatchEpisodes
    from maml_rl.utils.helpers import get_input_size, get_policy_for_env as old_get_policy_for_env

    env = gym.make(env_name)
    env.close()
    policy = old_get_policy_for_env(env)
    baseline = LinearFeatureBaseline(get_input_size(env))
    sampler = MultiTaskSampler(env_name, {}, batch_size, policy, baseline, num_workers=num_workers)
    tasks = sampler.sample_tasks(num_tasks=num_tasks)
    with pytest.warns(LegacyAPIWarning, match="sample_adapt_sample"):
        train_episodes, valid_episodes = sampler.sample(tasks, num_steps=num_steps)
    sampler.close()

    assert OldBatchEpisodes is BatchEpisodes
    assert len(train_episodes) == num_steps
    assert len(train_episodes[0]) == num_tasks
    assert isinstance(train_episodes[0][0], OldBatchEpisodes)
    assert len(valid_episodes) == num_tasks
    assert isinstance(valid_episodes[0], OldBatchEpisodes)


def test_old_module_paths_warn_once_with_the_new_names(fresh_warnings):
    with pytest.warns(LegacyAPIWarning) as caught:
        from maml_rl.utils.helpers import get_input_size, get_policy_for_env  # noqa: F401
        from maml_rl.utils.helpers import get_policy_for_env as again  # noqa: F401
        import maml_rl.utils.reinforcement_learning as rl

        rl.get_returns, rl.get_returns, rl.reinforce_loss  # noqa: B018
    messages = [str(w.message) for w in caught]
    assert len(messages) == 4, messages
    assert [m.split(":")[0] for m in messages] == [
        "maml_rl.utils.helpers.get_input_size", "maml_rl.utils.helpers.get_policy_for_env",
        "maml_rl.utils.reinforcement_learning.get_returns", "maml_rl.utils.reinforcement_learning.reinforce_loss"]
    assert "maml_rl.policies.get_policy_for_env(env, hidden_sizes, nonlinearity)" in messages[1]
    assert all(w.filename == __file__ for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from maml_rl.utils.helpers import get_policy_for_env as third  # noqa: F401  (no second warning)
    assert legacy_warn.warned_names() >= {"maml_rl.utils.helpers.get_policy_for_env"}


def test_names_with_no_counterpart_say_why(fresh_warnings):
    with pytest.raises(ImportError, match="TabularMDP's optimal values.*docs/migrating.md"):
        from maml_rl.utils.reinforcement_learning import value_iteration  # noqa: F401
    with pytest.raises(AttributeError):
        import maml_rl.episode

        maml_rl.episode.NoSuchName  # noqa: B018


def test_old_policy_factory_keeps_the_reference_default_relu(fresh_warnings):
    from maml_rl.utils.helpers import get_input_size, get_policy_for_env as old

    env = gym.make("2DNavigation-v0")
    torch.manual_seed(0)
    policy = old(env)
    assert get_input_size(env) == 2
    x = torch.randn(5, 2)
    params = dict(policy.named_parameters())
    hidden = torch.relu(torch.relu(x @ params["layer1.weight"].T + params["layer1.bias"]) @ params["layer2.weight"].T
                        + params["layer2.bias"])
    torch.testing.assert_close(policy(x).mean, hidden @ params["mu.weight"].T + params["mu.bias"], rtol=0, atol=0)
    assert [p.shape[0] for name, p in params.items() if name.endswith("bias")][:2] == [100, 100]


def tiny_batch():
    rewards = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 99.0]])  # 99 lies past episode 1's end
    observations = torch.arange(12.0).view(3, 2, 2) / 10
    actions = torch.tensor([[[0.1, -0.2], [0.3, 0.0]], [[0.5, 0.5], [-0.4, 0.2]], [[0.0, 1.0], [7.0, 7.0]]])
    return BatchEpisodes(observations, actions, rewards, [3, 2], gamma=0.9)


def test_get_returns_and_reinforce_loss_are_the_reference_ones(fresh_warnings):
    from maml_rl.utils.reinforcement_learning import get_returns, reinforce_loss

    batch = tiny_batch()
    np.testing.assert_array_equal(get_returns([batch, batch]), [[9.0, 6.0], [9.0, 6.0]])
    assert get_returns([batch]).dtype == np.float32

    torch.manual_seed(0)
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(4,))
    batch.compute_advantages(lambda episodes: torch.zeros(3, 2), normalize=False)
    # The reference's loss by hand: each episode's mean of -log pi * A over its steps, then the mean.
    per_episode = []
    for b, length in enumerate([3, 2]):
        terms = [-policy(batch.observations[t, b]).log_prob(batch.actions[t, b]) * batch.advantages[t, b]
                 for t in range(length)]
        per_episode.append(sum(terms) / length)
    torch.testing.assert_close(reinforce_loss(policy, batch), sum(per_episode) / 2, rtol=1e-6, atol=1e-6)


def reference_weighted_mean(tensor, lengths=None):
    """pytorch-maml-rl's maml_rl.utils.torch_utils.weighted_mean, verbatim (it zeroes its input in place)."""
    if lengths is None:
        return torch.mean(tensor)
    for i, length in enumerate(lengths):
        tensor[length:, i].fill_(0.)
    extra_dims = (1,) * (tensor.dim() - 2)
    lengths = torch.as_tensor(lengths, dtype=torch.float32)
    out = torch.sum(tensor, dim=0)
    out.div_(lengths.view(-1, *extra_dims))
    return out


def test_old_tensor_helpers(fresh_warnings):
    from maml_rl.utils.torch_utils import to_numpy, vector_to_parameters, weighted_mean

    for shape, lengths in (((5, 3), [1, 5, 3]), ((4, 2, 3), [4, 2]), ((1, 1), [1])):
        tensor = torch.randn(shape)
        kept = tensor.clone()
        got = weighted_mean(tensor, lengths)
        assert torch.equal(tensor, kept)  # not zeroed in place
        torch.testing.assert_close(got, reference_weighted_mean(kept.clone(), lengths), rtol=1e-6, atol=1e-6)
    assert weighted_mean(torch.ones(3, 2)) == 1
    np.testing.assert_array_equal(to_numpy([torch.ones(2), np.zeros(2)]), [[1, 1], [0, 0]])
    module = torch.nn.Linear(2, 1)
    vector_to_parameters(torch.arange(3.0), module.parameters())
    assert module.weight.tolist() == [[0.0, 1.0]] and module.bias.tolist() == [2.0]


# -------------------------------------------------------------- MAMLTRPO
def small_policy():
    torch.manual_seed(0)
    return NormalMLPPolicy(2, 2, hidden_sizes=(8,))


def test_reference_positional_order_is_read_as_the_reference_did(fresh_warnings):
    with pytest.warns(LegacyAPIWarning, match="third positional argument of MAMLTRPO is num_steps"):
        learner = MAMLTRPO(small_policy(), 0.1, True)
    assert (learner.fast_lr, learner.first_order, learner.num_steps) == (0.1, True, 1)
    learner = MAMLTRPO(small_policy(), 0.1, False, "cpu")
    assert (learner.first_order, learner.num_steps, str(learner.device)) == (False, 1, "cpu")
    with pytest.raises(TypeError, match="first_order twice"):
        MAMLTRPO(small_policy(), 0.1, False, True)
    with pytest.raises(TypeError, match="two devices"):
        MAMLTRPO(small_policy(), 0.1, True, "cpu", device="meta")
    # This package's own order: a device where first_order goes is refused, never read as True.
    with pytest.raises(TypeError, match="first_order must be a bool"):
        MAMLTRPO(small_policy(), 0.1, 1, "cpu")
    assert MAMLTRPO(small_policy(), 0.1, 2, True).num_steps == 2


@pytest.fixture(scope="module")
def navigation_episodes():
    """On-policy train/valid episodes of 2 navigation tasks, sampled in this process."""
    policy = small_policy()
    with MultiTaskSampler("2DNavigation-v0", {}, 3, policy, LinearFeatureBaseline(2), seed=5,
                          num_workers=0) as sampler:
        train, valid = sample_adapt_sample(sampler, sampler.sample_tasks(2), num_steps=1, fast_lr=0.1)
    return policy.state_dict(), train, valid


@pytest.mark.parametrize("settings", [dict(max_kl=1e-5, cg_iters=3), dict(ls_max_steps=1, ls_backtrack_ratio=0.1),
                                      dict(max_kl=0.5, cg_iters=2, cg_damping=1e-2, ls_max_steps=2,
                                           ls_backtrack_ratio=0.3)])
def test_trpo_settings_given_to_step_override_that_call(fresh_warnings, navigation_episodes, settings):
    state, train, valid = navigation_episodes
    reference = small_policy()
    reference.load_state_dict(state)
    expected = MAMLTRPO(reference, fast_lr=0.1, **settings).step(train, valid)

    policy = small_policy()
    policy.load_state_dict(state)
    learner = MAMLTRPO(policy, fast_lr=0.1)
    before = {name: getattr(learner, name) for name in settings}
    with pytest.warns(LegacyAPIWarning, match=r"MAMLTRPO\(policy, max_kl=\.\.\., \.\.\.\)"):
        logs = learner.step(train, valid, **settings)
    for name, p in reference.state_dict().items():
        assert torch.equal(p, policy.state_dict()[name]), name
    assert {k: v for k, v in logs.items() if not k.startswith("time")} == \
           {k: v for k, v in expected.items() if not k.startswith("time")}
    assert {name: getattr(learner, name) for name in settings} == before  # restored after the call


def test_unknown_step_keywords_are_refused(fresh_warnings, navigation_episodes):
    _, train, valid = navigation_episodes
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['max_kl_'\]"):
        MAMLTRPO(small_policy(), fast_lr=0.1).step(train, valid, max_kl_=0.1)


def test_steps_from_the_sampler_but_not_the_learner_say_how_to_fix_it(navigation_episodes):
    _, train, valid = navigation_episodes
    with pytest.raises(ValueError, match=r"MAMLTRPO\(policy, num_steps=\.\.\.\)"):
        MAMLTRPO(small_policy(), fast_lr=0.1, num_steps=2).step(train, valid)


# ----------------------------------------------------------------- sampler
def test_sampler_env_argument(fresh_warnings):
    policy = small_policy()
    env = gym.make("2DNavigation-v0")
    with pytest.warns(LegacyAPIWarning, match="env_fn="):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, env=env, num_workers=0).close()
    with pytest.raises(TypeError, match="got a TabularMDPEnv but env_name builds a Navigation2DEnv"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, env=gym.make("TabularMDP-v0"), num_workers=0)


def test_sample_async_returns_finished_episodes_equal_to_sample(fresh_warnings):
    policy = small_policy()
    results = []
    for legacy in (True, False):
        with MultiTaskSampler("2DNavigation-v0", {}, 2, policy, LinearFeatureBaseline(2), seed=3,
                              num_workers=0) as sampler:
            tasks = sampler.sample_tasks(2)
            if legacy:
                with pytest.warns(LegacyAPIWarning):
                    futures = sampler.sample_async(tasks, num_steps=1, fast_lr=0.1)
                    train, valid = sampler.sample_wait(futures)
                with pytest.raises(TypeError, match="what sample_async\\(\\) returned"):
                    sampler.sample_wait(train)
            else:
                train, valid = sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1)
        results.append((train, valid))
    (old_train, old_valid), (new_train, new_valid) = results
    for old, new in zip([*old_train[0], *old_valid], [*new_train[0], *new_valid]):
        assert torch.equal(old.observations, new.observations) and torch.equal(old.actions, new.actions)


# ----------------------------------------------------------- envs, files
@pytest.mark.parametrize("old_id", sorted(RETIRED_ENV_IDS))
def test_retired_env_ids_name_the_new_env_and_say_the_dynamics_differ(old_id):
    new_id = RETIRED_ENV_IDS[old_id]
    for make in (lambda: gym.make(old_id), lambda: make_env(old_id)):
        with pytest.raises(RetiredEnvError) as excinfo, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's own "out of date" line
            make()
        message = str(excinfo.value)
        assert f"use {new_id}" in message and "dynamics differ" in message and "not comparable" in message
        assert isinstance(excinfo.value, gym.error.DeprecatedEnv)
    assert new_id in gym.registry


def test_retired_env_id_in_a_config_is_a_config_error(tmp_path):
    from maml_rl.app.config_files import ConfigError

    path = tmp_path / "halfcheetah-vel.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "env-name": "HalfCheetahVel-v2"}))
    with pytest.raises(ConfigError, match=r"env-name: HalfCheetahVel-v2 .*use HalfCheetahVel-v5.*not comparable"):
        load_config(path)


def test_reference_config_json_loads_without_its_command_line_arguments(fresh_warnings, tmp_path):
    written = {**CONFIG, "config": "configs/maml/2d-navigation.yaml", "output_folder": "maml", "seed": None,
               "num_workers": 1, "use_cuda": False, "device": "cpu"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(written))
    with pytest.warns(LegacyAPIWarning, match="output_folder.*--output-folder"):
        config = load_config(path)
    assert config["seed"] is None and config["fast-lr"] == 0.1 and "output_folder" not in config


def reference_layout(policy_kind, sizes, generator):
    """A state dict as pytorch-maml-rl's policies name and shape theirs, written out by hand."""
    *hidden, output = sizes[1:]
    state = OrderedDict()
    layers = list(zip(sizes[:-1], sizes[1:]))
    for i, (fan_in, fan_out) in enumerate(layers[:-1] if policy_kind == "normal" else layers, start=1):
        state[f"layer{i}.weight"] = torch.randn(fan_out, fan_in, generator=generator)
        state[f"layer{i}.bias"] = torch.randn(fan_out, generator=generator)
    if policy_kind == "normal":
        state["mu.weight"] = torch.randn(output, sizes[-2], generator=generator)
        state["mu.bias"] = torch.randn(output, generator=generator)
        state["sigma"] = torch.tensor([-20.0, 0.3])  # below log(1e-6): the reference clamps it
    return state


def test_a_reference_trained_policy_file_loads_and_acts_as_it_did(tmp_path):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(6, 3, generator=generator)
    # Gaussian: tanh(W1 x + b1) -> tanh(W2 . + b2) -> mu; scale = exp(max(sigma, log 1e-6)).
    state = reference_layout("normal", [3, 5, 4, 2], generator)
    torch.save(state, tmp_path / "policy.th")
    policy = NormalMLPPolicy(3, 2, hidden_sizes=(5, 4), nonlinearity=torch.tanh)
    policy.load_state_dict(torch.load(tmp_path / "policy.th", weights_only=True))
    h = torch.tanh(torch.tanh(x @ state["layer1.weight"].T + state["layer1.bias"]) @ state["layer2.weight"].T
                   + state["layer2.bias"])
    pi = policy(x)
    torch.testing.assert_close(pi.mean, h @ state["mu.weight"].T + state["mu.bias"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(pi.stddev, torch.tensor([1e-6, np.exp(0.3)]).expand(6, 2).float(),
                               rtol=1e-6, atol=0)
    # Categorical: the last layer is layer{n} and gives the logits.
    state = reference_layout("categorical", [3, 5, 4], generator)
    torch.save(state, tmp_path / "policy.th")
    policy = CategoricalMLPPolicy(3, 4, hidden_sizes=(5,), nonlinearity=torch.relu)
    policy.load_state_dict(torch.load(tmp_path / "policy.th", weights_only=True))
    logits = torch.relu(x @ state["layer1.weight"].T + state["layer1.bias"]) @ state["layer2.weight"].T \
        + state["layer2.bias"]
    torch.testing.assert_close(policy(x).probs, torch.softmax(logits, -1), rtol=1e-6, atol=1e-6)


@pytest.mark.processes
def test_our_test_py_evaluates_a_reference_run_folder(tmp_path):
    """The reference's config.json (with its train.py's arguments) and policy.th, as they lie in its run folder."""
    folder = tmp_path / "maml"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**CONFIG, "config": "x.yaml", "output_folder": "maml",
                                                    "seed": 1, "num_workers": 1, "use_cuda": False,
                                                    "device": "cpu"}))
    torch.save(reference_layout("normal", [2, 8, 8, 2], torch.Generator().manual_seed(0)), folder / "policy.th")
    result = run([ROOT / "test.py", "--config", folder / "config.json", "--meta-batch-size", "2", "--num-workers", "0"],
                 tmp_path)
    assert "LegacyAPIWarning" in result.stderr and "--output-folder" in result.stderr
    with np.load(folder / "results.npz") as results:
        assert np.isfinite(results["valid_returns"]).all()


# -------------------------------------------------------------- our code
OLD_MODULES = {"maml_rl.episode", "maml_rl.utils.helpers", "maml_rl.utils.reinforcement_learning"}
OLD_TENSOR_NAMES = {"weighted_mean", "to_numpy", "vector_to_parameters"}
LEGACY_FILES = {"tests/legacy/test_migration.py"}


def test_nothing_of_ours_uses_the_old_names():
    """Besides this file and maml_rl/legacy/: no import of the old paths, no call of the old methods.

    (The whole suite also turns a LegacyAPIWarning into an error: pyproject.toml's filterwarnings.)
    """
    # The tests' own files, not pytorch-maml-rl's scripts that test_reference_scripts_run_... runs verbatim.
    tests = [path for path in ROOT.glob("tests/**/*.py") if REFERENCE not in path.parents]
    files = [*ROOT.glob("maml_rl/**/*.py"), *tests, *ROOT.glob("benchmarks/*.py"), ROOT / "train.py", ROOT / "test.py"]
    offenders = []
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        if relative in LEGACY_FILES or relative.startswith("maml_rl/legacy/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in OLD_MODULES:
                offenders.append(f"{relative}:{node.lineno} from {node.module}")
            elif isinstance(node, ast.ImportFrom) and node.module == "maml_rl.utils.torch_utils" and \
                    OLD_TENSOR_NAMES & {alias.name for alias in node.names}:
                offenders.append(f"{relative}:{node.lineno} old tensor helper")
            elif isinstance(node, ast.Import) and OLD_MODULES & {alias.name for alias in node.names}:
                offenders.append(f"{relative}:{node.lineno} import")
            elif isinstance(node, ast.Attribute) and node.attr in ("sample_async", "sample_wait"):
                offenders.append(f"{relative}:{node.lineno} .{node.attr}")
    assert offenders == []
