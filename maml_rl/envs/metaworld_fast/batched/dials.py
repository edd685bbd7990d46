"""Dial-turn's ``evaluate_state`` as arrays (registered in ``rewards.SPECS``), and its knob's position, which no
body, site or geom holds: the dial's centre plus 5 cm along the knob joint's angle (``np.sin`` and ``np.cos``
of the angles, as the scalar's of each). Where the gripper's effort is in (0, 1], Meta-World's reach runs in
float32 with the action: those rows go to the env's own ``evaluate_state``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import gaussian, hamacher, long_tail, norms


def dial_knob(batch: Any) -> np.ndarray:
    """``SawyerDialTurnEnvV3._get_pos_objects`` of every env."""
    angle = batch.joint_qpos("knob_Joint_1")
    offset = np.zeros((len(angle), 3))
    offset[:, 0], offset[:, 1] = np.sin(angle), -np.cos(angle)
    offset *= 0.05
    return batch.xpos[:, batch.id("body", "dial")] + offset


def dial_turn_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDialTurnEnvV3.evaluate_state`` (v2 rewards) of every env."""
    radius = batch.envs[0].TARGET_RADIUS
    obj = observations[:, 4:7]  # _get_pos_objects(), as in the observation (unclipped there)
    push_position = obj + np.array([0.05, 0.02, 0.09])
    push_init = batch.values["dial_push_position"]
    target = batch.target
    target_to_obj = norms(obj - target)
    in_place = long_tail(target_to_obj, 0, radius, np.abs(norms(push_init - target) - radius))
    tcp_to_obj = norms(push_position - batch.tcp_center())
    reach = gaussian(tcp_to_obj, 0, 0.005, np.abs(norms(push_init - batch.init_tcp) - 0.005))
    grip = actions[:, -1]
    # min(max(0, grip), 1): the int 0 or 1 outside (0, 1] (float64 throughout), else the float32 grip.
    reach = hamacher(reach, np.where(grip > 1, 1.0, 0.0))
    reward = 10 * hamacher(reach, in_place)
    infos = {"success": (target_to_obj <= radius).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.01).astype(np.float64), "grasp_success": np.ones(len(obj)),
             "grasp_reward": reach, "in_place_reward": in_place, "obj_to_target": target_to_obj,
             "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero((grip > 0) & (grip <= 1)), observations, actions, reward, infos)
    return reward, infos
