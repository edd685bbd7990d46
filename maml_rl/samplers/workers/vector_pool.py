"""The vector env's pool: the sampler's ChildEnv processes, stepping ``VectorChildEnv``s.

Starting, waking, liveness checks, failures and shutdown are ``ChildEnvPool``'s; this pool
adds the replies (infos, call results) that a vector env's commands return. The order of the
calls is checked by ``MultiTaskVectorEnv`` (gymnasium's own state rules), not by the
rollout protocol of ``EnvPool``. Torch-free.
"""

from __future__ import annotations

import contextlib
import pickle
from typing import Any, Dict, List, Optional, Sequence

import cloudpickle

from ..errors import WorkerDiedError
from .entry import REPLIED, REQUEST, RESET
from .pools import LIVENESS_CHECK_INTERVAL, ChildEnvPool
from .vector_child_env import VectorBuffers, VectorChildEnv, VectorSpec
from .vector_children import fast_child_env


class VectorEnvPool(ChildEnvPool):
    """``spec.num_workers`` processes, worker ``w`` stepping envs ``spec.ranges[w]``.

    :param env_fns: one factory per env (pickled with cloudpickle, as a whole, for every worker).
    :param spec: the :class:`VectorSpec`.
    :param start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``.
    :param step_timeout: as ``ChildEnvPool``'s (``None``: wait forever).
    """

    stepper = VectorChildEnv
    buffers_type = VectorBuffers

    def __init__(self, env_fns: Sequence[Any], spec: VectorSpec, start_method: str,
                 step_timeout: Optional[float] = None):
        if spec.mujoco_batch is not False:
            self.stepper = fast_child_env(spec)
        super().__init__(cloudpickle.dumps(list(env_fns)), spec.num_workers, spec.num_envs, spec, start_method,
                         step_timeout=step_timeout)
        self.spec = spec
        self.all_workers = list(range(spec.num_workers))

    def reset_tasks(self, tasks: Sequence[Any]) -> Dict[int, Any]:
        """Give each worker its envs' tasks; the replies of those whose envs refused one."""
        self._tasks = tasks  # for a timeout's message
        return self.request("reset_task", [(r.start, list(tasks[r.start:r.stop]), 0) for r in self.ranges])

    def reset_envs(self, seeds: Sequence[Any], options: Any, mask: Any) -> Dict[int, Any]:
        """Reset the envs (the masked ones); the workers' replies."""
        payloads = [(list(seeds[r.start:r.stop]), options, None if mask is None else list(mask[r.start:r.stop]))
                    for r in self.ranges]
        with self._closed_if_interrupted():
            self._broadcast(RESET, payloads)
            return self.replies(self.all_workers)

    def step_shared(self) -> None:
        """Wake every worker to step with the actions in shared memory; ``collect`` gathers them."""
        with self._closed_if_interrupted():
            self._step(self.all_workers, 0)

    def step_pickled(self, actions: Sequence[Any]) -> None:
        """Send every worker its envs' actions; ``collect`` gathers them."""
        with self._closed_if_interrupted():
            self._send(REQUEST, [("step", list(actions[r.start:r.stop])) for r in self.ranges])

    def collect(self) -> Dict[int, Any]:
        """Block until every worker is done; their replies."""
        with self._closed_if_interrupted():
            self._wait(self.all_workers)
            return self.replies(self.all_workers)

    def request(self, kind: str, payloads: List[Any]) -> Dict[int, Any]:
        """A ``REQUEST`` of ``kind`` to every worker (``payloads[w]`` each); their replies."""
        with self._closed_if_interrupted():
            self._send(REQUEST, [(kind, payload) for payload in payloads])
        return self.collect()

    def replies(self, workers: Sequence[int]) -> Dict[int, Any]:
        """The pickled replies of the workers that sent one (status ``REPLIED``)."""
        replies = {}
        for w in workers:
            if self.views.status[w] != REPLIED:
                continue
            connection = self._workers.connections[w]
            while not connection.poll(LIVENESS_CHECK_INTERVAL):
                self._check_alive()
            try:
                replies[w] = pickle.loads(connection.recv_bytes())
            except (EOFError, OSError):
                self._check_alive()
                self._fail(WorkerDiedError(f"ChildEnv worker {w} died while sending its reply"))
        return replies

    @contextlib.contextmanager
    def _closed_if_interrupted(self):
        """Close the pool if a command is cut short (Ctrl-C while waiting, say): a worker may still be
        busy with it, or its reply unread in the pipe, where the next command would take it for its own."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def _send(self, command: int, payloads: List[Any]) -> None:
        """``_broadcast`` without the wait: wake each worker and send its payload."""
        for w in self.all_workers:
            self.views.command[w] = command
            self._workers.wakes[w].release()
            self._workers.connections[w].send_bytes(cloudpickle.dumps(payloads[w]))
