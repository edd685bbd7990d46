"""The interface a MuJoCo env opts into so that many copies step as one.

The sampler's fast path (``maml_rl.samplers.workers.batched_child_env``) keeps one
``mujoco.batch.Batch`` over a worker's env slots and advances all of them
with one C call per step. For that it needs the env's step as arithmetic
on arrays: the model and frame skip, how actions become controls, and the
observation, reward and termination as functions of the simulations' bound
fields (``qpos``, ``qvel``, ``xpos``, ...) and of per-slot task arrays.

An env class opts in by subclassing :class:`VectorisedMujocoEnv`; nothing
is guessed from "is a MujocoEnv". The contract is exactness: for
simulations that start where the env's own ``reset`` leaves them, the
vectorised functions give, bit for bit, the observations, rewards and
terminations of ``env.step`` (the tests check this for every env that opts
in). Every other env keeps the per-env path.

Fields are read as ``mujoco.batch`` binds them: after a step, derived
fields such as ``xpos`` describe the state before the last substep, exactly
as ``MjData`` does after ``mj_step``. The vectorised functions get the rows
of the simulations being stepped (``fields[name][rows]``), in slot order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["VectorisedMujocoEnv"]


class VectorisedMujocoEnv(ABC):
    """Mixin of a MuJoCo env whose step can be computed for many simulations.

    Besides the abstract methods, the env has gymnasium's ``MujocoEnv``
    attributes ``model``, ``data`` and ``frame_skip``: a batched stepper
    builds its simulations from ``model``, advances them ``frame_skip``
    substeps per env step, and starts each episode from the ``qpos`` and
    ``qvel`` that the env's own ``reset`` left in ``data``.
    """

    #: The ``MjData`` fields the vectorised functions read (bound once per batch).
    vector_fields: tuple[str, ...] = ("qpos", "qvel", "xpos")

    @abstractmethod
    def vector_tasks(self, tasks: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        """Per-slot task arrays, one row per task (tasks already validated)."""

    @abstractmethod
    def vector_controls(self, actions: np.ndarray) -> np.ndarray:
        """``action_to_control`` of ``actions`` (n, nu): the float64 controls."""

    @abstractmethod
    def vector_before(self, fields: Mapping[str, np.ndarray]) -> Any:
        """What the outputs need from before the step (e.g. the x position),
        from the fields' rows of the simulations about to step: the bound
        arrays themselves when every simulation steps, so copy what you keep."""

    @abstractmethod
    def vector_outputs(
        self,
        fields: Mapping[str, np.ndarray],
        before: Any,
        controls: np.ndarray,
        tasks: Mapping[str, np.ndarray],
        observations: np.ndarray,
        infos: dict | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """After the step: write the observations (n, obs) into
        ``observations`` and return the float64 rewards (n,) and the boolean
        terminations (n,). ``fields`` and ``tasks`` hold the stepped rows.
        With ``infos`` (a dict), also set in it, for each key of ``env.step``'s
        info in its order, the (n,) values of the stepped rows (the vector
        env's fast path, which returns them; the sampler's asks for none)."""
