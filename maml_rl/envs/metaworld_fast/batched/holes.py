"""The holes' ``evaluate_state`` as arrays: hand-insert, pick-out-of-hole and peg-unplug-side (registered in
``rewards.SPECS``).
Their caging is the base class's (``grasping.caging_reward``), its gripping rows by the env's own code;
hand-insert's rows whose ``grasp_success`` needs the contacts (the gripper open and the object lifted) too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms
from .grasping import _for_grasp_success, _grasp_infos, caging_reward


def hand_insert_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerHandInsertEnvV3.evaluate_state`` (v2 rewards) of every env."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    target_to_obj = norms(obj - batch.target)
    in_place = long_tail(target_to_obj, 0, radius, norms(batch.obj_init - batch.target))
    tcp = batch.tcp_center()
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.015, pad_success_thresh=0.05,
                                         xz_thresh=0.005, high_density=True)
    reward = hamacher(object_grasped, in_place)
    tcp_to_obj = norms(obj - tcp)
    reward = np.where((tcp_to_obj < 0.02) & (tcp_opened > 0), reward + (1.0 + 7.0 * in_place), reward)
    reward = np.where(target_to_obj < radius, 10.0, reward)
    lifted = (tcp_opened > 0) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(target_to_obj <= 0.05, tcp_to_obj, object_grasped, in_place, target_to_obj, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, lifted)), observations, actions, reward,
                        infos)
    return reward, infos


def pick_out_of_hole_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPickOutOfHoleEnvV3.evaluate_state`` (v2 rewards) of every env: a funnel-shaped floor around the
    hole (``np.log`` as the scalar's, as door-open's), the caging at 0.1 of the gripper's effort."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, target = observations[:, 4:7], batch.target
    gripper = batch.tcp_center()
    obj_to_target = norms(obj - target)
    tcp_to_obj = norms(obj - gripper)
    threshold = 0.03
    distance = norms(gripper[:, :2] - batch.obj_init[:, :2])
    with np.errstate(divide="ignore", invalid="ignore"):  # the rows within the threshold take 0.0
        floor = np.where(distance <= threshold, 0.0, 0.015 * np.log(distance - threshold) + 0.15)
    below = floor - gripper[:, 2]
    above_floor = np.where(gripper[:, 2] >= floor, 1.0, long_tail(np.where(0.0 > below, 0.0, below), 0.0, 0.01, 0.02))
    object_grasped, rare = caging_reward(batch, actions, obj, gripper, obj_radius=0.015, pad_success_thresh=0.02,
                                         xz_thresh=0.03, high_density=True, desired_gripper_effort=0.1)
    in_place = long_tail(obj_to_target, 0, 0.02, norms(batch.obj_init - target))
    reward = hamacher(object_grasped, in_place)
    grasp_success = (tcp_to_obj < 0.04) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2]) & ~(observations[:, 3] < 0.33)
    reward = np.where(grasp_success, reward + (1.0 + 5.0 * hamacher(in_place, above_floor)), reward)
    reward = np.where(obj_to_target < radius, 10.0, reward)
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward,
                         grasp_success)
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos


def peg_unplug_side_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPegUnplugSideEnvV3.evaluate_state`` (v2 rewards) of every env: the caging at 0.8 of the gripper's
    effort; ``grasp_success`` the gripper open past half and the plug pulled 15 mm along x."""
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    tcp = batch.tcp_center()
    tcp_to_obj = norms(obj - tcp)
    obj_to_target = norms(obj - target)
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.025, pad_success_thresh=0.05,
                                         xz_thresh=0.005, high_density=True, desired_gripper_effort=0.8)
    in_place = long_tail(obj_to_target, 0, 0.05, norms(batch.obj_init - target))
    grasp_success = (tcp_opened > 0.5) & (obj[:, 0] - batch.obj_init[:, 0] > 0.015)
    reward = np.where(grasp_success & (tcp_to_obj < 0.035), 1 + 2 * object_grasped + 5 * in_place,
                      2 * object_grasped)
    reward = np.where(obj_to_target <= 0.05, 10.0, reward)
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward,
                         grasp_success)
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos
