"""The vector env's envs stepped in the calling process (``MultiTaskVectorEnv(num_workers=0)``).

One stepper holds every env: a :class:`~.vector_child_env.VectorChildEnv`, or on the fast path
a :class:`~.batched_vector_child_env.BatchedVectorChildEnv` whose one ``mujoco.batch`` call a step runs
its simulations on ``batch_threads`` threads (in C, without the GIL), or for envs with their own stepper
(Meta-World's) a :class:`~.stepper_vector_child_env.StepperVectorChildEnv`. No wake-ups, no pipe, no pickled
replies: where the physics is cheap next to a process hand-off (a few dozen MuJoCo envs), this is the
fastest layout, as it is for the sampler (``InProcessPool``). The calls and replies are
``VectorEnvPool``'s, so ``MultiTaskVectorEnv`` drives either. Torch-free.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable, Dict, List, Sequence

from ..errors import WorkerError
from .vector_child_env import VectorBuffers, VectorChildEnv, VectorSpec
from .vector_children import fast_child_env


class InProcessVectorPool:
    """Every env of ``spec`` in this process (``spec.num_workers`` is 1: one range, all envs).

    :param env_fns: one factory per env.
    :param spec: the :class:`VectorSpec`.
    :param batch_threads: the fast path's ``mujoco.batch`` threads (this one included).
    """

    def __init__(self, env_fns: Sequence[Any], spec: VectorSpec, batch_threads: int = 1):
        self.closed = True
        self.child = None
        self.spec = spec
        self.buffers = VectorBuffers.allocate(spec, spec.num_envs, 1, ctx=None)
        self.views = self.buffers.views()
        if spec.mujoco_batch is not False:
            fast = fast_child_env(spec)
            self.child = self._run(lambda: fast(env_fns, spec.num_envs, self.views, 0, spec, nthread=batch_threads))
        else:
            self.child = self._run(lambda: VectorChildEnv(env_fns, spec.num_envs, self.views, 0, spec))
        self._reply: Any = None
        self.closed = False

    @property
    def worker_pids(self) -> List[int]:
        return []

    def reset_tasks(self, tasks: Sequence[Any]) -> Dict[int, Any]:
        return self.request("reset_task", [(0, list(tasks), 0)])

    def reset_envs(self, seeds: Sequence[Any], options: Any, mask: Any) -> Dict[int, Any]:
        request = (list(seeds), options, None if mask is None else list(mask))
        return self._replies(self._run(lambda: self.child.reset(request)))

    def step_shared(self) -> None:
        """Step with the actions in the buffer now; ``collect`` returns the infos."""
        self._reply = self._run(self.child.step)

    def step_pickled(self, actions: Sequence[Any]) -> None:
        self._reply = self._run(lambda: self.child.request(("step", list(actions))))

    def collect(self) -> Dict[int, Any]:
        reply, self._reply = self._reply, None
        return self._replies(reply)

    def request(self, kind: str, payloads: List[Any]) -> Dict[int, Any]:
        return {0: self._run(lambda: self.child.request((kind, payloads[0])))}

    def close(self) -> None:
        self.closed = True
        if self.child is not None:
            child, self.child = self.child, None
            child.close()

    @staticmethod
    def _replies(reply: Any) -> Dict[int, Any]:
        return {} if reply is None else {0: reply}

    def _run(self, operation: Callable[[], Any]) -> Any:
        """``operation()``; an env's exception closes the pool and comes back as the workers' ``WorkerError``
        (the env and operation, the traceback); Ctrl-C closes it too, since the envs may be mid-step."""
        try:
            return operation()
        except Exception as exc:
            where = "while starting" if self.child is None else self.child.describe_failure()
            message = f"the environment failed {where}: {exc!r}\n{traceback.format_exc()}"
            self.close()
            raise WorkerError(message) from exc
        except BaseException:
            self.close()
            raise
