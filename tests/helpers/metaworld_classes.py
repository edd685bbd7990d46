"""Which Meta-World classes stand for the others where a test checks what does not depend on the class.

The batched path's row bookkeeping (which rows step, reset, evaluate, read contacts) is shared by every class;
what is the class's own is its reward module (``SPECS[...].outputs``) and the features it declares. A test of
layouts (2 or 20 envs, resets in the middle of episodes) runs on :data:`REPRESENTATIVES`: the fewest classes, chosen
greedily in a fixed order, that cover every reward module and every declared feature, so a class of a new module
(or a new feature) joins by itself. Each class is still compared with Meta-World's own env to its truncation in the
tests that run every class.

Tests parametrized by class take their cases from :func:`by_class`: each case of a class joins that class's
xdist group, so under ``-n`` one worker runs all of a class's tests and builds its task lists (about a second and a
half of Meta-World resets each) once.
"""

from __future__ import annotations

import functools

import metaworld.env_dict
import numpy as np
import pytest

from maml_rl.envs.metaworld_fast.batched import SPECS

ALL_CLASSES = tuple(sorted(metaworld.env_dict.ALL_V3_ENVIRONMENTS))


def features(name: str) -> frozenset:
    """What a class's batched step depends on beyond the shared bookkeeping."""
    spec = SPECS[metaworld.env_dict.ALL_V3_ENVIRONMENTS[name].__name__]
    outputs = spec.outputs.func if isinstance(spec.outputs, functools.partial) else spec.outputs
    found = {("module", outputs.__module__), ("outputs", outputs.__qualname__), ("contacts", spec.contacts),
             ("target_site", spec.target_site is not None), ("env_values", bool(spec.env_values)),
             ("objects", len(spec.objects))}
    return frozenset(found)


def representatives(candidates=ALL_CLASSES, *, covering=("module", "contacts", "target_site", "env_values")) -> tuple:
    """The fewest classes (greedy, ties broken by name) that cover each value of each kind in ``covering``."""
    wanted = {name: {f for f in features(name) if f[0] in covering} for name in candidates}
    left = set().union(*wanted.values())
    chosen = []
    while left:
        best = max(sorted(wanted), key=lambda name: len(wanted[name] & left))
        chosen.append(best)
        left -= wanted[best]
    return tuple(sorted(chosen))


REPRESENTATIVES = representatives()


def by_class(names, slow=lambda name: False) -> list:
    """``pytest.param`` cases for the class ``names``, each in its class's xdist group (slow where ``slow(name)``)."""
    return [pytest.param(name, id=name, marks=[pytest.mark.xdist_group(f"metaworld-{name}"),
                                               *([pytest.mark.slow] if slow(name) else [])])
            for name in names]


@functools.lru_cache(maxsize=None)
def first_goals(name: str, k: int, seed: int = 0) -> tuple:
    """The first ``k`` train goals (``rand_vec``) of ``metaworld.ML1(name, seed)``, by Meta-World's own procedure
    (``metaworld._make_tasks``: the global NumPy seed, one env, a reset per goal) cut short after ``k`` resets.

    The tests that compare our envs with Meta-World's own need a few goals of a class, not the 100 resets of both
    of ML1's splits (1.4-2.5 s a class); ``test_metaworld.py`` holds this equal to ML1's lists."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        env = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]()
        env._freeze_rand_vec = False
        env._set_task_called = True
        kwargs = dict(metaworld.env_dict.ML1_ARGS_KWARGS[name]["kwargs"])
        del kwargs["task_id"]
        env._set_task_inner(**kwargs)
        goals = []
        for _ in range(k):
            env.reset()
            goal = np.array(env._last_rand_vec, dtype=np.float64)
            goal.setflags(write=False)  # kept for the process's other tests
            goals.append(goal)
        env.close()
        return tuple(goals)
    finally:
        np.random.set_state(state)
