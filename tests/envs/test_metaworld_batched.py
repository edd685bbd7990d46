"""BatchedSawyer against Meta-World's own env: n envs of one class stepped together give, env for env, the
observations, rewards, truncations and every info value of Meta-World's own ``env.step``, bit for bit; and
each class's info keys, order and value types are those ``info_types`` says."""

import warnings

import numpy as np
import pytest

try:
    import metaworld  # noqa: F401
except ImportError:
    metaworld = pytest.importorskip("metaworld")
import metaworld.env_dict
from metaworld.policies import ENV_POLICY_MAP

from maml_rl.envs.metaworld import _metaworld_task
from maml_rl.envs.metaworld_fast import fast_class
from maml_rl.envs.metaworld_fast.batched import (SPECS, BatchedSawyer, batched_spec, gaussian, long_tail, mujoco_batch,
                                                 norms)
from maml_rl.envs.metaworld_fast.batched.arrays import hamacher
from maml_rl.envs.metaworld_fast.batched.info_types import info_types
from maml_rl.envs.metaworld_fast.reward_utils import tolerance

from helpers.metaworld_classes import REPRESENTATIVES, by_class, first_goals

pytestmark = [pytest.mark.metaworld,
              pytest.mark.skipif(mujoco_batch is None, reason="batched stepping needs mujoco.batch (MuJoCo >= 4)")]

# Every Meta-World class is batched: ML10's, and ML45's (and MT50's) other 35.
BATCHED = set(metaworld.env_dict.ALL_V3_ENVIRONMENTS)
# Classes whose gripping rows (float32 from the action) go to the env's own evaluate_state.
GRASPING = {"push-v3", "pick-place-v3", "shelf-place-v3", "basketball-v3", "peg-insert-side-v3", "push-wall-v3",
            "handle-pull-v3", "handle-pull-side-v3", "pick-place-wall-v3", "coffee-push-v3", "coffee-pull-v3",
            "hand-insert-v3", "pick-out-of-hole-v3", "hammer-v3", "assembly-v3", "disassemble-v3", "bin-picking-v3",
            "stick-push-v3", "stick-pull-v3", "dial-turn-v3"}

# The classes whose grasp_success needs the contacts: the env's own code where the object is lifted, or the pads'
# contact forces (sweep, sweep-into).
CONTACTS = {"push-v3", "pick-place-v3", "shelf-place-v3", "sweep-v3", "sweep-into-v3", "push-back-v3", "push-wall-v3",
            "pick-place-wall-v3", "coffee-push-v3", "coffee-pull-v3", "soccer-v3", "hand-insert-v3", "stick-push-v3",
            "stick-pull-v3"}
# Their scripted policies lift the object outside the gripping rows.
LIFTS = {"pick-place-v3", "shelf-place-v3", "push-back-v3", "push-wall-v3", "pick-place-wall-v3"}


# The quick tier: push (its lifted rows, as pick-place's and shelf-place's) and sweep (the pads' contacts, as
# sweep-into's); the full tier every class.
QUICK_CONTACTS = {"push-v3", "sweep-v3"}


def bits(value) -> bytes:
    return np.float64(value).tobytes()


def kinds(info):
    """Each key of ``info`` in order with its value's type, a Python or NumPy float64 as ``float`` (gymnasium's
    vector infos make the same float64 arrays of either)."""
    return tuple((key, float if type(value) in (float, np.float64) else type(value)) for key, value in info.items())


def run(name, n, steps, *, resets=(), noise=0.0, seed=0, info_keys=None):
    """Step n envs of ``name`` both ways; the reference's successes and the rows the batch handed to the envs' own
    evaluate_state. ``resets``: (step, env) pairs, the env reset (both ways) before that step; envs whose
    episode ended (500 steps) are reset too. Actions: Meta-World's scripted policy, 100 random steps in 400.
    ``info_keys``: passed to the batch's step, whose infos must then be those keys of Meta-World's, in order."""
    successes, evaluated, _, _ = run_variants(name, n, steps, (info_keys,), resets=resets, noise=noise, seed=seed)[0]
    return successes, evaluated


def run_variants(name, n, steps, variants, *, resets=(), noise=0.0, seed=0):
    """:func:`run` for several batches at once, one per ``info_keys`` in ``variants``, each over its own fast envs
    and each checked against the same Meta-World envs, stepped once: per variant, the reference's successes, the
    rows the batch handed to the envs' own evaluate_state, the rows whose contacts it read and the truncations."""
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
    goals = first_goals(name, 5)
    theirs = [cls() for _ in range(n)]
    ours = [[fast_class(cls)() for _ in range(n)] for _ in variants]
    for i in range(n):
        for env in (theirs[i], *(envs[i] for envs in ours)):
            env.set_task(_metaworld_task(name, goals[i % len(goals)]))
    batches = [BatchedSawyer(envs) for envs in ours]
    evaluated = [[] for _ in variants]
    touched = [[] for _ in variants]
    for batch, rows_evaluated, rows_touched in zip(batches, evaluated, touched):
        def counting(rows, *args, evaluate_rows=batch.evaluate_rows, into=rows_evaluated):
            into.extend(rows)
            evaluate_rows(rows, *args)

        def touching(rows, geom, touching=batch.touching, into=rows_touched):
            into.append(len(rows))
            return touching(rows, geom)

        batch.evaluate_rows, batch.touching = counting, touching
    policy = ENV_POLICY_MAP[name]()
    rng = np.random.default_rng(seed)
    observations = [None] * n

    def reset(i):
        for batch in batches:
            batch.sync(i)
        expected, _ = theirs[i].reset()
        for batch, envs in zip(batches, ours):
            got, _ = envs[i].reset()
            assert got.tobytes() == expected.tobytes(), f"env {i}: reset"
            batch.load(i)
        observations[i] = expected

    for i in range(n):
        reset(i)
    successes = truncations = 0
    for t in range(steps):
        for step, i in resets:
            if step == t:
                reset(i)
        actions = np.empty((n, 4), dtype=np.float32)
        for i in range(n):
            if (t // 100 + i) % 4 == 3:
                actions[i] = rng.uniform(-1, 1, 4)
            else:
                observation = observations[i].copy()
                observation[-3:] = theirs[i]._get_pos_goal()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    actions[i] = np.asarray(policy.get_action(observation)) + noise * rng.normal(size=4)
        stepped = [batch.step(actions.copy(), info_keys) for batch, info_keys in zip(batches, variants)]
        for i in range(n):
            o, r, terminated, tr, info = theirs[i].step(actions[i].copy())
            for batch, info_keys, (obs, rewards, truncated, infos) in zip(batches, variants, stepped):
                where = f"{name}, env {i} of {n}, step {t}, info_keys={info_keys}"
                assert obs[i].tobytes() == o.tobytes(), f"{where}: observation {obs[i]} != {o}"
                assert bits(rewards[i]) == bits(r), f"{where}: reward {rewards[i]!r} != {r!r}"
                assert bool(truncated[i]) == tr and not terminated, f"{where}: truncated"
                keys = list(info) if info_keys is None else [key for key in info_keys if key in info]
                assert list(infos) == keys, where
                if info_keys is None:
                    own = batch.own_infos.get(i)
                    reported = batch.row_info_types(i) if own is None else kinds(own)
                    assert kinds(info) == reported, f"{where}: the info's keys and types {kinds(info)}, not {reported}"
                for key in keys:
                    value = info[key]
                    assert bits(infos[key][i]) == bits(value), f"{where}: info[{key!r}] {infos[key][i]!r} != {value!r}"
            observations[i] = o
            successes += bool(info["success"])
            if tr:
                truncations += 1
                reset(i)
    return [(successes, len(rows_evaluated), sum(rows_touched), truncations)
            for rows_evaluated, rows_touched in zip(evaluated, touched)]


def test_every_class_has_its_info_types():
    for name, cls in metaworld.env_dict.ALL_V3_ENVIRONMENTS.items():
        assert info_types(fast_class(cls)) is not None, name


def test_the_batched_classes_are_metaworlds_classes():
    assert set(SPECS) == {cls.__name__ for cls in metaworld.env_dict.ALL_V3_ENVIRONMENTS.values()}
    for name in BATCHED:
        cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
        assert batched_spec(cls()) is not None and batched_spec(fast_class(cls)()) is not None
    # A class of the same name that is not Meta-World's is not batched.
    assert batched_spec(type("SawyerReachEnvV3", (), {})()) is None


# Every class runs to the 500-step truncation and on into the next episode, with a reset in the middle of an
# episode: alone (below), or as two envs (test_two_envs_step_as_metaworlds_own for the representatives,
# test_a_step_that_does_not_read_grasp_success_skips_its_contacts for CONTACTS), whose run is the same check with a
# second row. Those classes ran alone to their truncation as well until that was seen to be the same check twice
# (47 s of the full tier); every class still runs alone for 130 steps in the quick tier.
TO_TRUNCATION_AS_TWO = set(REPRESENTATIVES) | CONTACTS
TO_TRUNCATION_ALONE = sorted(BATCHED - TO_TRUNCATION_AS_TWO)


@pytest.mark.mujoco_version
@pytest.mark.slow
@pytest.mark.parametrize("name", by_class(TO_TRUNCATION_ALONE))
def test_one_env_steps_as_metaworlds_own(name):
    """A class to the 500-step truncation and on into the next episode, with a reset in the middle of an
    episode (the quick tier's check is test_every_class_steps_as_metaworlds_own_for_130_steps)."""
    check_class(name, 1)


def test_every_class_runs_to_its_truncation_alone_or_as_two_envs():
    assert set(TO_TRUNCATION_ALONE) | TO_TRUNCATION_AS_TWO == BATCHED
    assert not set(TO_TRUNCATION_ALONE) & TO_TRUNCATION_AS_TWO


# The rows' bookkeeping is shared by every class: the layouts of two envs run on one class per reward module and
# declared feature (helpers.metaworld_classes). Those among CONTACTS run this layout in
# test_a_step_that_does_not_read_grasp_success_skips_its_contacts, beside the batch that skips the contacts,
# against the same pass of Meta-World's envs.
@pytest.mark.slow
@pytest.mark.mujoco_version
@pytest.mark.parametrize("name", by_class(sorted(set(REPRESENTATIVES) - CONTACTS)))
def test_two_envs_step_as_metaworlds_own(name):
    check_class(name, 2)


def check_class(name, n):
    # The last env is reset at step 37 and reaches Meta-World's truncation at 536, the others at 499.
    (successes, evaluated, _, truncations), = run_variants(name, n, 557, (None,), resets=[(37, n - 1)])
    assert truncations == n
    assert successes > 0  # the scripted policy reaches goals (in-place and success branches)
    if name in GRASPING:
        assert evaluated > 0  # gripping rows went to the env's own evaluate_state


@pytest.mark.mujoco_version
@pytest.mark.parametrize("name", by_class(sorted(BATCHED)))
def test_every_class_steps_as_metaworlds_own_for_130_steps(name):
    """The quick tier's check of every class: one env, 130 steps, reset in the middle (the full tier runs each to
    its truncation, and the layouts of 2 and 20 envs on the representatives)."""
    run(name, 1, 130, resets=[(37, 0)])


@pytest.mark.slow
@pytest.mark.mujoco_version
@pytest.mark.parametrize("name", by_class(REPRESENTATIVES))
def test_twenty_envs_step_as_metaworlds_own(name):
    """Five goals over 20 envs, random, scripted and noisy actions, resets in the middle of episodes (two in a row
    on one env). 160 steps: a subset of rows reaching Meta-World's truncation is test_two_envs_step_as_metaworlds_own's
    and each class's to its truncation test_one_env_steps_as_metaworlds_own's; here the envs' own stepping was
    nine tenths of the time."""
    successes, evaluated = run(name, 20, 160, resets=[(37, 0), (37, 19), (120, 7), (121, 7)], noise=0.3, seed=3)
    assert successes > 0 and (evaluated > 0 or name not in GRASPING)




@pytest.mark.mujoco_version
@pytest.mark.parametrize("name", by_class(sorted(CONTACTS), slow=lambda name: name not in QUICK_CONTACTS))
def test_a_step_that_does_not_read_grasp_success_skips_its_contacts(name):
    """With info_keys without grasp_success (the sampler's default, success): the same observations, rewards and
    info values as Meta-World's, bit for bit; no contact reads; fewer (or no more) rows by the env's own code; and
    only the keys asked for, in their order (a key Meta-World's info lacks is left out). Beside it, on the same
    actions and the same pass of Meta-World's envs, a batch asked for every key: the two-env layout of
    test_two_envs_step_as_metaworlds_own."""
    keys = ("success", "no-such-key", "near_object")
    (successes, evaluated, touched, truncations), (_, all_evaluated, all_touched, _) = run_variants(
        name, 2, 557, (keys, None), resets=[(37, 1)])
    assert successes > 0 and touched == 0 and evaluated <= all_evaluated and truncations == 2
    if name in GRASPING:
        assert all_evaluated > 0  # gripping rows went to the env's own evaluate_state
    if name.startswith("sweep"):
        assert all_touched > 0  # all keys: the pads' contacts were read
    elif name in LIFTS:
        assert evaluated < all_evaluated  # the lifted rows went to the env's own code only for grasp_success
    run(name, 1, 60, info_keys=("grasp_success", "success"))  # asked for: computed, and checked inside run


def test_norms_and_long_tail_equal_the_scalar_functions():
    """Against np.linalg.norm and the scalar tolerance (both sigmoids), on random values and the branches' edges."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5000, 3)) * rng.uniform(1e-8, 1e3, size=(5000, 1))
    x[:3] = [[0.0, 0.0, 0.0], [-0.0, 1e-300, 0.0], [np.inf, 1.0, 0.0]]
    assert norms(x).tobytes() == np.array([np.linalg.norm(row) for row in x]).tobytes()
    for lower in (0, 0.015, -0.02):  # below the lower bound too (the caging rewards' obj_radius)
        edges = [lower, np.nextafter(lower, -1), -lower, 0.0, 0.05, np.nextafter(0.05, 1), 1e-300, 2.0, -2.0,
                 np.nan, np.nan, np.inf, -np.inf]
        values = np.concatenate([rng.uniform(-1, 1, 2000), edges])
        margins = np.concatenate([rng.uniform(0, 1, 2000),
                                  [0.0, 0.3, 0.1, 0.0, 0.2, 0.0, 0.2, 0.0, 0.4, 0.3, 0.0, 0.3, 0.2]])
        for sigmoid, function in (("long_tail", long_tail), ("gaussian", gaussian)):
            expected = [tolerance(float(v), bounds=(lower, 0.05), margin=float(m), sigmoid=sigmoid)
                        for v, m in zip(values, margins)]
            assert function(values, lower, 0.05, margins).tobytes() == np.array(expected).tobytes(), (sigmoid, lower)


def test_hamacher_equals_metaworlds_scalar_product():
    from metaworld.utils.reward_utils import hamacher_product

    rng = np.random.default_rng(6)
    a = np.concatenate([rng.uniform(0, 1, 3000), [0.0, 0.0, 1.0, 1e-300, 1.0, 0.5]])
    b = np.concatenate([rng.uniform(0, 1, 3000), [0.0, 1.0, 0.0, 1e-300, 1.0, 0.0]])
    expected = np.array([hamacher_product(float(x), float(y)) for x, y in zip(a, b)])
    assert hamacher(a, b).tobytes() == expected.tobytes()


def test_misuse_is_refused():
    reach = metaworld.env_dict.ALL_V3_ENVIRONMENTS["reach-v3"]
    with pytest.raises(ValueError, match="not a batched class"):
        BatchedSawyer([type("SawyerReachEnvV3", (), {})()])  # not Meta-World's
    with pytest.raises(ValueError, match="differ in class"):
        BatchedSawyer([reach(), fast_class(reach)()])
    with pytest.raises(ValueError, match="only the v2 rewards"):
        BatchedSawyer([reach(reward_function_version="v1")])
    env = reach()
    env.set_task(_metaworld_task("reach-v3", first_goals("reach-v3", 1)[0]))
    env.reset()
    batch = BatchedSawyer([env])
    batch.load(0)
    with pytest.raises(ValueError, match="expected \\(1, 4\\)"):
        batch.step(np.zeros((2, 4), dtype=np.float32))
    batch.path_length[0] = env.max_path_length
    with pytest.raises(ValueError, match="reset them first"):
        batch.step(np.zeros((1, 4), dtype=np.float32))


def test_quaternions_as_arrays_equal_the_scalar_conversion():
    """quats_from_matrices against quat_from_matrix (itself SciPy's bits): random rotations, each branch of
    Markley's method, near-180-degree turns, and matrices that go to SciPy (not orthogonal to within 1e-13)."""
    from scipy.spatial.transform import Rotation

    from maml_rl.envs.metaworld_fast.rotation import quat_from_matrix, quats_from_matrices

    rng = np.random.default_rng(11)
    matrices = [np.eye(3), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])]
    matrices += list(Rotation.from_quat(rng.normal(size=(3000, 4))).as_matrix())
    for axis in np.eye(3):
        matrices += list(Rotation.from_rotvec(np.outer(np.pi - rng.uniform(0, 0.5, 50), axis)).as_matrix())
    matrices += [np.eye(3) * 1.001, np.eye(3) + 1e-9 * np.triu(np.ones((3, 3)), 1)]
    matrices = np.array(matrices)
    expected = np.array([quat_from_matrix(np.ascontiguousarray(m)) for m in matrices])
    assert quats_from_matrices(matrices).tobytes() == expected.tobytes()
    for n in (1, 2, 8, 9, 20):  # row by row up to 8, as arrays above
        assert quats_from_matrices(matrices[-n:]).tobytes() == expected[-n:].tobytes()
        assert quats_from_matrices(matrices[:n]).tobytes() == expected[:n].tobytes()


def test_the_rows_orthogonality_test_decides_as_the_scalar_one():
    """Which rows go to SciPy: the arrays' test against _clearly_orthogonal row by row, on matrices whose
    Gramian or determinant sits at the tolerance, and on NaN and inf entries."""
    from scipy.spatial.transform import Rotation

    from maml_rl.envs.metaworld_fast import rotation

    rng = np.random.default_rng(12)
    rotations = Rotation.from_quat(rng.normal(size=(400, 4))).as_matrix().reshape(-1, 9)
    # Perturbations around the 1e-13 tolerance, on one entry or all.
    scales = np.repeat(np.geomspace(1e-15, 1e-11, 40), 10)
    perturbed = rotations + scales[:, None] * rng.normal(size=rotations.shape) * (rng.random(rotations.shape) < 0.3)
    odd = np.array([np.full(9, np.nan), np.where(np.eye(3).ravel() > 0, np.inf, 0.0), np.diag([1.0, 1.0, -1.0]).ravel(),
                    np.zeros(9), np.eye(3).ravel() * (1 + 5e-14), np.eye(3).ravel() * (1 + 6e-14)])
    odd[4:, 1] = 1e-200
    m = np.concatenate([rotations, perturbed, odd])
    m[7, 3] = np.nan
    expected = np.array([rotation._clearly_orthogonal(row.tolist()) for row in m])
    assert 0 < expected.sum() < len(m)  # both answers occur
    with np.errstate(invalid="ignore"):  # inf * 0 in the inf row, as in the scalar test
        got = rotation._clearly_orthogonal_rows(m)
    assert got.tolist() == expected.tolist()
