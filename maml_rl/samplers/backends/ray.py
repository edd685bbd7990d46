"""Rollouts across a Ray cluster: sampling actors, each rolling out whole tasks.

One actor per node (or per ``cpus_per_actor`` CPUs of a node) holds a copy
of the policy and a :class:`~maml_rl.samplers.backends.local.LocalBackend`:
its own ChildEnv processes over shared memory, or its own process. A rollout
is one remote call per actor, never one per step:

1. the driver puts the policy's parameters and the per-task (adapted)
   parameters into the object store once, and hands every actor the same
   reference (Ray moves an object to a node once, whatever the actors there);
2. each actor rolls out a contiguous group of whole tasks, with the seeds and
   noise of those slots of the whole call, and returns compact numpy arrays
   (trimmed to its longest episode);
3. the driver lays the groups side by side; the sampler then checks and
   assembles episodes exactly as it does locally.

Which actor runs which tasks cannot change a number: seeds and noise are
functions of (seed, call, slot), and a task's actions of its own parameters
and observations only (``rollout.actions.ActionFunction``). So an actor that dies
mid-rollout has its group re-run on the survivors with the same result, and a
group whose ChildEnv process died inside a live actor runs once more (a second
death of that group's ChildEnvs is raised: the env itself kills them).
"""

from __future__ import annotations

import copy
import logging
import os
import time
import traceback
import weakref
from dataclasses import replace
from typing import Any, Dict, List, Optional

import cloudpickle
import numpy as np
import torch

from ..errors import SamplerError, WorkerDiedError, WorkerError
from ..rollout.request import RolloutRequest, TaskParams
from ..settings.execution import ExecutionSettings
from ..settings.workload import Workload
from ..workers.buffers import Trajectories
from .base import RolloutBackend

logger = logging.getLogger(__name__)

RAY_MISSING = (
    "backend='ray' needs Ray, which is an optional dependency: pip install -e \".[ray]\" "
    "(or pip install \"ray>=2.10\")"
)
# How long the actors may take to start (a node's CPUs may be held by other work).
ACTOR_START_TIMEOUT = 120.0
# How long close() waits for the actors to end their ChildEnv processes before killing them.
CLOSE_TIMEOUT = 5.0


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise ImportError(RAY_MISSING) from exc
    return ray


class SamplingActor:
    """The remote side: a policy copy and a local backend on one node.

    :param workload: the env, the buffers' spec and the episodes per task.
    :param settings: the sampler's settings; the layout is decided for ``cpus``.
    :param policy_bytes: the policy module (on the CPU), cloudpickled.
    :param cpus: the CPUs Ray reserved for this actor.
    """

    def __init__(self, workload: Workload, settings: ExecutionSettings, policy_bytes: bytes, cpus: int):
        from .local import LocalBackend

        self.layout = settings.layout(cpus)
        self.policy = cloudpickle.loads(policy_bytes)
        env_fn = cloudpickle.loads(workload.env_fn_bytes)
        self.backend = LocalBackend(workload, settings, self.layout, env_fn, self.policy)

    def where(self) -> Dict[str, Any]:
        import ray

        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "ip": ray.util.get_node_ip_address(), "pid": os.getpid(),
                "num_workers": self.layout.num_workers, "batch_threads": self.layout.batch_threads}

    def rollout(self, payload: dict, group: RolloutRequest) -> Trajectories:
        """Roll out ``group`` (its parameter rows travel in ``payload``, its index in ``group``); compact copies back."""
        try:
            self.policy.load_state_dict({name: torch.from_numpy(np.array(a)) for name, a in payload["own"].items()})
            params = group.params.with_numpy_rows(payload["rows"])
            trajectories = self.backend.run(replace(group, params=params), "cpu")
        except Exception as exc:
            # Travels with the exception (pickled with its __dict__) to the driver's message.
            exc.actor_traceback = traceback.format_exc()
            raise
        return trajectories.copy_of_slots(group.num_slots)

    def close(self) -> None:
        self.backend.close()


class RayBackend(RolloutBackend):
    """Sampling actors on a Ray cluster (see the module's docstring).

    :param address: ``None`` joins the cluster named by ``RAY_ADDRESS`` or
        starts a local one, as ``ray.init`` does; ``"auto"`` or
        ``"HOST:PORT"`` joins that cluster. Ignored when Ray is already
        initialised in this process.
    :param num_actors: use this many actors (default: all the cluster offers).
    :param cpus_per_actor: CPUs per actor; default all of a node's CPUs, so
        one actor per node.
    """

    def __init__(self, workload: Workload, settings: ExecutionSettings, policy: torch.nn.Module):
        ray = import_ray()
        address = settings.ray.address
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=True)
        elif address is not None:
            logger.info("MultiTaskSampler: Ray is already initialised here; ray_address=%r is not used", address)
        self.workload = workload
        self.settings = settings
        self.policy = policy
        self.num_actors, self.cpus_per_actor = settings.ray.actors, settings.ray.cpus_per_actor
        self.last_rollout: Dict[str, Any] = {}
        self._start()

    def _start(self) -> None:
        """Place and start the actors, and wait until every one is up."""
        ray = import_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        placement = _placement(ray.nodes(), self.num_actors, self.cpus_per_actor)
        policy_bytes = cloudpickle.dumps(copy.deepcopy(self.policy).to("cpu"))
        remote = ray.remote(SamplingActor)
        self.closed = False
        self.lost: List[str] = []
        self.actors: List[Any] = []
        self.cpus: List[int] = []
        self._finalizer = weakref.finalize(self, _kill, self.actors, os.getpid())
        for node_id, cpus in placement:
            actor = remote.options(
                num_cpus=cpus, max_restarts=0, max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(self.workload, self.settings, policy_bytes, cpus)
            self.actors.append(actor)
            self.cpus.append(cpus)
        try:
            self.where = ray.get([a.where.remote() for a in self.actors], timeout=ACTOR_START_TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise WorkerDiedError(
                f"the {len(self.actors)} Ray sampling actor(s) did not start within {ACTOR_START_TIMEOUT:.0f} s: "
                "the CPUs they need are held by other work on the cluster. Free them, or pass "
                "ray_actors= / ray_cpus_per_actor= to use fewer."
            ) from None
        except ray.exceptions.RayActorError as exc:
            self.close()
            raise WorkerError(
                "a Ray sampling actor failed to start (the nodes need this package, and the code of the env "
                f"factory and the policy importable, or passed by value with cloudpickle): {exc}"
            ) from None
        except BaseException:
            self.close()
            raise
        #: Each actor's name, node and pid, in words; ``live``: the actors in use;
        #: ``lost``: why each lost actor was dropped.
        self.names = [f"Ray sampling actor {i} (node {w['ip']} {w['node_id'][:8]}, pid {w['pid']})"
                      for i, w in enumerate(self.where)]
        self.live = list(range(len(self.actors)))
        logger.info("MultiTaskSampler: %d Ray sampling actor(s): %s", len(self.actors), ", ".join(self.names))

    # -- RolloutBackend ------------------------------------------------------

    def run(self, request: RolloutRequest, device) -> Trajectories:
        ray = import_ray()
        if self.closed:
            # After a failure or an interruption: new actors, as a local pool is rebuilt.
            self._start()
        if not self.live:
            raise WorkerDiedError(f"every Ray sampling actor has died: {'; '.join(self.lost)}")
        K, call = len(request.tasks), request.call
        payload = _encode_params(self.policy, request.params)
        payload_ref = ray.put(payload)
        stats = {"actors": len(self.live), "puts": 1, "put_bytes": _payload_bytes(payload), "result_bytes": 0,
                 "reruns": 0, "groups": {}}
        # Groups of whole tasks [lo, hi), queued until an actor is free for them.
        queue = [g for g in _split(K, [self.cpus[a] for a in self.live]) if g[1] > g[0]]
        idle = list(self.live)
        pending: Dict[Any, tuple] = {}
        results: Dict[int, Trajectories] = {}
        died: set = set()  # groups (by first task) whose ChildEnv died once

        def dispatch():
            while queue and idle:
                lo, hi = queue.pop(0)
                if not queue and len(idle) > 1 and hi - lo > 1:
                    # A re-run group is shared among every free actor.
                    queue.extend(g for g in _split(hi - lo, [self.cpus[a] for a in idle], lo) if g[1] > g[0])
                    lo, hi = queue.pop(0)
                a = idle.pop(0)
                group = request.group(lo, hi)
                ref = self.actors[a].rollout.remote(payload_ref, replace(group, params=group.params.index_only()))
                pending[ref] = (a, lo, hi)

        dispatch()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                a, lo, hi = pending.pop(ref)
                try:
                    results[lo] = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                    if isinstance(cause, WorkerDiedError) and lo not in died:
                        # A ChildEnv process of a live actor died (killed, out of memory): a lost
                        # process, as a lost actor is, so the group runs again, with the same bits,
                        # on fresh ChildEnvs. Twice for one group is the env's doing: raised.
                        died.add(lo)
                        logger.warning("MultiTaskSampler: a ChildEnv process of %s died (%s); its tasks run again",
                                       self.names[a], str(cause).splitlines()[0])
                        queue.append((lo, hi))
                        stats["reruns"] += 1
                        idle.append(a)
                        continue
                    raise _remote_error(cause, self.names[a], getattr(cause, "actor_traceback", "")) from exc
                except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError,
                        ray.exceptions.WorkerCrashedError) as exc:
                    self._lose(a, exc)
                    queue.append((lo, hi))
                    stats["reruns"] += 1
                    if not self.live:
                        raise WorkerDiedError(
                            f"every Ray sampling actor has died during rollout {call}: {'; '.join(self.lost)}"
                        ) from exc
                else:
                    stats["groups"][lo] = (hi, a)
                    idle.append(a)
            dispatch()
        trajectories = Trajectories.side_by_side([results[lo] for lo in sorted(results)])
        stats["result_bytes"] = trajectories.nbytes()
        self.last_rollout = stats
        return trajectories

    def describe(self) -> str:
        return f"{len(self.names)} Ray sampling actor(s): {', '.join(self.names)}"

    @property
    def worker_pids(self) -> List[int]:
        return [] if self.closed else [self.where[a]["pid"] for a in self.live]

    @property
    def stats(self) -> Dict[str, Any]:
        return dict(self.last_rollout)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._finalizer.detach() is not None:
            _close(self.actors)

    # -- internals -----------------------------------------------------------

    def _lose(self, a: int, exc: BaseException) -> None:
        ray = import_ray()
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        reason = " ".join(line.strip() for line in str(exc).splitlines() if "died because" in line) or first_line
        self.lost.append(f"{self.names[a]}: {reason}")
        self.live.remove(a)
        logger.warning("MultiTaskSampler: lost %s (%s); its tasks run on the %d other actor(s)",
                       self.names[a], reason, len(self.live))
        try:
            ray.kill(self.actors[a], no_restart=True)
        except Exception:
            pass


def _placement(nodes: List[dict], num_actors: Optional[int], cpus_per_actor: Optional[int]) -> List[tuple]:
    """(node id, CPUs) of every actor: one per node, or per ``cpus_per_actor`` CPUs,
    taken round-robin over the nodes so that fewer actors spread over more nodes."""
    per_node = []
    for node in sorted((n for n in nodes if n.get("Alive")), key=lambda n: (n["NodeManagerAddress"], n["NodeID"])):
        cpus = int(node.get("Resources", {}).get("CPU", 0))
        if cpus < 1:
            continue
        if cpus_per_actor is None:
            per_node.append([(node["NodeID"], cpus)])
        elif cpus >= cpus_per_actor:
            per_node.append([(node["NodeID"], cpus_per_actor)] * (cpus // cpus_per_actor))
    slots = [s for round_ in _round_robin(per_node) for s in round_]
    if not slots:
        total = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes if n.get("Alive"))
        raise ValueError(
            f"the Ray cluster has no node with {cpus_per_actor or 1} free CPU(s) for a sampling actor "
            f"({total} CPU(s) in all): add nodes with CPUs (ray start --address=HEAD:PORT --num-cpus=N)"
            + (", or lower ray_cpus_per_actor" if cpus_per_actor else "")
        )
    if num_actors is not None:
        if num_actors > len(slots):
            raise ValueError(f"ray_actors={num_actors}, but the cluster has room for {len(slots)} sampling actor(s)"
                             + (f" of {cpus_per_actor} CPU(s)" if cpus_per_actor else " (one per node)"))
        slots = slots[:num_actors]
    return slots


def _round_robin(per_node: List[List[tuple]]):
    depth = max((len(n) for n in per_node), default=0)
    for i in range(depth):
        yield [n[i] for n in per_node if i < len(n)]


def _split(num_tasks: int, weights: List[int], offset: int = 0) -> List[tuple]:
    """Contiguous [lo, hi) task groups, sized in proportion to ``weights``."""
    bounds = np.round(np.cumsum([0] + list(weights)) / sum(weights) * num_tasks).astype(int)
    return [(offset + int(lo), offset + int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _encode_params(policy: torch.nn.Module, params: TaskParams) -> dict:
    """The policy's state and the call's distinct parameter rows, as numpy arrays (put once per
    rollout; each group's request carries its slice of the index)."""
    own = {name: t.detach().cpu().numpy() for name, t in policy.state_dict().items()}
    return {"own": own, "rows": params.rows_to_numpy()}


def _payload_bytes(payload: dict) -> int:
    arrays = list(payload["own"].values()) + [a for d in payload["rows"] for a in d.values()]
    return int(sum(a.nbytes for a in arrays))


def _remote_error(cause: BaseException, where: str, remote_traceback: str) -> BaseException:
    """The actor's exception, of the same type where it can be rebuilt (with its attributes,
    e.g. a ``StepTimeoutError``'s slot and task), saying which actor raised it, with the actor's traceback."""
    detail = f"\n\nIn the actor:\n{remote_traceback.strip()}" if remote_traceback.strip() else ""
    if isinstance(cause, (SamplerError, ValueError, TypeError, MemoryError)):
        try:
            error = type(cause)(f"{where}: {cause}{detail}")
            error.__dict__.update(vars(cause))
            return error
        except Exception:
            pass
    return WorkerError(f"{where} raised {type(cause).__name__}: {cause}{detail}")


def _close(actors: List[Any]) -> None:
    """Let every actor end its ChildEnv processes, then kill it."""
    ray = import_ray()
    if not ray.is_initialized():
        return
    refs = []
    for actor in actors:
        try:
            refs.append(actor.close.remote())
        except Exception:
            pass
    deadline = time.monotonic() + CLOSE_TIMEOUT
    if refs:
        try:
            ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
        except Exception:
            pass
    _kill(actors)


def _kill(actors: List[Any], owner_pid: Optional[int] = None) -> None:
    if owner_pid is not None and os.getpid() != owner_pid:
        return  # a child of os.fork() (its garbage collection, its exit): the actors are the parent's
    try:
        import ray
    except ImportError:
        return
    if not ray.is_initialized():
        return
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:
            pass
