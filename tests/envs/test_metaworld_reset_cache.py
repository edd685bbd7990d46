"""A fast Meta-World env's replayed reset (``metaworld_fast/reset_cache.py``) against Meta-World's own reset.

The independent truth is Meta-World's own class, as installed, reset and stepped with the same actions: after
every reset, replayed or real, the fast env's observation, its MuJoCo integration state and every attribute the
reset assigns must equal Meta-World's bit for bit, and so must every later step. Replays must really happen (the
snapshot is kept), and must not where the task changed in between or the reset drew a random number.
"""

import copy
import os
import pickle

import numpy as np
import pytest

if os.environ.get("MAML_RL_REQUIRE_METAWORLD"):
    import metaworld  # CI installs the extra: a missing Meta-World fails here instead of skipping
else:
    metaworld = pytest.importorskip("metaworld")
import metaworld.env_dict
import mujoco

from maml_rl.envs.metaworld import _metaworld_task
from maml_rl.envs.metaworld_fast import fast_class
from maml_rl.envs.metaworld_fast.reset_cache import REPLAYS, cached_reset, forget_reset

from helpers.metaworld_classes import by_class, first_goals

pytestmark = pytest.mark.metaworld
replays = pytest.mark.skipif(not REPLAYS, reason=f"MuJoCo {mujoco.__version__}: resets are not replayed before 4.0")


@pytest.mark.skipif(REPLAYS, reason="MuJoCo >= 4: resets are replayed")
def test_before_mujoco_4_every_reset_is_real():
    """On MuJoCo 3.3 two real resets of one task leave different integration states: nothing is replayed."""
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS["push-v3"]
    assert fast_class(cls).reset is not cached_reset
    env = fast_class(cls)()
    env.set_task(_metaworld_task("push-v3", first_goals("push-v3", 1)[0]))
    env.reset()
    env.reset()
    assert "_fast_reset_snapshot" not in env.__dict__
    env.close()

ML10_CLASSES = sorted(set(metaworld.env_dict.ML10_V3["train"]) | set(metaworld.env_dict.ML10_V3["test"]))
QUICK_CLASSES = ("reach-v3", "push-v3", "pick-place-v3")
INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION


def same(a, b) -> bool:
    """Equal type and bits."""
    return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def integration_state(env) -> bytes:
    state = np.empty(mujoco.mj_stateSize(env.model, INTEGRATION))
    mujoco.mj_getState(env.model, env.data, state, INTEGRATION)
    return state.tobytes()


class Pair:
    """Meta-World's own env and the fast one, driven together and compared after every call."""

    def __init__(self, name: str):
        cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
        self.name = name
        self.theirs, self.mine = cls(), fast_class(cls)()
        self.goals = first_goals(name, 2)
        self.rng = np.random.default_rng(len(name))
        self.replays = 0

    def set_task(self, k: int) -> None:
        for env in (self.theirs, self.mine):
            env.set_task(_metaworld_task(self.name, self.goals[k]))

    def reset(self) -> bool:
        """Reset both; whether the fast env replayed its snapshot."""
        before = self.mine.__dict__.get("_fast_reset_snapshot")
        (o1, i1), (o2, i2) = self.theirs.reset(), self.mine.reset()
        replayed = before is not None and self.mine.__dict__.get("_fast_reset_snapshot") is before
        self.replays += replayed
        assert same(o1, o2) and i1 == i2, f"{self.name}: the reset's observation"
        assert integration_state(self.theirs) == integration_state(self.mine), f"{self.name}: the reset's state"
        snapshot = self.mine.__dict__["_fast_reset_snapshot"]
        assigned = [*snapshot.attributes, *snapshot.arrays]
        assert {"curr_path_length", "_prev_obs", "_target_pos"} <= set(assigned)
        for name in assigned:
            a, b = getattr(self.theirs, name), getattr(self.mine, name)
            assert same(a, b), f"{self.name}: {name} after the reset: {a!r} != {b!r}"
        return replayed

    def steps(self, count: int) -> bool:
        truncated = False
        for t in range(count):
            action = self.rng.uniform(-1, 1, 4).astype(np.float32)
            r1, r2 = self.theirs.step(action.copy()), self.mine.step(action.copy())
            for k, (a, b) in enumerate(zip(r1[:4], r2[:4])):
                assert same(a, b), f"{self.name} step {t}: {('observation', 'reward', 'terminated', 'truncated')[k]}"
            assert r1[4].keys() == r2[4].keys() and all(same(r1[4][k], r2[4][k]) for k in r1[4])
            truncated = r1[3]
        return truncated

    def close(self) -> None:
        self.theirs.close()
        self.mine.close()


@replays
@pytest.mark.parametrize("name", by_class(sorted(set(ML10_CLASSES) | set(QUICK_CLASSES)),
                                          slow=lambda name: name not in QUICK_CLASSES))
def test_a_replayed_reset_equals_metaworlds_own(name):
    pair = Pair(name)
    pair.set_task(0)
    assert not pair.reset()  # the first: real
    pair.steps(40)
    assert pair.reset()  # same task: replayed
    assert pair.reset()  # two in a row, no step between
    pair.steps(1)
    pair.set_task(1)
    assert not pair.reset()  # another task: real
    pair.steps(60)
    pair.set_task(0)
    assert not pair.reset()  # back to the first: real (the snapshot is the other task's)
    assert pair.steps(500)  # Meta-World's own truncation at 500 steps
    assert pair.reset()
    pair.steps(30)
    pair.set_task(0)  # the same task set again: still replayed
    assert pair.reset()
    pair.steps(5)
    assert pair.replays == 4
    pair.close()


@replays
def test_forget_reset_makes_the_next_reset_real():
    pair = Pair("push-v3")
    pair.set_task(0)
    pair.reset()
    pair.steps(10)
    forget_reset(pair.mine)
    assert "_fast_reset_snapshot" not in pair.mine.__dict__
    assert not pair.reset()
    assert pair.reset()
    pair.close()


@replays
def test_forget_reset_reaches_through_the_benchmark_env():
    from maml_rl.envs.metaworld import MetaWorldEnv

    env = MetaWorldEnv("ML1", "push-v3")
    env.reset_task(env.sample_tasks(1)[0])
    env.reset()
    inner = env.unwrapped._env
    assert "_fast_reset_snapshot" in inner.__dict__
    forget_reset(env)
    assert "_fast_reset_snapshot" not in inner.__dict__
    env.close()


@replays
@pytest.mark.parametrize("duplicate", [lambda env: pickle.loads(pickle.dumps(env)), copy.deepcopy],
                         ids=["pickle", "deepcopy"])
def test_a_copy_resets_for_real(duplicate):
    """A copy builds a fresh model from the file, without the fields the last real reset set in the original:
    the snapshot must not travel, and the copy's first reset is real (and equals Meta-World's copy's)."""
    pair = Pair("pick-place-v3")
    pair.set_task(0)
    pair.reset()
    pair.steps(20)
    original = pair.mine
    pair.theirs, pair.mine = duplicate(pair.theirs), duplicate(pair.mine)
    assert "_fast_reset_snapshot" in original.__dict__  # the original keeps its own
    assert "_fast_reset_snapshot" not in pair.mine.__dict__
    assert not pair.reset()
    pair.steps(10)
    assert pair.reset()
    pair.close()


@replays
def test_a_reset_without_a_frozen_task_is_never_replayed():
    """Without ``set_task`` Meta-World draws the goal at every reset: nothing may be replayed."""
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS["reach-v3"]
    env = fast_class(cls)()
    env._freeze_rand_vec = False
    env._last_rand_vec = None
    env.seed(3)
    goals = []
    for _ in range(3):
        env.reset()
        assert "_fast_reset_snapshot" not in env.__dict__
        goals.append(env._target_pos.copy())
    assert len({g.tobytes() for g in goals}) == 3  # each reset drew its own goal
    env.close()


@replays
@pytest.mark.parametrize("source", ["np_random", "numpy"])
def test_a_reset_that_draws_a_random_number_is_not_replayed(source):
    """A task class whose ``reset_model`` draws a random number even with its task frozen (none of Meta-World's
    v3 classes does), from the env's ``np_random`` or NumPy's global state: its resets stay real, so random."""
    base = metaworld.env_dict.ALL_V3_ENVIRONMENTS["reach-v3"]

    class Drawing(base):
        def reset_model(self):
            observation = super().reset_model()
            self.drawn = (self.np_random if source == "np_random" else np.random).uniform()
            return observation

    env = fast_class(Drawing)()
    env.set_task(_metaworld_task("reach-v3", first_goals("reach-v3", 1)[0]))
    env.seed(0)
    drawn = []
    for _ in range(3):
        env.reset()
        drawn.append(env.drawn)
        assert "_fast_reset_snapshot" not in env.__dict__
    assert len(set(drawn)) == 3
    env.close()
