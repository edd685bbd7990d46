"""HalfCheetah with a target velocity or a target direction (Finn et al., 2017)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np
from gymnasium import spaces

from maml_rl.envs.mujoco.base import DirectionTask, MetaMujocoEnv, VelocityTask
from maml_rl.envs.vectorised import VectorisedMujocoEnv

__all__ = ["HalfCheetahEnv", "HalfCheetahVelEnv", "HalfCheetahDirEnv"]


class HalfCheetahEnv(MetaMujocoEnv, VectorisedMujocoEnv):
    """Gymnasium's v5 HalfCheetah model (``dt = 0.05``), never terminating.

    Observation (20,) float32: ``qpos[1:]`` (8), ``qvel`` (9) and the torso
    position ``get_body_com("torso")`` (3). ``forward_velocity`` is
    ``(qpos[0] after - qpos[0] before) / dt``; the control cost is
    ``0.05 * ||a||^2`` on the control ``a`` applied to the model.
    """

    ctrl_cost_weight = 0.5 * 1e-1

    def __init__(
        self,
        task: Mapping[str, Any] | None,
        low: float,
        high: float,
        normalization_scale: float = 1.0,
        xml_file: str = "half_cheetah.xml",
        **kwargs: Any,
    ):
        super().__init__(
            xml_file, task, low, high, normalization_scale=normalization_scale, **kwargs
        )
        self._nq = self.model.nq
        self._obs_size = self.model.nq - 1 + self.model.nv + 3
        self.observation_space = spaces.Box(
            low=-np.inf, high=np.inf, shape=(self._obs_size,), dtype=np.float32
        )

    def _get_obs(self) -> np.ndarray:
        obs = np.empty(self._obs_size, dtype=np.float32)
        nq = self._nq
        obs[: nq - 1] = self._qpos[1:]
        obs[nq - 1 : -3] = self._qvel
        obs[-3:] = self._torso_xpos
        return obs

    def _forward_reward(self, forward_velocity: float) -> float:
        raise NotImplementedError

    def step(self, action):
        ctrl = self.action_to_control(action)
        x_before = self._qpos[0]
        self._ctrl[:] = ctrl
        mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
        forward_velocity = float(self._qpos[0] - x_before) / self._dt
        forward_reward = self._forward_reward(forward_velocity)
        ctrl_cost = self.ctrl_cost_weight * float(ctrl @ ctrl)
        observation = self._get_obs()
        if self.render_mode == "human":
            self.render()
        info = {
            "forward_velocity": forward_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
        }
        return observation, forward_reward - ctrl_cost, False, False, info

    # -- the same step for many simulations (VectorisedMujocoEnv) -----------

    vector_fields = ("qpos", "qvel", "xpos")

    def _vector_forward_reward(self, forward_velocity: np.ndarray, tasks) -> np.ndarray:
        raise NotImplementedError

    def vector_before(self, fields):
        return fields["qpos"][:, 0].copy()

    def vector_outputs(self, fields, before, controls, tasks, observations, infos=None):
        qpos, nq = fields["qpos"], self._nq
        observations[:, : nq - 1] = qpos[:, 1:]
        observations[:, nq - 1 : -3] = fields["qvel"]
        observations[:, -3:] = fields["xpos"][:, self._torso]
        forward_velocity = (qpos[:, 0] - before) / self._dt
        # Row sums of c * c: bit-identical to step's ``float(ctrl @ ctrl)`` (tested).
        ctrl_cost = self.ctrl_cost_weight * (controls * controls).sum(axis=1)
        forward_reward = self._vector_forward_reward(forward_velocity, tasks)
        rewards = forward_reward - ctrl_cost
        if infos is not None:
            infos.update(forward_velocity=forward_velocity, reward_forward=forward_reward, reward_ctrl=-ctrl_cost)
        return rewards, np.zeros(len(rewards), dtype=bool)


class HalfCheetahVelEnv(VelocityTask, HalfCheetahEnv):
    """HalfCheetah running at a target velocity.

    * Task ``{"velocity": float}``, uniform in ``[low, high]`` (default [0, 2]).
    * Reward ``-|v_x - velocity| - 0.05 * ||a||^2``. Horizon 200 by default.
    """

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        low: float = 0.0,
        high: float = 2.0,
        normalization_scale: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(task, low, high, normalization_scale=normalization_scale, **kwargs)


    def _forward_reward(self, forward_velocity: float) -> float:
        return -abs(forward_velocity - self._goal_velocity)

    def _vector_forward_reward(self, forward_velocity, tasks):
        return -np.abs(forward_velocity - tasks["velocity"])


class HalfCheetahDirEnv(DirectionTask, HalfCheetahEnv):
    """HalfCheetah running forward or backward.

    * Task ``{"direction": +1 or -1}``, each with probability 1/2.
    * Reward ``direction * v_x - 0.05 * ||a||^2``. Horizon 200 by default.
    """

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        normalization_scale: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(task, -1.0, 1.0, normalization_scale=normalization_scale, **kwargs)


    def _forward_reward(self, forward_velocity: float) -> float:
        return self._direction * forward_velocity

    def _vector_forward_reward(self, forward_velocity, tasks):
        return tasks["direction"] * forward_velocity
