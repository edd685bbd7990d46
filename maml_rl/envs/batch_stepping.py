"""The interface an env opts into so that a worker steps its copies together through a stepper the env makes.

``VectorisedMujocoEnv`` (``vectorised.py``) suits envs whose whole step is one formula over bound MuJoCo
fields. Others need their own machinery: a Meta-World benchmark's slots hold envs of several task classes,
each with its own model and reward, and its resets run the env's own code. Such an env subclasses
:class:`BatchSteppedEnv` and returns a :class:`BatchStepper` over a worker's copies; the sampler's fast
path (``maml_rl.samplers.workers.stepper_child_env``) then drives that stepper instead of calling
``env.step`` slot by slot, and keeps everything else (resets with their seeds, tasks, horizons, time
limits, the buffers) as the per-env path does.

The contract is exactness: for every slot, the stepper's observations, rewards, terminations, truncations
and info values equal, bit for bit, what the slot's own ``env.step`` would return on the same actions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Optional, Tuple

import numpy as np

__all__ = ["BatchStepper", "BatchSteppedEnv", "StepResult"]

#: ``BatchStepper.step``'s result: observations (n, ...), float64 rewards (n,), bool terminations (n,),
#: bool truncations (n,), and float64 infos (n, len(info_keys)).
StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class BatchStepper(ABC):
    """Steps a worker's envs (``envs[i]`` is slot ``first_slot + i``'s env, unwrapped) together.

    The sampler calls, in order: :meth:`release` before it sets new tasks, then each env's
    ``reset_task``, then :meth:`assign`; around every ``env.reset`` of env ``i``,
    :meth:`before_reset` and :meth:`after_reset`; :meth:`step` once per step.
    """

    @abstractmethod
    def release(self) -> None:
        """New tasks follow: leave every env's own state as its own ``step`` calls would have left it."""

    @abstractmethod
    def assign(self, count: int) -> None:
        """The first ``count`` envs hold this call's tasks (their ``reset_task`` has run)."""

    @abstractmethod
    def before_reset(self, i: int) -> None:
        """Env ``i`` is about to be reset: give it the state its steps left it in."""

    @abstractmethod
    def after_reset(self, i: int) -> None:
        """Env ``i`` was just reset: continue stepping it from its new state."""

    @abstractmethod
    def step(self, rows: np.ndarray, actions: np.ndarray, info_keys: Sequence[str]) -> StepResult:
        """``envs[i].step(actions[k])`` for each ``i = rows[k]`` (a sorted int array of distinct rows below
        :meth:`assign`'s ``count``, all of them on most steps), as arrays; the
        infos' columns are ``info_keys`` (a clear ``ValueError`` for a key the env does not return)."""

    #: The keys of every env's step info where :meth:`info_types` says each row's types, else ``None`` (the
    #: vector env steps envs through a stepper only then: gymnasium's vector infos type their arrays by the values).
    all_info_keys: Optional[Tuple[str, ...]] = None

    def info_types(self) -> Sequence[Any]:
        """After :meth:`step`: for each of its rows, the info dict the env's own code returned where the stepper
        ran it, else the row's info keys in the order its env's ``step`` gives them, each with the type of its
        value there (``float`` for a Python or NumPy float64): ``((key, type), ...)``."""
        raise NotImplementedError(f"{type(self).__name__} does not say its infos' types (all_info_keys)")

    def close(self) -> None:
        """Free what the stepper holds (the envs are closed by their owner)."""


class BatchSteppedEnv(ABC):
    """Mixin of an env whose copies a :class:`BatchStepper` can step together."""

    @abstractmethod
    def batch_support(self) -> Optional[str]:
        """``None`` if :meth:`batch_stepper` can step copies of this env, else why not (shown to the user)."""

    @abstractmethod
    def batch_stepper(self, envs: Sequence[Any], nthread: int) -> BatchStepper:
        """A stepper over ``envs`` (unwrapped copies of this env), its physics on ``nthread`` threads."""

    def batch_in_process(self) -> bool:
        """Whether the stepper runs best in the sampler's own process, all slots in one stepper with
        ``nthread`` threads (the default layout, as for the MuJoCo fast path), rather than one worker process
        per CPU, each stepping its share of the slots on one thread (worth it where the stepper leaves much
        Python per env: one process runs it on one core)."""
        return True
