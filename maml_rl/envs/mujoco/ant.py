"""Ant with a target velocity, direction or position (Finn et al., 2017)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np
from gymnasium import spaces

from maml_rl.envs.mujoco.base import DirectionTask, MetaMujocoEnv, VelocityTask

__all__ = ["AntEnv", "AntVelEnv", "AntDirEnv", "AntPosEnv"]


class AntEnv(MetaMujocoEnv):
    """Gymnasium's v5 Ant model (``dt = 0.05``).

    Observation (125,) float32: ``qpos`` (15), ``qvel`` (14), the contact
    forces ``clip(cfrc_ext, -1, 1)`` of the 14 bodies (84), the torso
    orientation matrix (9) and the torso position (3). Every reward subtracts
    ``0.005 * ||a||^2 + 0.0005 * ||clip(cfrc_ext, -1, 1)||^2`` and adds the
    survive bonus 0.05. The episode terminates when the torso height
    ``qpos[2]`` leaves ``[0.2, 1.0]`` or the state is not finite.
    """

    ctrl_cost_weight = 0.5 * 1e-2
    contact_cost_weight = 0.5 * 1e-3
    survive_reward = 0.05
    healthy_z_range = (0.2, 1.0)

    def __init__(
        self,
        task: Mapping[str, Any] | None,
        low: float,
        high: float,
        normalization_scale: float = 1.0,
        xml_file: str = "ant.xml",
        **kwargs: Any,
    ):
        super().__init__(
            xml_file, task, low, high, normalization_scale=normalization_scale, **kwargs
        )
        self._torso_xmat = self.data.xmat[self._torso]
        self._cfrc_ext = self.data.cfrc_ext
        nq, nv, nbody = self.model.nq, self.model.nv, self.model.nbody
        self._slices = (
            slice(0, nq),
            slice(nq, nq + nv),
            slice(nq + nv, nq + nv + 6 * nbody),
            slice(nq + nv + 6 * nbody, nq + nv + 6 * nbody + 9),
            slice(nq + nv + 6 * nbody + 9, nq + nv + 6 * nbody + 12),
        )
        self._obs_size = nq + nv + 6 * nbody + 12
        self.observation_space = spaces.Box(
            low=-np.inf, high=np.inf, shape=(self._obs_size,), dtype=np.float32
        )

    def _get_obs(self, contact_forces: np.ndarray | None = None) -> np.ndarray:
        if contact_forces is None:
            contact_forces = np.clip(self._cfrc_ext, -1.0, 1.0)
        qpos, qvel, cfrc, xmat, xpos = self._slices
        obs = np.empty(self._obs_size, dtype=np.float32)
        obs[qpos] = self._qpos
        obs[qvel] = self._qvel
        obs[cfrc] = contact_forces.ravel()
        obs[xmat] = self._torso_xmat
        obs[xpos] = self._torso_xpos
        return obs

    def set_state(self, qpos, qvel) -> None:
        super().set_state(qpos, qvel)
        # Fill cfrc_ext so that the observation after a reset holds the contact forces.
        mujoco.mj_rnePostConstraint(self.model, self.data)

    def _task_reward(self, xy_before: np.ndarray, xy_after: np.ndarray) -> tuple[float, dict]:
        """The task-specific part of the reward and its info entries."""
        raise NotImplementedError

    def step(self, action):
        ctrl = self.action_to_control(action)
        xy_before = self._torso_xpos[:2].copy()
        self._ctrl[:] = ctrl
        mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
        # MuJoCo computes the contact forces cfrc_ext only on request.
        mujoco.mj_rnePostConstraint(self.model, self.data)
        task_reward, info = self._task_reward(xy_before, self._torso_xpos[:2])

        contact_forces = np.clip(self._cfrc_ext, -1.0, 1.0)
        ctrl_cost = self.ctrl_cost_weight * float(ctrl @ ctrl)
        contact_cost = self.contact_cost_weight * float(np.sum(np.square(contact_forces)))
        reward = task_reward - ctrl_cost - contact_cost + self.survive_reward

        height = self._qpos[2]
        z_min, z_max = self.healthy_z_range
        terminated = not (
            z_min <= height <= z_max
            and np.isfinite(self._qpos).all()
            and np.isfinite(self._qvel).all()
        )
        observation = self._get_obs(contact_forces)
        if self.render_mode == "human":
            self.render()
        info["reward_ctrl"] = -ctrl_cost
        info["reward_contact"] = -contact_cost
        info["reward_survive"] = self.survive_reward
        return observation, reward, terminated, False, info


class AntVelEnv(VelocityTask, AntEnv):
    """Ant running at a target velocity along x.

    * Task ``{"velocity": float}``, uniform in ``[low, high]`` (default [0, 3]).
    * Reward ``-|v_x - velocity| + 1.0 + 0.05 - costs``, with ``v_x`` the finite
      difference of the torso x position over ``dt``. Horizon 200 by default.
    """

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        low: float = 0.0,
        high: float = 3.0,
        normalization_scale: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(task, low, high, normalization_scale=normalization_scale, **kwargs)


    def _task_reward(self, xy_before, xy_after):
        forward_velocity = float(xy_after[0] - xy_before[0]) / self._dt
        reward = -abs(forward_velocity - self._goal_velocity) + 1.0
        return reward, {"forward_velocity": forward_velocity, "reward_forward": reward}


class AntDirEnv(DirectionTask, AntEnv):
    """Ant running forward or backward along x.

    * Task ``{"direction": +1 or -1}``, each with probability 1/2.
    * Reward ``direction * v_x + 0.05 - costs``. Horizon 200 by default.
    """

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        normalization_scale: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(task, -1.0, 1.0, normalization_scale=normalization_scale, **kwargs)


    def _task_reward(self, xy_before, xy_after):
        forward_velocity = float(xy_after[0] - xy_before[0]) / self._dt
        reward = self._direction * forward_velocity
        return reward, {"forward_velocity": forward_velocity, "reward_forward": reward}


class AntPosEnv(AntEnv):
    """Ant walking to a goal position on the plane.

    * Task ``{"position": (2,)}``, uniform in ``[low, high]^2`` (default [-3, 3]^2).
    * Reward ``-||torso_xy - position||_1 + 4.0 + 0.05 - costs``. Horizon 200
      by default.
    """

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        low: float = -3.0,
        high: float = 3.0,
        normalization_scale: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(task, low, high, normalization_scale=normalization_scale, **kwargs)

    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"position": (2,)}

    def default_task(self) -> dict[str, Any]:
        return {"position": np.zeros(2)}

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        positions = self.np_random.uniform(self.low, self.high, size=(num_tasks, 2))
        return [{"position": p} for p in positions]

    def _on_task_change(self) -> None:
        self._goal_position = self._task["position"]

    def _task_reward(self, xy_before, xy_after):
        distance = float(np.abs(xy_after - self._goal_position).sum())
        reward = -distance + 4.0
        return reward, {"distance": distance, "reward_forward": reward}
