"""Ant with a target velocity, direction or position (Finn et al., 2017)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np
from gymnasium import spaces

from maml_rl.envs.mujoco.base import DirectionTask, MetaMujocoEnv, VelocityTask
from maml_rl.envs.vectorised import VectorisedMujocoEnv

__all__ = ["AntEnv", "AntVelEnv", "AntDirEnv", "AntPosEnv"]

# The site and sensor added to the model so that MuJoCo computes cfrc_ext.
CONTACT_FORCE_SITE = "contact_force_probe"


class AntEnv(MetaMujocoEnv, VectorisedMujocoEnv):
    """Gymnasium's v5 Ant model (``dt = 0.05``).

    Observation (125,) float32: ``qpos`` (15), ``qvel`` (14), the contact
    forces ``clip(cfrc_ext, -1, 1)`` of the 14 bodies (84), the torso
    orientation matrix (9) and the torso position (3). Every reward subtracts
    ``0.005 * ||a||^2 + 0.0005 * ||clip(cfrc_ext, -1, 1)||^2`` and adds the
    survive bonus 0.05. The episode terminates when the torso height
    ``qpos[2]`` leaves ``[0.2, 1.0]`` or the state is not finite.

    Contact forces. ``cfrc_ext`` is computed by ``mj_rnePostConstraint``,
    which MuJoCo runs only when a sensor needs it. The model gets one such
    sensor (an accelerometer at a massless site on the torso, whose reading is
    unused), so the forces are computed inside every ``mj_step``, from one
    consistent state: those of the step's last substep. gymnasium's v5 Ant
    instead calls ``mj_rnePostConstraint`` after ``mj_step``, mixing the
    integrated velocities with the kinematics of before the last substep.
    The two differ (up to 2 after clipping); the in-step forces are also what
    ``mujoco.batch`` computes for the sampler's fast path, so both paths give
    the same numbers bit for bit. The dynamics are unchanged.
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

    def _initialize_simulation(self):
        # The unused sensor makes MuJoCo compute cfrc_ext in every step (and
        # in the mj_forward of a reset); see the class docstring.
        spec = mujoco.MjSpec.from_file(self.fullpath)
        spec.body("torso").add_site(name=CONTACT_FORCE_SITE)
        spec.add_sensor(
            name=CONTACT_FORCE_SITE,
            type=mujoco.mjtSensor.mjSENS_ACCELEROMETER,
            objtype=mujoco.mjtObj.mjOBJ_SITE,
            objname=CONTACT_FORCE_SITE,
        )
        model = spec.compile()
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
        return model, mujoco.MjData(model)

    def _task_reward(self, xy_before: np.ndarray, xy_after: np.ndarray) -> tuple[float, dict]:
        """The task-specific part of the reward and its info entries."""
        raise NotImplementedError

    def step(self, action):
        ctrl = self.action_to_control(action)
        xy_before = self._torso_xpos[:2].copy()
        self._ctrl[:] = ctrl
        mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
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

    # -- the same step for many simulations (VectorisedMujocoEnv) -----------

    vector_fields = ("qpos", "qvel", "xpos", "xmat", "cfrc_ext")

    def _vector_task_reward(self, xy_before: np.ndarray, xy_after: np.ndarray, tasks,
                            infos: dict | None = None) -> np.ndarray:
        """The task-specific part of the rewards; with ``infos``, its info entries as ``_task_reward``'s."""
        raise NotImplementedError

    def vector_before(self, fields):
        return fields["xpos"][:, self._torso, :2].copy()

    def vector_outputs(self, fields, before, controls, tasks, observations, infos=None):
        n = len(controls)
        qpos, qvel, xpos = fields["qpos"], fields["qvel"], fields["xpos"][:, self._torso]
        contact_forces = np.clip(fields["cfrc_ext"].reshape(n, -1), -1.0, 1.0)
        qpos_cols, qvel_cols, cfrc_cols, xmat_cols, xpos_cols = self._slices
        observations[:, qpos_cols] = qpos
        observations[:, qvel_cols] = qvel
        observations[:, cfrc_cols] = contact_forces
        observations[:, xmat_cols] = fields["xmat"][:, self._torso]
        observations[:, xpos_cols] = xpos
        task_reward = self._vector_task_reward(before, xpos[:, :2], tasks, infos)
        if infos is None:
            # Row sums, as step's sums over one row (bit-identical, tested).
            ctrl_cost = self.ctrl_cost_weight * (controls * controls).sum(axis=1)
        else:
            # The vector env returns reward_ctrl itself: step's own product, row by row (numpy sums 8 values
            # with 8 accumulators, BLAS's dot one after another: the last bit can differ).
            ctrl_cost = self.ctrl_cost_weight * np.fromiter((float(c @ c) for c in controls), np.float64, n)
        contact_cost = self.contact_cost_weight * np.square(contact_forces).sum(axis=1)
        rewards = task_reward - ctrl_cost - contact_cost + self.survive_reward
        if infos is not None:
            infos.update(reward_ctrl=-ctrl_cost, reward_contact=-contact_cost,
                         reward_survive=np.full(n, self.survive_reward))
        z_min, z_max = self.healthy_z_range
        height = qpos[:, 2]
        healthy = (
            (z_min <= height) & (height <= z_max)
            & np.isfinite(qpos).all(axis=1) & np.isfinite(qvel).all(axis=1)
        )
        return rewards, ~healthy


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

    def _vector_task_reward(self, xy_before, xy_after, tasks, infos=None):
        forward_velocity = (xy_after[:, 0] - xy_before[:, 0]) / self._dt
        reward = -np.abs(forward_velocity - tasks["velocity"]) + 1.0
        if infos is not None:
            infos.update(forward_velocity=forward_velocity, reward_forward=reward)
        return reward


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

    def _vector_task_reward(self, xy_before, xy_after, tasks, infos=None):
        forward_velocity = (xy_after[:, 0] - xy_before[:, 0]) / self._dt
        reward = tasks["direction"] * forward_velocity
        if infos is not None:
            infos.update(forward_velocity=forward_velocity, reward_forward=reward)
        return reward


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

    def _vector_task_reward(self, xy_before, xy_after, tasks, infos=None):
        distance = np.abs(xy_after - tasks["position"]).sum(axis=1)
        reward = -distance + 4.0
        if infos is not None:
            infos.update(distance=distance, reward_forward=reward)
        return reward
