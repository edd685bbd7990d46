"""Exceptions raised by the sampler and by its vector env."""

from gymnasium.error import ClosedEnvironmentError, ResetNeeded


class SamplerError(RuntimeError):
    """Base class of the errors the sampler raises about its workers."""


class WorkerError(SamplerError):
    """An environment raised inside a ChildEnv worker.

    The message carries the worker's traceback, the slot and the task.
    """


class WorkerDiedError(SamplerError):
    """A ChildEnv worker process exited without being asked to."""


class SamplerClosedError(SamplerError):
    """The sampler was used after ``close()`` or after a worker failure."""


class EnvOutputError(SamplerError, ValueError):
    """An environment returned something the sampler cannot use (a non-finite
    observation or reward, or an episode it never ended); the message names
    the env, the slot, the task and the step."""


class PoolStateError(SamplerError):
    """An env pool was called out of order (e.g. ``wait()`` on a worker that
    was never asked to step, which would block forever)."""


class PolicyOutputError(SamplerError, ValueError):
    """The policy returned something no env should get: actions of the wrong
    shape, rows or number of categories, or non-finite actions. The message
    names the policy, the slot, the task and the step, what it returned and
    what was expected; no env has been stepped with it."""


class StepTimeoutError(SamplerError):
    """A worker did not finish a command (a step, a reset) within the sampler's ``step_timeout``.

    The message names the worker, its pid, the command, and the slot and task
    it was stepping (when the worker could still say; else its slots and
    tasks). That worker has been killed and the others ended; the next call
    starts new ones. ``worker``, ``pid``, ``slot`` and ``task`` hold the same
    (``slot``/``task`` ``None`` when the worker could not say).
    """

    def __init__(self, message: str, *, worker=None, pid=None, slot=None, task=None):
        super().__init__(message)
        self.worker, self.pid, self.slot, self.task = worker, pid, slot, task


class ForkedSamplerError(SamplerError):
    """A sampler was used in a child process (after ``os.fork()``) of the process
    that built it: its workers and shared memory belong to that process."""


class VectorEnvClosedError(SamplerClosedError, ClosedEnvironmentError):
    """The vector env was used after ``close()`` or after a worker failure."""


class VectorResetNeeded(PoolStateError, ResetNeeded):
    """``step`` before the first ``reset`` (or, with ``AutoresetMode.DISABLED``, on an env whose
    episode ended and that was not reset)."""
