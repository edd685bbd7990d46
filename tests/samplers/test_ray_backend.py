"""The Ray backend on a real multi-node cluster on this machine.

``ray.cluster_utils.Cluster`` starts a head (no CPUs: the driver's) and three
one-CPU nodes, each its own raylet and object store. The episodes must equal
the local sampler's bit for bit, whatever the number of actors, after a node
is lost mid-rollout, and across a resume; failures must say what failed, and
nothing may be left running.
"""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

import cloudpickle
import pytest
import torch

if os.environ.get("MAML_RL_REQUIRE_RAY"):
    import ray  # CI installs the extra: a missing Ray fails here instead of skipping
else:
    ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.data.baseline import LinearFeatureBaseline, fit_advantages
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample
from maml_rl.policies import CategoricalMLPPolicy, NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler, StepTimeoutError, WorkerDiedError, WorkerError
from maml_rl.samplers.backends.ray import _placement, _split
from helpers import ROOT, TESTS, bad_envs, differential_envs, naive_sampler, naive_trials, sampler_envs
from helpers.differential_trials import SHAPES as TRIAL_SHAPES, run_shapes as run_trial_shapes
from helpers.naive_sampler import UnbatchedElementwisePolicy
from helpers.process_utils import wait_until_gone
from helpers.runs import assert_same_policy, load_policy, read_metrics, run
from helpers.scripts import train

# One small cluster case runs in the quick tier (a Ray cluster of three nodes starts in it); the rest are slow. The
# module's cluster is started once, on one xdist worker.
pytestmark = [pytest.mark.ray, pytest.mark.processes, pytest.mark.xdist_group("ray")]

# The actors cannot import the tests' helpers package: the test envs travel by value,
# as code of a user's own main script does.
cloudpickle.register_pickle_by_value(sampler_envs)
cloudpickle.register_pickle_by_value(naive_sampler)
cloudpickle.register_pickle_by_value(differential_envs)
cloudpickle.register_pickle_by_value(naive_trials)
cloudpickle.register_pickle_by_value(bad_envs)

NODE_MEMORY = 80 * 2**20  # object store per node: small, the machine has 2 cores and little /dev/shm


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                       "object_store_memory": NODE_MEMORY})
    for _ in range(3):
        c.add_node(num_cpus=1, object_store_memory=NODE_MEMORY)
    # add_node returns before the head has registered the node: on a loaded machine the first test saw two of
    # the three ("the cluster has room for 2 sampling actors").
    c.wait_for_nodes()
    ray.init(address=c.address)
    yield c
    ray.shutdown()
    c.shutdown()


def _worker_nodes(c):
    return [n for n in c.list_all_nodes() if n is not c.head_node]


def _episodes(sampler, tasks, steps=1):
    """Two sample() calls (adaptation included) and a rollout under per-task parameters."""
    train, valid = sample_adapt_sample(sampler, tasks, num_steps=steps, fast_lr=0.1)
    train2, valid2 = sample_adapt_sample(sampler, tasks, num_steps=steps, fast_lr=0.1)
    return [*train, valid, *train2, valid2]


def _assert_equal(a, b):
    assert len(a) == len(b)
    for batches_a, batches_b in zip(a, b):
        for x, y in zip(batches_a, batches_b):
            for name in ("observations", "actions", "rewards", "lengths", "advantages"):
                assert torch.equal(getattr(x, name), getattr(y, name)), name


def _run(env, policy_fn, batch_size, num_tasks, stats=None, **kwargs):
    """The episodes of ``_episodes`` and the sampler's state; ``stats`` gets its ``backend_stats`` after them."""
    policy = policy_fn()
    obs = policy.input_size if hasattr(policy, "input_size") else 3
    with MultiTaskSampler(env, {}, batch_size, policy, LinearFeatureBaseline(obs), seed=7, **kwargs) as sampler:
        tasks = sampler.sample_tasks(num_tasks)
        episodes = _episodes(sampler, tasks)
        if stats is not None:
            stats.update(sampler.backend_stats)
        return episodes, sampler.state_dict()


def _mlp(obs, act, discrete=False):
    def make():
        torch.manual_seed(0)
        if discrete:
            return CategoricalMLPPolicy(obs, act, hidden_sizes=(16,))
        return NormalMLPPolicy(obs, act, hidden_sizes=(32, 32))
    return make


CASES = {
    # env, policy, batch size, tasks, numbers of actors
    # The quick tier's case: two actors, 5 tasks split 3 + 2. It ran one, two and three actors until the Ray
    # test was a seventh of the quick tier's time: those layouts are halfcheetah's (full tier), and three actors
    # the three cases below.
    "navigation": ("2DNavigation-v0", _mlp(2, 2), 4, 5, (2,)),
    # The MuJoCo fast path inside each actor.
    "halfcheetah": ("HalfCheetahVel-v5", _mlp(20, 6), 2, 3, (1, 2, 3)),
    # One episode per task: one-row policy calls, the case torch computes differently.
    "navigation-B1": ("2DNavigation-v0", _mlp(2, 2), 1, 4, (3,)),
    # Fewer tasks than actors.
    "navigation-one-task": ("2DNavigation-v0", _mlp(2, 2), 3, 1, (3,)),
    "bandit": ("Bandit-K5-v0", _mlp(1, 5, discrete=True), 6, 4, (3,)),
}
# One actor (every task in one group: the local call's layout, sent and returned whole) runs in halfcheetah's
# case above and in the trials' degenerate shapes; the tests below split their tasks over three actors, which
# sends and returns the same payloads group by group and also checks the split. They ran one actor as well,
# a second set of actors started per test for no code path of its own (the backend has no one-actor branch).


@pytest.mark.parametrize("case", [pytest.param(case, marks=() if case == "navigation" else pytest.mark.slow)
                                  for case in sorted(CASES)])
def test_episodes_equal_the_local_sampler_for_one_two_three_actors(cluster, case, monkeypatch):
    """... and the driver puts the parameters into the object store once per rollout (ray.put counted here),
    the same bytes whatever the number of actors."""
    env, policy_fn, B, K, actor_counts = CASES[case]
    kwargs = {"max_episode_steps": 20} if env.startswith("HalfCheetah") else {}
    local, local_state = _run(env, policy_fn, B, K, num_workers=0, **kwargs)
    assert local_state["num_rollouts"] == 4  # two calls of sample_adapt_sample: a rollout before and after
    puts, put = [], ray.put
    monkeypatch.setattr(ray, "put", lambda value, **options: (puts.append(value), put(value, **options))[1])
    sizes = set()
    for actors in actor_counts:
        puts.clear()
        stats = {}
        remote, state = _run(env, policy_fn, B, K, stats, backend="ray", ray_actors=actors, **kwargs)
        _assert_equal(local, remote)
        assert state["num_rollouts"] == local_state["num_rollouts"] == len(puts)
        # The last rollout's: adapted parameters of K tasks, K copies of the policy's, plus its own state.
        per_copy = sum(p.numel() * 4 for p in policy_fn().parameters())
        assert stats["actors"] == actors
        assert stats["put_bytes"] == (K + 1) * per_copy
        sizes.add((stats["put_bytes"], stats["result_bytes"]))
    assert len(sizes) == 1


@pytest.mark.slow
def test_info_values_and_mean_actions_cross_the_cluster_bit_identically(cluster, drift_sampler):
    """The env's info keys (a bool and a float) come back from the actors as they do locally; and a later
    rollout with actions="mean" reaches the actors: its episodes equal the local ones and the naive reference's."""
    mean_tasks = [{"offset": 0.2, "length": None}, {"offset": -0.5, "length": 3}, {"offset": 0.7, "length": 9}]

    def run(**kwargs):
        policy = naive_sampler.ElementwisePolicy(2, discrete=False)
        with drift_sampler(False, 6, 3, policy=policy, baseline=LinearFeatureBaseline(3), seed=4, **kwargs) as sampler:
            assert sampler.info_keys == ("near", "x")
            episodes = _episodes(sampler, sampler.sample_tasks(4))
            assert sampler.state_dict()["num_rollouts"] == 4
            return episodes, sampler.rollout(mean_tasks, actions="mean")

    local, local_mean = run(num_workers=0)
    assert any(bool(batch.success("near").any()) for batches in local for batch in batches)
    reference = naive_sampler.reference_rollout(differential_envs.factory(False, 6),
                                                naive_sampler.ElementwisePolicy(2, discrete=False), mean_tasks, 3, 4,
                                                4, 6, actions="mean")
    for batch, want in zip(local_mean, reference):
        assert torch.equal(batch.actions, want["actions"])
    actors = 3
    remote, remote_mean = run(backend="ray", ray_actors=actors)
    for batches_a, batches_b in zip(local, remote):
        for x, y in zip(batches_a, batches_b):
            assert list(x.infos) == list(y.infos) == ["near", "x"]
            assert all(torch.equal(x.infos[key], y.infos[key]) for key in x.infos)
    for x, y in zip(local_mean, remote_mean):
        assert y.actions_from == "mean"
        assert torch.equal(x.actions, y.actions) and torch.equal(x.observations, y.observations)


@pytest.mark.slow
def test_partial_mode_and_worker_processes_inside_the_actors(cluster):
    env, policy_fn, B, K, _ = CASES["navigation"]
    local, _ = _run(env, policy_fn, B, K, num_workers=2)
    remote, _ = _run(env, policy_fn, B, K, backend="ray", num_workers=2, partial=True, start_method="spawn")
    _assert_equal(local, remote)


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_a_users_plain_policy_gives_the_local_bits_on_three_actors(cluster, batch_size):
    """A plain nn.Module MLP (row-count-dependent bits): actions differed from
    step 0 on Ray with 1-3 episodes per task, before one call per task everywhere (the row counts checked here)."""
    def run(**kwargs):
        policy = naive_sampler.PlainMLP(20, 6)
        with MultiTaskSampler("HalfCheetahVel-v5", {}, batch_size, policy, None, seed=5, max_episode_steps=10,
                              **kwargs) as sampler:
            tasks = sampler.sample_tasks(5)
            own = [{n: p.detach().clone() for n, p in policy.named_parameters()} for _ in tasks]
            return [sampler.rollout(tasks), sampler.rollout(tasks, params=own)]

    local = run(num_workers=0)
    actors = 3
    remote = run(backend="ray", ray_actors=actors)
    for a, b in zip(local, remote):
        for x, y in zip(a, b):
            for name in ("observations", "actions", "rewards", "lengths"):
                assert torch.equal(getattr(x, name), getattr(y, name)), (actors, name)


@pytest.mark.slow
def test_a_policy_without_stacked_parameters_is_split_invariant(cluster, probe_sampler):
    # Evaluated once per task, by the actors and locally alike.
    def make():
        return UnbatchedElementwisePolicy(1, discrete=False)

    def run(**kwargs):
        with probe_sampler(3, make(), LinearFeatureBaseline(3), seed=2, **kwargs) as sampler:
            return _episodes(sampler, sampler.sample_tasks(5))

    local = run(num_workers=0)
    _assert_equal(local, run(backend="ray", ray_actors=3))


@pytest.mark.slow
def test_a_ray_run_resumes_locally_and_the_reverse(cluster):
    env, policy_fn, B, K, _ = CASES["navigation"]

    def sampler(**kwargs):
        return MultiTaskSampler(env, {}, B, policy_fn(), LinearFeatureBaseline(2), seed=11, **kwargs)

    with sampler(num_workers=0) as straight:
        expected = [_episodes(straight, straight.sample_tasks(K)) for _ in range(2)]
    with sampler(backend="ray") as first:
        got = [_episodes(first, first.sample_tasks(K))]
        state = first.state_dict()
    with sampler(num_workers=0) as second:
        second.load_state_dict(state)
        got.append(_episodes(second, second.sample_tasks(K)))
    for a, b in zip(expected, got):
        _assert_equal(a, b)
    with sampler(num_workers=0) as first:
        _episodes(first, first.sample_tasks(K))
        state = first.state_dict()
    with sampler(backend="ray", ray_actors=2) as second:
        second.load_state_dict(state)
        _assert_equal(expected[1], _episodes(second, second.sample_tasks(K)))


def _sleepy_tasks(num_tasks, sleep=0.05, length=6):
    return [{"value": 0.1 * k, "length": length, "sleep": sleep} for k in range(num_tasks)]


@pytest.mark.slow
def test_a_node_lost_mid_rollout_gives_the_undisturbed_result(cluster, probe_sampler):
    tasks = _sleepy_tasks(6)

    def make(**kwargs):
        return probe_sampler(2, NormalMLPPolicy(3, 1, hidden_sizes=(8,)), LinearFeatureBaseline(3), seed=5, **kwargs)

    def rollout(sampler):
        episodes = sampler.rollout(tasks)
        fit_advantages(episodes, sampler.baseline)
        return episodes

    torch.manual_seed(0)
    with make(num_workers=0) as sampler:
        expected = [rollout(sampler), rollout(sampler)]
    torch.manual_seed(0)
    with make(backend="ray") as sampler:
        victim = _worker_nodes(cluster)[-1]
        pids = {w["pid"] for w in sampler.rollout_backend.where}
        remover = threading.Timer(0.15, cluster.remove_node, args=(victim,))
        remover.start()  # mid-rollout: each actor's group takes 6 steps x 0.05 s x 2 slots
        started = time.monotonic()
        first = rollout(sampler)
        elapsed = time.monotonic() - started
        remover.join()
        stats = sampler.backend_stats
        assert stats["reruns"] == 1, stats
        assert len(sampler.rollout_backend.live) == 2 and "node has died" in sampler.rollout_backend.lost[0]
        assert elapsed < 20, elapsed
        second = rollout(sampler)  # on the two survivors
        assert sampler.backend_stats["actors"] == 2
    _assert_equal(expected, [first, second])
    assert wait_until_gone(pids) == []
    cluster.add_node(num_cpus=1, object_store_memory=NODE_MEMORY)
    cluster.wait_for_nodes()


@pytest.mark.slow
def test_every_actor_dying_raises_naming_them_and_the_next_call_starts_afresh(cluster, probe_sampler):
    with probe_sampler(1, backend="ray") as sampler:
        started = time.monotonic()
        with pytest.raises(WorkerDiedError, match="every Ray sampling actor has died") as info:
            sampler.rollout([{"value": 0.0, "length": 5, "kill_at": 2}] * 3)
        assert time.monotonic() - started < 20
        assert info.value.args[0].count("Ray sampling actor") >= 3 and "died" in info.value.args[0]
        episodes = sampler.rollout([{"value": 0.0, "length": 5}] * 3)
        assert [int(b.lengths[0]) for b in episodes] == [5, 5, 5]


@pytest.mark.slow
def test_a_childenv_lost_inside_a_live_actor_reruns_its_group_and_twice_is_raised(cluster, tmp_path, probe_sampler):
    marker = str(tmp_path / "killed")
    tasks = [{"value": float(k), "length": 5} for k in range(3)]

    def make(**kwargs):
        return probe_sampler(2, NormalMLPPolicy(3, 1, hidden_sizes=(8,)), seed=5, **kwargs)

    torch.manual_seed(0)
    with make(num_workers=1) as sampler:  # the envs in a ChildEnv process, as in the actors
        expected = [sampler.rollout(tasks)]
    torch.manual_seed(0)
    with make(backend="ray", ray_actors=3, num_workers=1) as sampler:
        pids = set(sampler.rollout_backend.worker_pids)
        first = sampler.rollout(tasks[:2] + [dict(tasks[2], kill_once=marker)])
        assert os.path.exists(marker) and sampler.backend_stats["reruns"] == 1
        assert set(sampler.rollout_backend.worker_pids) == pids  # every actor still serves
        # The same env killing its ChildEnv every time: raised, naming the actor; usable afterwards.
        with pytest.raises(WorkerDiedError, match="Ray sampling actor"):
            sampler.rollout([{"value": 0.0, "length": 5, "kill_at": 2}])
        assert sampler.rollout(tasks[:1])[0].lengths.tolist() == [5, 5]
    for a, b in zip(expected[0], first):
        for name in ("observations", "actions", "rewards", "lengths"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.slow
def test_an_env_error_in_an_actor_is_the_local_worker_error(cluster, probe_sampler):
    tasks = [{"value": 0.0, "length": 5}] * 3 + [{"value": 1.0, "length": 5, "fail": "step"}]
    with probe_sampler(num_workers=0) as sampler:
        with pytest.raises(WorkerError) as local:
            sampler.rollout(tasks)
    with probe_sampler(backend="ray", ray_actors=2) as sampler:
        with pytest.raises(WorkerError) as remote:
            sampler.rollout(tasks)
        message = str(remote.value)
        # The same slot (6, the first of task 3) and task as locally, the actor, the traceback.
        where = "during step 2 in env slot 6 (task {'value': 1.0, 'length': 5, 'fail': 'step'})"
        assert where in str(local.value) and where in message and "Traceback" in message
        assert "Ray sampling actor 1" in message and "told to fail in step" in message
        assert sampler.rollout(tasks[:3])[0].lengths.tolist() == [5, 5]  # usable afterwards


@pytest.mark.slow
def test_a_hanging_step_in_an_actor_is_the_local_step_timeout_error(cluster):
    # One worker process inside each actor (a 1-CPU actor steps its envs in its own process by default,
    # where a step cannot be interrupted).
    tasks = [{}, {}, {}, {"hang_at": 2}]
    with MultiTaskSampler(None, None, 2, NormalMLPPolicy(2, 1), None, env_fn=bad_envs.make_hanging_env, seed=0,
                          backend="ray", ray_actors=2, num_workers=1, step_timeout=1.0) as sampler:
        with pytest.raises(StepTimeoutError) as info:
            sampler.rollout(tasks)
        message = str(info.value)
        # Actor 1 rolls out tasks 2 and 3 (slots 4-7): the slot is numbered in the whole call.
        assert "Ray sampling actor 1" in message and "ChildEnv worker 0 (pid " in message, message
        assert "during step 2 in env slot 6 (task {'hang_at': 2})" in message, message
        assert (info.value.worker, info.value.slot, info.value.task) == (0, 6, {"hang_at": 2})
        assert len(sampler.rollout(tasks[:3])) == 3  # usable afterwards


def _descendants(pids):
    """Every running process whose ancestry includes one of ``pids``."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    found, frontier = set(), set(pids)
    while frontier:
        children = {p for p, parent in parents.items() if parent in frontier and p not in found}
        found |= children
        frontier = children
    return found


@pytest.mark.slow
@pytest.mark.parametrize("how", ["close", "garbage collection"])
def test_no_actor_or_worker_process_outlives_the_sampler(cluster, how, probe_sampler):
    sampler = probe_sampler(backend="ray", num_workers=2)
    sampler.rollout([{"value": 0.0, "length": 4}] * 4)
    actors = [w["pid"] for w in sampler.rollout_backend.where]
    workers = _descendants(actors)
    assert len(workers) >= 2 * len(actors)  # the ChildEnv processes (and their forkserver)
    if how == "close":
        sampler.close()
    else:
        del sampler
        gc.collect()
    assert wait_until_gone(actors + sorted(workers)) == []


INTERRUPTED_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import cloudpickle
from helpers import sampler_envs
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from helpers.sampler_envs import make_probe_env

cloudpickle.register_pickle_by_value(sampler_envs)

if __name__ == "__main__":
    sampler = MultiTaskSampler(None, None, 2, NormalMLPPolicy(3, 1), None, env_fn=make_probe_env,
                               backend="ray", ray_address={address!r}, num_workers=2)
    tasks = [{{"value": 0.0, "length": 6, "sleep": 0.01}}] * 3
    sampler.rollout(tasks)
    print(*[w["pid"] for w in sampler.rollout_backend.where], flush=True)
    while True:
        sampler.rollout(tasks)
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_or_killed_driver_leaves_nothing_running(cluster, signum):
    script = INTERRUPTED_SCRIPT.format(tests=str(TESTS), address=cluster.address)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT)
    try:
        line = process.stdout.readline()
        actors = [int(pid) for pid in line.split()]
        assert len(actors) == 3, (line, process.stderr.read() if process.poll() is not None else "")
        workers = _descendants(actors)
        time.sleep(0.3)  # mid-rollout
        process.send_signal(signum)
        process.wait(timeout=30)
        assert wait_until_gone(actors + sorted(workers), timeout=30) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_bad_ray_arguments_are_refused_with_what_to_do(cluster):
    policy = NormalMLPPolicy(2, 2)
    with pytest.raises(ValueError, match="backend must be one of"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, backend="dask")
    with pytest.raises(ValueError, match="apply to backend='ray' only"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, ray_actors=2)
    with pytest.raises(ValueError, match="ray_actors must be a positive int"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, backend="ray", ray_actors=0)
    with pytest.raises(ValueError, match="room for 3 sampling actor"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, backend="ray", ray_actors=4)
    with pytest.raises(ValueError, match="no node with 2 free CPU.*lower ray_cpus_per_actor"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, policy, backend="ray", ray_cpus_per_actor=2)


def test_missing_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ray\]"'):
        MultiTaskSampler("2DNavigation-v0", {}, 2, NormalMLPPolicy(2, 2), backend="ray")


@pytest.mark.slow
def test_task_groups_follow_the_cpus_and_actors_spread_over_nodes():
    assert _split(7, [1, 1, 1]) == [(0, 2), (2, 5), (5, 7)]
    assert _split(4, [2, 1, 1]) == [(0, 2), (2, 3), (3, 4)]
    assert _split(1, [1, 1, 1]) == [(0, 0), (0, 1), (1, 1)]
    assert _split(3, [1, 1], offset=5) == [(5, 7), (7, 8)]
    nodes = [
        {"NodeID": "h", "NodeManagerAddress": "10.0.0.1", "Alive": True, "Resources": {}},
        {"NodeID": "a", "NodeManagerAddress": "10.0.0.2", "Alive": True, "Resources": {"CPU": 4.0}},
        {"NodeID": "b", "NodeManagerAddress": "10.0.0.3", "Alive": True, "Resources": {"CPU": 2.0}},
        {"NodeID": "c", "NodeManagerAddress": "10.0.0.4", "Alive": False, "Resources": {"CPU": 8.0}},
    ]
    assert _placement(nodes, None, None) == [("a", 4), ("b", 2)]
    assert _placement(nodes, None, 2) == [("a", 2), ("b", 2), ("a", 2)]
    assert _placement(nodes, 2, 1) == [("a", 1), ("b", 1)]
    assert _placement(nodes, None, 3) == [("a", 3)]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["maml-trpo", "rl2-ppo"])
def test_train_py_on_ray_resumes_locally_as_one_uninterrupted_run(cluster, tmp_path, algorithm, small_config,
                                                                  small_rl2_config):
    config = small_config(tmp_path) if algorithm == "maml-trpo" else small_rl2_config(tmp_path)
    run(config, tmp_path / "local", "--seed", "7", "--num-batches", "2")
    run(config, tmp_path / "mixed", "--seed", "7", "--num-batches", "1", "--backend", "ray",
        "--ray-address", cluster.address)
    run(config, tmp_path / "mixed", "--resume", "--num-batches", "2")
    assert_same_policy(load_policy(tmp_path / "mixed"), load_policy(tmp_path / "local"))
    for a, b in zip(read_metrics(tmp_path / "mixed"), read_metrics(tmp_path / "local"), strict=True):
        assert {k: v for k, v in a.items() if not k.startswith("time")} == {
            k: v for k, v in b.items() if not k.startswith("time")}


def test_ray_options_without_the_ray_backend_are_refused(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--ray-address", "auto"])
    assert "--ray-address need(s) --backend ray" in capsys.readouterr().err


@pytest.mark.slow
def test_trials_of_a_recurrent_policy_equal_the_local_ones_on_three_actors(cluster):
    """RL² trials (states, log-probs, the continuation from adapted states) cross the cluster bit for bit."""
    from maml_rl.policies import GRUPolicy, rl2_input_size
    from maml_rl.data.trials import stack_start

    def run(**kwargs):
        torch.manual_seed(0)
        policy = GRUPolicy(rl2_input_size(2, 2), 2, (16,), 8)
        with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 6}, 2, policy, seed=3, **kwargs) as sampler:
            tasks = sampler.sample_tasks(4)
            adapted = sampler.rollout_trials(tasks, 3, chunk=4, reward_scale=0.1)
            continued = sampler.rollout_trials(tasks, 1, start=stack_start(adapted), actions="mean")
            return [adapted, continued]

    local = run(num_workers=0)
    actors = 3
    remote = run(backend="ray", ray_actors=actors)
    for a, b in zip(local, remote):
        for x, y in zip(a, b):
            for name in ("observations", "actions", "rewards", "dones", "lengths", "log_probs", "final_state"):
                assert torch.equal(getattr(x, name), getattr(y, name)), (actors, name)
            assert x.chunk_states is None or torch.equal(x.chunk_states, y.chunk_states)


@pytest.mark.slow
def test_trials_of_the_transformer_equal_the_local_ones_on_three_actors(cluster):
    """The Transformer steps all tasks of a call at once; actors group the tasks otherwise (3 actors: 2, 1 and 1
    tasks, a lone task paired with a zero one), and its trials, with and without the context reset at each
    attempt, equal the local ones bit for bit."""
    from maml_rl.policies.trial_inputs import InputFormat
    from maml_rl.policies.transformer import TransformerPolicy

    def run(**kwargs):
        torch.manual_seed(0)
        policy = TransformerPolicy(InputFormat().size(2, 2), 2, d_model=16, num_layers=2, num_heads=4)
        with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 7}, 2, policy, seed=3, **kwargs) as sampler:
            tasks = sampler.sample_tasks(4)
            return [sampler.rollout_trials(tasks, 3, inputs=InputFormat(reward_scale=0.1), reset_each_episode=reset)
                    for reset in (False, True)]

    local = run(num_workers=0)
    actors = 3
    remote = run(backend="ray", ray_actors=actors)
    for a, b in zip(local, remote):
        for x, y in zip(a, b):
            assert x.log_probs.shape[0] == 21
            for name in ("observations", "actions", "rewards", "dones", "lengths", "log_probs"):
                assert torch.equal(getattr(x, name), getattr(y, name)), (actors, name)


@pytest.mark.slow
@pytest.mark.parametrize("actors, discrete", [(1, False), (3, True)], ids=["1-actor-continuous", "3-actors-discrete"])
def test_ray_trials_equal_the_naive_reference_over_the_degenerate_shapes(cluster, actors, discrete):
    """The trials' differential test (one task, one trial, horizon 1, episodes ending at step 1, ...)
    against the plain-loop reference, on the cluster."""
    run_trial_shapes(discrete, TRIAL_SHAPES, backend="ray", ray_actors=actors)


@pytest.mark.slow
def test_a_node_lost_mid_trials_gives_the_undisturbed_result(cluster, probe_sampler):
    """Trials of a recurrent policy rerun on the survivors from the states the call started with."""
    from maml_rl.policies import GRUPolicy, rl2_input_size

    tasks = _sleepy_tasks(6)
    names = ("observations", "actions", "rewards", "dones", "lengths", "log_probs", "final_state", "chunk_states")

    def run(**kwargs):
        torch.manual_seed(0)
        policy = GRUPolicy(rl2_input_size(3, 1), 1, (8,), 4)
        with probe_sampler(2, policy, seed=5, **kwargs) as sampler:
            if kwargs.get("backend") != "ray":
                return [sampler.rollout_trials(tasks, 2, chunk=5), sampler.rollout_trials(tasks, 2, chunk=5)]
            victim = _worker_nodes(cluster)[-1]
            pids = {w["pid"] for w in sampler.rollout_backend.where}
            remover = threading.Timer(0.3, cluster.remove_node, args=(victim,))
            remover.start()  # mid-call: each actor's group takes 2 x 6 steps x 0.05 s x 2 slots
            first = sampler.rollout_trials(tasks, 2, chunk=5)
            remover.join()
            assert sampler.backend_stats["reruns"] == 1, sampler.backend_stats
            assert len(sampler.rollout_backend.live) == 2
            second = sampler.rollout_trials(tasks, 2, chunk=5)
        assert wait_until_gone(pids) == []
        return [first, second]

    expected = run(num_workers=0)
    got = run(backend="ray")
    for a, b in zip(expected, got):
        for x, y in zip(a, b):
            for name in names:
                assert torch.equal(getattr(x, name), getattr(y, name)), name
    cluster.add_node(num_cpus=1, object_store_memory=NODE_MEMORY)
    cluster.wait_for_nodes()


@pytest.mark.slow
def test_seeds_side_by_side_on_the_cluster_equal_seeds_one_after_another(cluster, tmp_path, small_config):
    """train.py --seeds on Ray: the seeds' runs, trained in chunks on the worker nodes (a head with no CPUs
    here, so never on the driver's node) and written back here, equal the local runs bit for bit; a stop
    between chunks resumes, and a finished run is left as it is."""
    from maml_rl.app.config_files import ConfigError

    config = small_config(tmp_path)
    run(config, tmp_path / "local", "--seeds", "4", "5", "--num-batches", "3")

    ray_args = ["--config", str(config), "--output-folder", str(tmp_path / "ray"), "--seeds", "4", "5",
                "--backend", "ray", "--ray-address", cluster.address, "--num-workers", "0", "--seed-chunk", "1"]
    train.main([*ray_args, "--num-batches", "2"])
    assert [json.loads(line)["iteration"] for line in (tmp_path / "ray" / "seed-4" / "metrics.jsonl")
            .read_text().splitlines()] == [0, 1]
    train.main([*ray_args, "--num-batches", "3", "--resume"])
    for seed in (4, 5):
        local, remote = tmp_path / "local" / f"seed-{seed}", tmp_path / "ray" / f"seed-{seed}"
        assert_same_policy(load_policy(remote), load_policy(local))
        for a, b in zip(read_metrics(remote), read_metrics(local), strict=True):
            assert {k: v for k, v in a.items() if not k.startswith("time")} == {
                k: v for k, v in b.items() if not k.startswith("time")}
    assert not torch.equal(load_policy(tmp_path / "ray" / "seed-4")["sigma"],
                           load_policy(tmp_path / "ray" / "seed-5")["sigma"])
    before = (tmp_path / "ray" / "seed-4" / "checkpoint.pt").stat().st_mtime_ns
    train.main([*ray_args, "--num-batches", "3", "--resume"])
    assert (tmp_path / "ray" / "seed-4" / "checkpoint.pt").stat().st_mtime_ns == before
    with pytest.raises(ConfigError, match="already holds a training run"):
        train.main(ray_args)
    # --overwrite over finished runs trains them again from scratch (new files), to the same bits.
    train.main([*ray_args, "--num-batches", "3", "--overwrite", "--seed-chunk", "3"])
    assert (tmp_path / "ray" / "seed-4" / "checkpoint.pt").stat().st_mtime_ns != before
    for seed in (4, 5):
        assert_same_policy(load_policy(tmp_path / "ray" / f"seed-{seed}"), load_policy(tmp_path / "local" / f"seed-{seed}"))
        assert [row["iteration"] for row in read_metrics(tmp_path / "ray" / f"seed-{seed}")] == [0, 1, 2]


@pytest.mark.slow
def test_transitions_and_conditioning_are_the_local_ones_on_the_cluster(cluster):
    """Off-policy collection across nodes: each slot's z reaches its task's actor group, and the
    transitions (final observations of truncated episodes included) equal the local ones bit for bit."""
    from maml_rl.policies.tanh_gaussian import TanhGaussianPolicy

    torch.manual_seed(3)
    actor = TanhGaussianPolicy(2 + 3, 2, (8,))
    z = torch.randn(4, 2, 3)
    out = []
    for kwargs in ({"num_workers": 0}, {"backend": "ray", "ray_address": cluster.address, "num_workers": 0}):
        with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 6}, 2, actor, seed=4, conditioning_size=3,
                              **kwargs) as sampler:
            out.append(sampler.rollout_transitions(sampler.sample_tasks(4), episodes=2, conditioning=z))
            if kwargs.get("backend") == "ray":
                assert sampler.backend_stats["actors"] >= 2
    for local, remote in zip(*out):
        assert int(local.truncated.sum()) == 4
        for name in ("observations", "actions", "rewards", "next_observations", "terminated", "truncated"):
            assert torch.equal(getattr(local, name), getattr(remote, name)), name
