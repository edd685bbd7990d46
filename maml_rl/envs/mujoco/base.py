"""Common base of the MuJoCo meta-learning environments.

Importing this module installs a MuJoCo warning handler that drops the
compiler's ``settotalmass`` deprecation message (gymnasium's v5 assets still
use that attribute, and MuJoCo would print it, and append it to
``MUJOCO_LOG.TXT``, for every model compiled).  Every other MuJoCo warning is
passed on to the handler installed before, or raised with
:func:`warnings.warn`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.envs.mujoco import MujocoEnv

from maml_rl.envs.meta_env import MetaEnv, validate_normalization_scale

__all__ = ["DirectionTask", "MetaMujocoEnv", "MujocoWarning", "VelocityTask"]

_DROPPED_WARNINGS = ("compiler attribute 'settotalmass' is deprecated",)


class MujocoWarning(RuntimeWarning):
    """A warning emitted by the MuJoCo engine."""


def _install_warning_filter() -> None:
    previous = mujoco.get_mju_user_warning()
    if getattr(previous, "drops_settotalmass", False):
        return

    def handler(message: str) -> None:
        if message.startswith(_DROPPED_WARNINGS):
            return
        if previous is not None:
            previous(message)
        else:
            warnings.warn(message, MujocoWarning, stacklevel=2)

    handler.drops_settotalmass = True
    mujoco.set_mju_user_warning(handler)


_install_warning_filter()


class MetaMujocoEnv(MetaEnv, MujocoEnv):
    """MuJoCo environment with a task and a normalised action space.

    The action space is ``Box(-s, s)`` with ``s = normalization_scale``; an
    action is clipped to ``[-s, s]`` and mapped linearly onto the actuators'
    control range before being applied. Reset noise follows the reference:
    ``qpos = init_qpos + U(-0.1, 0.1)``, ``qvel = init_qvel + 0.1 N(0, 1)``.
    Episodes are cut by gymnasium's ``TimeLimit`` (200 steps by default).
    """

    metadata = {
        "render_modes": ["human", "rgb_array", "depth_array", "rgbd_tuple"],
        "render_fps": 20,
    }
    reset_noise_scale = 0.1

    def __init__(
        self,
        xml_file: str,
        task: Mapping[str, Any] | None,
        low: float,
        high: float,
        normalization_scale: float = 1.0,
        frame_skip: int = 5,
        default_camera_config: dict[str, float] | None = None,
        **kwargs: Any,
    ):
        scale = validate_normalization_scale(normalization_scale)
        if not low <= high:
            raise ValueError(f"Expected low <= high, got low={low}, high={high}.")
        self.normalization_scale = scale
        self.low = float(low)
        self.high = float(high)
        if default_camera_config is None:
            default_camera_config = {"distance": 4.0}
        MujocoEnv.__init__(
            self,
            xml_file,
            frame_skip,
            observation_space=None,
            default_camera_config=default_camera_config,
            **kwargs,
        )
        self.metadata = dict(self.metadata, render_fps=int(np.round(1.0 / self.dt)))
        # Cached views on the simulation buffers (they are never reallocated).
        self._qpos = self.data.qpos
        self._qvel = self.data.qvel
        self._ctrl = self.data.ctrl
        self._torso = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "torso")
        self._torso_xpos = self.data.xpos[self._torso]
        self._dt = self.dt
        self.reset_task(self.default_task() if task is None else task)

    def _set_action_space(self) -> spaces.Box:
        ctrl_low, ctrl_high = self.model.actuator_ctrlrange.T.astype(np.float64)
        if not np.all(self.model.actuator_ctrllimited) or np.any(ctrl_high <= ctrl_low):
            raise ValueError("Every actuator of the model needs a control range.")
        scale = self.normalization_scale
        # ctrl = ctrl_center + action * ctrl_gain for action in [-scale, scale].
        center = 0.5 * (ctrl_high + ctrl_low)
        gain = 0.5 * (ctrl_high - ctrl_low) / scale
        # None marks an identity part of the map, skipped in ``action_to_control``.
        self._ctrl_center = None if np.all(center == 0.0) else center
        self._ctrl_gain = None if np.all(gain == 1.0) else gain
        self._action_shape = (self.model.nu,)
        self.action_space = spaces.Box(
            low=-scale, high=scale, shape=self._action_shape, dtype=np.float32
        )
        return self.action_space

    def action_to_control(self, action) -> np.ndarray:
        """Clip ``action`` to ``[-scale, scale]`` and map it onto the control range."""
        ctrl = np.array(action, dtype=np.float64)
        if ctrl.shape != self._action_shape:
            raise ValueError(
                f"Expected an action of shape {self._action_shape}, got {ctrl.shape}."
            )
        return self._map_to_control(ctrl)

    def vector_controls(self, actions: np.ndarray) -> np.ndarray:
        """:meth:`action_to_control` of every row of ``actions`` (n, nu), bit for bit."""
        ctrl = np.array(actions, dtype=np.float64)
        if ctrl.shape[1:] != self._action_shape:
            raise ValueError(
                f"Expected actions of shape (n, {self._action_shape[0]}), got {ctrl.shape}."
            )
        return self._map_to_control(ctrl)

    def _map_to_control(self, ctrl: np.ndarray) -> np.ndarray:
        """Clip and map ``ctrl`` (float64, one action or rows of them) in place."""
        s = self.normalization_scale
        np.maximum(ctrl, -s, out=ctrl)
        np.minimum(ctrl, s, out=ctrl)
        # MuJoCo clamps ``ctrl`` of control-limited actuators itself, so rounding
        # a last bit outside the range is harmless.
        if self._ctrl_gain is not None:
            ctrl *= self._ctrl_gain
        if self._ctrl_center is not None:
            ctrl += self._ctrl_center
        return ctrl

    def vector_tasks(self, tasks) -> dict[str, np.ndarray]:
        """The tasks' values, one row per task, under the task's keys."""
        return {key: np.array([task[key] for task in tasks], dtype=np.float64).reshape(len(tasks), *shape)
                for key, shape in self.task_shapes().items()}

    def reset_model(self) -> np.ndarray:
        noise = self.reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(low=-noise, high=noise, size=self.model.nq)
        qvel = self.init_qvel + noise * self.np_random.standard_normal(self.model.nv)
        self.set_state(qpos, qvel)
        return self._get_obs()

    def _get_obs(self) -> np.ndarray:
        raise NotImplementedError

    def default_task(self) -> dict[str, Any]:
        """The task used when the constructor gets ``task=None``."""
        raise NotImplementedError

    def get_task(self) -> dict[str, Any]:
        return {key: (value.copy() if isinstance(value, np.ndarray) else value)
                for key, value in self._task.items()}

    def reset_task(self, task: Mapping[str, Any]) -> None:
        self._task = self.validate_task(task)
        self._on_task_change()

    def _on_task_change(self) -> None:
        """Cache the task's values for ``step``."""


class DirectionTask:
    """Task ``{"direction": +1 or -1}``, each with probability 1/2.

    A mixin placed before a ``MetaMujocoEnv`` subclass, which reads
    ``self._direction`` in its reward.
    """

    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"direction": ()}

    def validate_task(self, task: Any) -> dict[str, Any]:
        task = super().validate_task(task)
        if task["direction"] not in (-1.0, 1.0):
            raise ValueError(f"Task key 'direction' must be +1 or -1, got {task['direction']}.")
        return task

    def default_task(self) -> dict[str, Any]:
        return {"direction": 1.0}

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        directions = 2 * self.np_random.binomial(1, 0.5, size=num_tasks) - 1
        return [{"direction": float(d)} for d in directions]

    def _on_task_change(self) -> None:
        self._direction = self._task["direction"]


class VelocityTask:
    """Task ``{"velocity": float}``, uniform in ``[low, high]``.

    A mixin placed before a ``MetaMujocoEnv`` subclass, which reads
    ``self._goal_velocity`` in its reward.
    """

    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"velocity": ()}

    def default_task(self) -> dict[str, Any]:
        return {"velocity": 0.0}

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        velocities = self.np_random.uniform(self.low, self.high, size=num_tasks)
        return [{"velocity": float(v)} for v in velocities]

    def _on_task_change(self) -> None:
        self._goal_velocity = self._task["velocity"]
