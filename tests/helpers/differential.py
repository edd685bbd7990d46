"""The differential tests' shapes and checks: the sampler's episodes against the naive reference's
(``helpers.naive_sampler.reference_rollout``), bit for bit, and against the sampler's shared buffers.

Used by ``samplers/test_sampler_differential.py`` (which holds every rollout path), ``test_mean_actions.py``
and ``test_mujoco_fast_path.py``.
"""

from __future__ import annotations

import torch

# (name, tasks, episodes per task, horizon); a task's length None varies per episode.
SHAPES = [
    ("one task, one episode", [{"offset": 0.3, "length": 4}], 1, 6),
    ("one task", [{"offset": -0.2, "length": None}], 4, 6),
    ("one episode per task", [{"offset": 0.1, "length": 2}, {"offset": 0.5, "length": None},
                              {"offset": -0.7, "length": 9}], 1, 6),
    ("all end at step 1", [{"offset": 0.4, "length": 1}, {"offset": -0.4, "length": 1}], 3, 6),
    ("different ends, some at the horizon", [{"offset": 0.2, "length": None}, {"offset": -0.3, "length": 3},
                                             {"offset": 0.9, "length": 20}], 3, 6),
    ("one task, ends at step 1", [{"offset": 0.6, "length": 1}], 2, 6),
    ("horizon 1", [{"offset": 0.1, "length": None}, {"offset": -0.8, "length": 5}], 2, 1),
]


def assert_equal_to(batches, reference, label):
    """A rollout's ``batches`` equal ``reference`` (``reference_rollout``'s dicts), infos and success included."""
    assert len(batches) == len(reference), label
    for k, (got, want) in enumerate(zip(batches, reference)):
        assert got.task == want["task"], (label, k)
        assert torch.equal(got.lengths, want["lengths"]), (label, k, got.lengths, want["lengths"])
        for name in ("observations", "actions", "rewards"):
            mine = getattr(got, name)
            assert mine.dtype == want[name].dtype, (label, k, name, mine.dtype)
            assert torch.equal(mine, want[name]), (label, k, name)
        assert list(got.infos) == list(want["infos"]), (label, k)
        for key, values in want["infos"].items():
            assert got.infos[key].dtype == torch.float64 and torch.equal(got.infos[key], values), (label, k, key)
        if "near" in want["infos"]:
            # Success: non-zero at some step of the episode, by hand.
            near = want["infos"]["near"]
            expected = [bool(near[:n, b].any()) for b, n in enumerate(want["lengths"].tolist())]
            assert got.success("near").tolist() == expected, (label, k)


def buffer_ranges(sampler):
    """Address ranges of the shared trajectory buffers."""
    views = sampler.rollout_backend.pool.views
    return [(a.__array_interface__["data"][0], a.__array_interface__["data"][0] + a.nbytes)
            for a in (views.observations, views.actions, views.rewards, views.infos, views.lengths)]


def storages(batches):
    """Memory ranges of the tensors of ``batches``."""
    out = []
    for batch in batches:
        for tensor in (batch.observations, batch.actions, batch.rewards, batch.lengths, *batch.infos.values()):
            storage = tensor.untyped_storage()
            out.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return out


def overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


def grouped_by_sampler(shapes):
    """Shapes sharing (batch size, horizon) can share one sampler: group them, keeping order."""
    groups = {}
    for shape in shapes:
        groups.setdefault((shape[2], shape[3]), []).append(shape)
    return list(groups.items())
