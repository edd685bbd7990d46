"""MultiTaskSampler against a naive one-env-per-slot reference, bit for bit.

Each case builds one sampler and runs a sequence of rollouts of different
shapes on it (1 task, 1 episode per task, horizon 1, every episode ending at
step 1, episodes ending at different steps or at the horizon; the policy's
own parameters, one shared dict, or one dict per task, which takes the
sampler's batched path). Every result must equal
:func:`reference_sampler.reference_rollout` exactly, and still equal it after
every later rollout on the same sampler; the tensors handed out must not
overlap in memory; writing into a result must change neither the next
rollout nor the earlier results. A sampler that hands out views of its
shared buffers (the aliasing bug of the one-task and one-step shapes) fails
here, as does a wrong seed, noise draw, action routing or stale row.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
from dataclasses import dataclass
from typing import List, Optional, Tuple

import pytest
import torch

from maml_rl.samplers import MultiTaskSampler

from reference_sampler import ElementwisePolicy, UnbatchedElementwisePolicy, reference_rollout, task_params
from sampler_envs import make_reference_box_env, make_reference_discrete_env

# name -> (picklable env factory, its horizon)
ENVS = {
    "box": (make_reference_box_env, 6),
    "discrete": (make_reference_discrete_env, 5),
    "box-h1": (functools.partial(make_reference_box_env, 1), 1),
    "discrete-h1": (functools.partial(make_reference_discrete_env, 1), 1),
}

# Task kinds: episode lengths drawn in [lo, hi] at each reset (hi past every horizon: run into the TimeLimit).
LENGTHS = {"step1": (1, 1), "mixed": (1, 8), "long": (9, 9), "two": (2, 3)}


@dataclass(frozen=True)
class Rollout:
    name: str
    kinds: Tuple[str, ...]  # one task per kind
    params: str  # "own" (None), "shared" (one dict), "per-task" (a dict per task), "per-task+own" (some None)


# The degenerate shapes first, while the pool is exactly as large as they
# need (a larger pool makes a one-task slice of the buffers non-contiguous,
# which hid the aliasing); each is followed by a rollout over the same slots.
DEGENERATE = (
    Rollout("K=1 mixed lengths", ("mixed",), "own"),
    Rollout("K=1 all end at step 1", ("step1",), "shared"),
    Rollout("K=1 to the horizon", ("long",), "per-task"),
    Rollout("K=3 mixed/step1/long", ("mixed", "step1", "long"), "per-task"),
    Rollout("K=2 all end at step 1", ("step1", "step1"), "per-task+own"),
    # Task 2's slots ran 6 steps in rollout 3 and end at step 1 now, under T = 6: stale rows to mask.
    Rollout("K=3 long/mixed/step1", ("long", "mixed", "step1"), "shared"),
    Rollout("K=1 after the pool grew", ("long",), "own"),
)
# A horizon-1 env: every rollout is one step long.
HORIZON_1 = (
    Rollout("K=2", ("mixed", "long"), "per-task"),
    Rollout("K=1", ("mixed",), "own"),
    Rollout("K=3", ("long", "step1", "mixed"), "per-task+own"),
    Rollout("K=3 again", ("mixed", "mixed", "mixed"), "shared"),
)
# No degenerate shape at all (K >= 2, some episode longer than 1 step).
MULTI_TASK = (
    Rollout("K=2 mixed/long", ("mixed", "long"), "per-task"),
    Rollout("K=3 long/long/step1", ("long", "long", "step1"), "shared"),
    Rollout("K=2 step1/long", ("step1", "long"), "per-task+own"),  # stale rows in task 0's slots
)
# For the other start methods: a one-task, a one-step and a multi-task rollout.
SHORT = (
    Rollout("K=1 all end at step 1", ("step1",), "own"),
    Rollout("K=1 mixed lengths", ("mixed",), "per-task"),
    Rollout("K=2 step1/two", ("step1", "two"), "per-task"),
)
SEQUENCES = {"degenerate": DEGENERATE, "horizon1": HORIZON_1, "multitask": MULTI_TASK, "short": SHORT}


@dataclass(frozen=True)
class Case:
    env: str
    sequence: str
    batch_size: int
    num_workers: int
    partial: bool = False
    start_method: Optional[str] = None  # None: the sampler's default (forkserver)
    batched_policy: bool = True  # False: a policy without stacked parameters (the sampler's per-task loop)

    @property
    def id(self) -> str:
        mode = "partial" if self.partial else "lockstep"
        method = f"-{self.start_method}" if self.start_method else ""
        policy = "" if self.batched_policy else "-unbatched"
        return f"{self.env}-{self.sequence}-B{self.batch_size}-w{self.num_workers}-{mode}{method}{policy}"


CASES = (
    # Every worker count and mode, both action kinds; B = 1 (one episode per task) among them.
    [Case("box", "degenerate", b, w, p) for w, b in ((0, 2), (1, 1), (3, 1)) for p in (False, True)]
    + [Case("discrete", "degenerate", b, w, p) for w, b in ((0, 1), (1, 3), (3, 2)) for p in (False, True)]
    + [
        Case("box-h1", "horizon1", 2, 3),
        Case("discrete-h1", "horizon1", 1, 1, partial=True),
        Case("box-h1", "horizon1", 3, 0),
        Case("box", "multitask", 2, 3, partial=True),
        Case("discrete", "multitask", 2, 0),
        Case("box", "multitask", 3, 0, partial=True, batched_policy=False),
        Case("discrete", "degenerate", 2, 0, batched_policy=False),
    ]
    + [Case("box", "short", 2, 2, start_method="fork"), Case("discrete", "short", 1, 2, True, "spawn")]
)
CASES = [c for c in CASES if c.start_method is None or c.start_method in mp.get_all_start_methods()]

FIELDS = ("observations", "actions", "rewards", "lengths")
SEED = 20240611


def make_tasks(kinds, call: int):
    return [
        {"scale": 0.6 + 0.1 * ((call + k) % 5), "target": (call + 2 * k) % 3, "lengths": LENGTHS[kind]}
        for k, kind in enumerate(kinds)
    ]


def make_params(policy, how: str, num_tasks: int, call: int):
    if how == "own":
        return None
    if how == "shared":
        return task_params(policy, call + 1)
    per_task = [task_params(policy, call + 2 + k) for k in range(num_tasks)]
    if how == "per-task+own":
        per_task[1::2] = [None] * len(per_task[1::2])
    return per_task


def first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}"
    where = (got != want).nonzero()[0].tolist()
    count = int((got != want).sum())
    return f"{count} element(s) differ, first at {where}: got {got[tuple(where)].item()!r}, want {want[tuple(where)].item()!r}"


def differences(result, reference, label: str) -> List[str]:
    if len(result) != len(reference):
        return [f"{label}: {len(result)} batches, want {len(reference)}"]
    found = []
    for k, (got, want) in enumerate(zip(result, reference)):
        if got.task is not want.task:
            found.append(f"{label}, task {k}: task {got.task!r} is not the task passed, {want.task!r}")
        for field in FIELDS:
            x, y = getattr(got, field), getattr(want, field)
            if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
                found.append(f"{label}, task {k}: {field}: {first_difference(x, y)}")
    return found


def extent(tensor: torch.Tensor) -> Tuple[int, int]:
    """The bytes a tensor can reach, [first, last) (torch strides are never negative)."""
    if tensor.numel() == 0:
        return tensor.data_ptr(), tensor.data_ptr()
    span = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride())) + 1
    return tensor.data_ptr(), tensor.data_ptr() + span * tensor.element_size()


def overlaps(named_results) -> List[str]:
    """Pairs of handed-out tensors (any rollout, task and field) that share memory."""
    spans = []
    for label, result in named_results:
        for k, batch in enumerate(result):
            for field in FIELDS:
                spans.append((extent(getattr(batch, field)), f"{label}, task {k} {field}"))
    spans.sort()
    found = []
    reach, owner = -1, None  # the furthest byte reached so far, and by which tensor
    for (low, high), name in spans:
        if low < reach:
            found.append(f"{owner} and {name} share memory")
        if high > reach:
            reach, owner = high, name
    return found


def scribble(result) -> None:
    for batch in result:
        for field in FIELDS:
            tensor = getattr(batch, field)
            tensor.fill_(-7 if not tensor.is_floating_point() else float("nan"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_sampler_equals_reference(case: Case):
    env_fn, horizon = ENVS[case.env]
    probe = env_fn()
    policy_class = ElementwisePolicy if case.batched_policy else UnbatchedElementwisePolicy
    policy = policy_class(probe.observation_space.shape[0], probe.action_space)
    probe.close()
    rollouts = SEQUENCES[case.sequence]
    problems: List[str] = []
    history = []  # (label, result, reference): every result handed out, re-checked after each later rollout
    failing = set()  # labels already reported, to report each broken result once

    def check_history(after: str) -> None:
        for label, result, reference in history:
            if label not in failing:
                found = differences(result, reference, f"{label}, re-checked {after}")
                if found:
                    failing.add(label)
                    problems.extend(found)

    with MultiTaskSampler(None, None, case.batch_size, policy, None, env_fn=env_fn, seed=SEED,
                          num_workers=case.num_workers, partial=case.partial,
                          start_method=case.start_method) as sampler:

        def run(call: int, rollout: Rollout):
            tasks = make_tasks(rollout.kinds, call)
            params = make_params(policy, rollout.params, len(tasks), call)
            result = sampler.rollout(tasks, params)
            reference = reference_rollout(env_fn, policy, tasks, params, batch_size=case.batch_size,
                                          seed=SEED, call=call, horizon=horizon)
            label = f"rollout {call} ({rollout.name}, params {rollout.params})"
            found = differences(result, reference, label)
            if found:
                failing.add(label)
                problems.extend(found)
            return label, result, reference

        for call, rollout in enumerate(rollouts):
            label, result, reference = run(call, rollout)
            check_history(f"after rollout {call}")
            history.append((label, result, reference))
            problems.extend(o for o in overlaps((h[0], h[1]) for h in history) if o not in problems)

        # Writing into the last result must touch neither the next rollout nor the earlier results.
        scribbled = history.pop()
        scribble(scribbled[1])
        check_history(f"after writing into {scribbled[0]}")
        call = len(rollouts)
        label, result, reference = run(call, rollouts[0])
        check_history(f"after rollout {call}, which followed the writes")
        history.append((label, result, reference))
        problems.extend(o for o in overlaps((h[0], h[1]) for h in history) if o not in problems)

    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems)
