"""The walls' ``evaluate_state`` as arrays: push-wall and pick-place-wall (registered in ``rewards.SPECS``), whose
rewards lead the object to a midpoint past the wall, then to the target. Their caging is the base class's
(``grasping.caging_reward``): its gripping rows, and those whose ``grasp_success`` needs the contacts (the
gripper open and the object lifted), go to the env's own ``evaluate_state``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms
from .grasping import _for_grasp_success, _grasp_infos, caging_reward

_RADIUS = 0.05  # their compute_reward's _TARGET_RADIUS


def push_wall_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPushWallEnvV3.evaluate_state`` (v2 rewards) of every env: to a midpoint beside the wall (at the
    object's height), then to the target; the caging as push's."""
    radius = _RADIUS
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    tcp = batch.tcp_center()
    midpoint = np.empty_like(obj)
    midpoint[:, 0], midpoint[:, 1], midpoint[:, 2] = -0.05, 0.77, obj[:, 2]
    scale = np.array([3.0, 1.0, 1.0])
    tcp_to_obj = norms(obj - tcp)
    to_midpoint = long_tail(norms((obj - midpoint) * scale), 0, radius, norms((batch.obj_init - midpoint) * scale))
    obj_to_target = norms(obj - target)
    in_place = long_tail(obj_to_target, 0, radius, norms(batch.obj_init - target))
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.015, pad_success_thresh=0.05,
                                         xz_thresh=0.005, high_density=True)
    reward = 2 * object_grasped
    near = (tcp_to_obj < 0.02) & (tcp_opened > 0)
    reward = np.where(near, np.where(obj[:, 1] > 0.75, 2 * object_grasped + 1.0 + 4.0 + 3.0 * in_place,
                                     2.0 * object_grasped + 1.0 + 4.0 * to_midpoint), reward)
    reward = np.where(obj_to_target < radius, 10.0, reward)
    lifted = (tcp_opened > 0) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, lifted)), observations, actions, reward,
                        infos)
    return reward, infos


def pick_place_wall_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPickPlaceWallEnvV3.evaluate_state`` (v2 rewards) of every env: lifted, to a midpoint above the wall
    (at the target's x), then to the target."""
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    tcp = batch.tcp_center()
    midpoint = np.empty_like(obj)
    midpoint[:, 0], midpoint[:, 1], midpoint[:, 2] = target[:, 0], 0.77, 0.25
    scale = np.array([1.0, 1.0, 3.0])
    tcp_to_obj = norms(obj - tcp)
    to_midpoint = long_tail(norms((obj - midpoint) * scale), 0, _RADIUS,
                            norms((batch.obj_init - midpoint) * scale))
    obj_to_target = norms(obj - target)
    in_place = long_tail(obj_to_target, 0, _RADIUS, norms(batch.obj_init - target))
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.015, pad_success_thresh=0.05,
                                         xz_thresh=0.005, high_density=False)
    grasped_to_midpoint = hamacher(object_grasped, to_midpoint)
    lifted = (tcp_to_obj < 0.02) & (tcp_opened > 0) & (obj[:, 2] - 0.015 > batch.obj_init[:, 2])
    reward = np.where(lifted, np.where(obj[:, 1] > 0.75, grasped_to_midpoint + 1.0 + 4.0 + 3.0 * in_place,
                                       grasped_to_midpoint + 1.0 + 4.0 * to_midpoint), grasped_to_midpoint)
    reward = np.where(obj_to_target < _RADIUS, 10.0, reward)
    grasping = (tcp_opened > 0) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, grasping)), observations, actions, reward,
                        infos)
    return reward, infos
