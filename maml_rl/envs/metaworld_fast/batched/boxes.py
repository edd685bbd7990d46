"""Box-close's ``evaluate_state`` as arrays (registered in ``rewards.SPECS``): its static ``_reward_grab_effort``,
``_reward_quat`` and ``_reward_pos`` (a funnel-shaped floor around the lid's handle, ``np.log`` as the
scalar's, as door-open's), bit for bit Meta-World's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms

_IDEAL_QUAT = np.array([0.707, 0, 0, 0.707])


def box_close_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerBoxCloseEnvV3.evaluate_state`` (v2 rewards) of every env: its reward scaled by how upright the
    lid is; ``grasp_success`` the grab effort's comparison, ``obj_to_target`` the int 0."""
    # _reward_grab_effort: float32 from the action (its outer clip keeps [0, 1]), then a Python float.
    reward_grab = ((np.clip(actions[:, 3], -1, 1) + 1.0) / 2.0).astype(np.float64)
    # _reward_quat: max(1 - error / 0.2, 0.0), the error a norm over the lid's quaternion.
    quat = 1.0 - norms(observations[:, 7:11] - _IDEAL_QUAT) / 0.2
    reward_quat = np.where(0.0 > quat, 0.0, quat)
    # _reward_pos
    hand = observations[:, :3]
    lid = observations[:, 4:7] + np.array([0.0, 0.0, 0.02])
    threshold = 0.02
    radius = norms(hand[:, :2] - lid[:, :2])
    with np.errstate(divide="ignore", invalid="ignore"):  # the rows within the threshold take 0.0
        floor = np.where(radius <= threshold, 0.0, 0.04 * np.log(radius - threshold) + 0.4)
    above_floor = np.where(hand[:, 2] >= floor, 1.0, long_tail(floor - hand[:, 2], 0.0, 0.01, floor / 2.0))
    in_place = long_tail(norms(hand - lid), 0, 0.02, 0.5)
    ready_to_lift = hamacher(above_floor, in_place)
    placed = long_tail(norms((batch.target - lid) * np.array([1.0, 1.0, 3.0])), 0, 0.05, 0.25)
    lifted = 0.2 * (lid[:, 2] > 0.04).astype(np.float64) + 0.8 * placed
    reward = 2.0 * hamacher(reward_grab, ready_to_lift) + 8.0 * lifted
    success = norms(observations[:, 4:7] - batch.target) < 0.08
    reward = np.where(success, 10.0, reward) * reward_quat
    infos = {"success": success.astype(np.float64), "near_object": ready_to_lift,
             "grasp_success": (reward_grab >= 0.5).astype(np.float64), "grasp_reward": reward_grab,
             "in_place_reward": lifted, "obj_to_target": np.zeros(len(reward)), "unscaled_reward": reward}
    return reward, infos
