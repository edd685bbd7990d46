"""Reach's and the articulated objects' ``evaluate_state`` as arrays: button-press-topdown, the drawers, the
window, the doors and the lever (registered in ``rewards.SPECS``). Each gives every env's reward and infos,
bit for bit Meta-World's own ``evaluate_state``; drawer-close's float32 rows are computed beside the float64
ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import gaussian, hamacher, long_tail, norms


def reach_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *, wall: bool = False):
    """``SawyerReachEnvV3.evaluate_state`` (reward_function_version "v2") of every env, or with ``wall``
    ``SawyerReachWallEnvV3``'s: the same reward, its near-object and grasp infos 0."""
    tcp = batch.tcp_center()
    target = batch.target
    tcp_to_target = norms(tcp - target)
    in_place_margin = norms(batch.hand_init - target)
    in_place = long_tail(tcp_to_target, 0, 0.05, in_place_margin)
    reward = 10 * in_place
    success = (tcp_to_target <= 0.05).astype(np.float64)
    if wall:
        zeros = np.zeros(len(target))
        infos = {"success": success, "near_object": zeros, "grasp_success": zeros, "grasp_reward": zeros,
                 "in_place_reward": in_place, "obj_to_target": tcp_to_target, "unscaled_reward": reward}
    else:
        infos = {"success": success, "near_object": tcp_to_target, "grasp_success": np.ones(len(target)),
                 "grasp_reward": tcp_to_target, "in_place_reward": in_place, "obj_to_target": tcp_to_target,
                 "unscaled_reward": reward}
    return reward, infos

def button_press_topdown_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerButtonPressTopdownEnvV3.evaluate_state`` (v2 rewards): no action in the reward."""
    obj = observations[:, 4:7]
    tcp_to_obj = norms(obj - batch.tcp_center())
    tcp_to_obj_init = norms(obj - batch.init_tcp)
    obj_to_target = np.abs(batch.target[:, 2] - obj[:, 2])
    tcp_closed = 1 - observations[:, 3]
    near_button = long_tail(tcp_to_obj, 0, 0.01, tcp_to_obj_init)
    button_pressed = long_tail(obj_to_target, 0, 0.005, batch.values["_obj_to_target_init"])
    reward = 5 * hamacher(tcp_closed, near_button)
    reward = np.where(tcp_to_obj <= 0.03, reward + 5 * button_pressed, reward)
    infos = {"success": (obj_to_target <= 0.024).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.05).astype(np.float64),
             "grasp_success": (observations[:, 3] > 0).astype(np.float64), "grasp_reward": near_button,
             "in_place_reward": button_pressed, "obj_to_target": obj_to_target, "unscaled_reward": reward}
    return reward, infos

def drawer_close_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDrawerCloseEnvV3.evaluate_state`` (v2 rewards). Its reach is multiplied (``hamacher_product``)
    by ``min(max(0, action[3]), 1)``: the int 0 or 1 outside (0, 1], else the action's float32, with which the
    rest of the reward runs in float32 (NumPy 2's rules for a Python float and a float32): both are computed
    as arrays, and each row takes its own."""
    radius = batch.envs[0].TARGET_RADIUS
    obj = observations[:, 4:7]
    target_to_obj = norms(obj - batch.target)
    target_to_obj_init = norms(batch.obj_init - batch.target)
    in_place = long_tail(target_to_obj, 0, radius, np.abs(target_to_obj_init - radius))
    tcp_to_obj = norms(obj - batch.tcp_center())
    tcp_to_obj_init = norms(batch.obj_init - batch.init_tcp)
    reach = gaussian(tcp_to_obj, 0, 0.005, np.abs(tcp_to_obj_init - 0.005))
    grip = actions[:, -1]
    in_float32 = (grip > 0) & (grip <= 1)
    closed = np.where(grip > 1, 1.0, 0.0)  # the int's value where the row is not in_float32
    reach64 = hamacher(reach, closed)
    reward64 = hamacher(reach64, in_place)
    # float32 rows: hamacher_product(reach, grip) and hamacher_product(that, in_place) in float32.
    reach32 = hamacher(reach.astype(np.float32), grip.astype(np.float32))
    reward32 = hamacher(reach32, in_place.astype(np.float32))
    object_grasped = np.where(in_float32, reach32, reach64)
    closed_enough = target_to_obj <= radius + 0.015
    reward = np.where(closed_enough, 10.0, np.where(in_float32, reward32 * np.float32(10), reward64 * 10))
    batch.typed("grasp_reward", in_float32, np.float32)
    batch.typed("unscaled_reward", in_float32 & ~closed_enough, np.float32)
    infos = {"success": closed_enough.astype(np.float64), "near_object": (tcp_to_obj <= 0.01).astype(np.float64),
             "grasp_success": np.ones(len(obj)), "grasp_reward": object_grasped, "in_place_reward": in_place,
             "obj_to_target": target_to_obj, "unscaled_reward": reward}
    return reward, infos

def window_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *, closing: bool = False):
    """``SawyerWindowOpenEnvV3.evaluate_state`` (v2 rewards), or with ``closing``
    ``SawyerWindowCloseEnvV3``'s (its initial distance from the handle's initial position, not the window's,
    and a gaussian reach): no action in the reward. Its distances along x are ``np.linalg.norm`` of a scalar
    (a one-element ``dot``)."""
    radius = batch.envs[0].TARGET_RADIUS
    obj = observations[:, 4:7]  # _get_pos_objects(): the handle site, as in the observation (unclipped there)
    tcp = batch.tcp_center()
    target_to_obj = norms((obj[:, 0] - batch.target[:, 0])[:, None])
    handle_init = batch.values["window_handle_pos_init"]
    start = handle_init if closing else batch.obj_init
    target_to_obj_init = norms((start[:, 0] - batch.target[:, 0])[:, None])
    in_place = long_tail(target_to_obj, 0, radius, np.abs(target_to_obj_init - radius))
    tcp_to_obj = norms(obj - tcp)
    tcp_to_obj_init = norms(handle_init - batch.init_tcp)
    reach = (gaussian if closing else long_tail)(tcp_to_obj, 0, 0.02, np.abs(tcp_to_obj_init - 0.02))
    reward = 10 * hamacher(reach, in_place)
    infos = {"success": (target_to_obj <= radius).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.05).astype(np.float64), "grasp_success": np.ones(len(obj)),
             "grasp_reward": reach, "in_place_reward": in_place, "obj_to_target": target_to_obj,
             "unscaled_reward": reward}
    return reward, infos

def drawer_open_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDrawerOpenEnvV3.evaluate_state`` (v2 rewards): no action in the reward."""
    max_dist = batch.envs[0].maxDist
    gripper, handle = observations[:, :3], observations[:, 4:7]
    handle_error = norms(handle - batch.target)
    reward_for_opening = long_tail(handle_error, 0, 0.02, np.full(len(handle), max_dist))
    handle_pos_init = batch.target + np.array([0.0, max_dist, 0.0])
    scale = np.array([3.0, 3.0, 1.0])
    gripper_error = (handle - gripper) * scale
    gripper_error_init = (handle_pos_init - batch.init_tcp) * scale
    reward_for_caging = long_tail(norms(gripper_error), 0, 0.01, norms(gripper_error_init))
    reward = (reward_for_caging + reward_for_opening) * 5.0
    infos = {"success": (handle_error <= 0.03).astype(np.float64),
             "near_object": (norms(handle - gripper) <= 0.03).astype(np.float64),
             "grasp_success": (observations[:, 3] > 0).astype(np.float64), "grasp_reward": reward_for_caging,
             "in_place_reward": reward_for_opening, "obj_to_target": handle_error, "unscaled_reward": reward}
    return reward, infos

def door_open_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDoorEnvV3.evaluate_state`` (v2 rewards): its static ``_reward_grab_effort`` (float32 from the
    action, then a Python float) and ``_reward_pos`` as arrays."""
    theta = batch.joint_qpos("doorjoint")
    reward_grab = ((np.clip(actions[:, 3], -1, 1) + 1.0) / 2.0).astype(np.float64)
    hand = observations[:, :3]
    door = observations[:, 4:7] + np.array([-0.05, 0, 0])
    threshold = 0.12
    radius = norms(hand[:, :2] - door[:, :2])
    with np.errstate(divide="ignore", invalid="ignore"):
        floor = np.where(radius <= threshold, 0.0, 0.04 * np.log(radius - threshold) + 0.4)
    above_floor = np.where(hand[:, 2] >= floor, 1.0, long_tail(floor - hand[:, 2], 0.0, 0.01, floor / 2.0))
    in_place = long_tail(norms(hand - door - np.array([0.05, 0.03, -0.01])), 0, threshold / 2.0, 0.5)
    ready_to_open = hamacher(above_floor, in_place)
    door_angle = -theta
    opened = 0.2 * (theta < -np.pi / 90.0).astype(np.float64) + 0.8 * long_tail(
        np.pi / 2.0 + np.pi / 6 - door_angle, 0, 0.5, np.pi / 3.0)
    reward = 2.0 * hamacher(ready_to_open, reward_grab) + 8.0 * opened
    success = np.abs(observations[:, 4] - batch.target[:, 0]) <= 0.08
    reward = np.where(success, 10.0, reward)
    infos = {"success": success.astype(np.float64), "near_object": ready_to_open,
             "grasp_success": (reward_grab >= 0.5).astype(np.float64), "grasp_reward": reward_grab,
             "in_place_reward": opened, "obj_to_target": np.zeros(len(reward)), "unscaled_reward": reward}
    return reward, infos

def door_close_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDoorCloseEnvV3.evaluate_state`` (v2 rewards): no action in the reward; its infos' own order."""
    radius = 0.05
    obj, target = observations[:, 4:7], batch.target
    tcp_to_target = norms(batch.tcp_center() - target)
    obj_to_target = norms(obj - target)
    in_place = gaussian(obj_to_target, 0, radius, norms(batch.obj_init - target))
    hand_margin = norms(batch.hand_init - obj) + 0.1
    hand_in_place = gaussian(tcp_to_target, 0, 0.25 * radius, hand_margin)
    reward = np.where(obj_to_target < radius, 10.0, 3 * hand_in_place + 6 * in_place)
    batch.typed("unscaled_reward", obj_to_target < radius, int)  # Meta-World's int 10
    n = len(reward)
    infos = {"obj_to_target": obj_to_target, "in_place_reward": hand_in_place,
             "success": (obj_to_target <= 0.08).astype(np.float64), "near_object": np.zeros(n),
             "grasp_success": np.ones(n), "grasp_reward": np.ones(n), "unscaled_reward": reward}
    return reward, infos

def lever_pull_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerLeverPullEnvV3.evaluate_state`` (v2 rewards): no action in the reward."""
    gripper, lever = observations[:, :3], observations[:, 4:7]
    scale = np.array([4.0, 1.0, 4.0])
    offset = np.array([0.0, 0.055, 0.07])
    lever_init = batch.values["_lever_pos_init"]
    shoulder_to_lever = norms((gripper + offset - lever) * scale)
    ready_to_lift = long_tail(shoulder_to_lever, 0, 0.02, norms((batch.init_tcp + offset - lever_init) * scale))
    lever_error = np.abs(-batch.joint_qpos("LeverAxis") - np.pi / 2.0)
    lever_engagement = long_tail(lever_error, 0, np.pi / 48.0, (np.pi / 2.0) - (np.pi / 12.0))
    in_place = long_tail(norms(lever - batch.target), 0, 0.04, norms(lever_init - batch.target))
    reward = 10.0 * hamacher(ready_to_lift, in_place)
    infos = {"success": (lever_error <= np.pi / 24).astype(np.float64),
             "near_object": (shoulder_to_lever < 0.03).astype(np.float64),
             "grasp_success": (ready_to_lift > 0.9).astype(np.float64), "grasp_reward": ready_to_lift,
             "in_place_reward": lever_engagement, "obj_to_target": shoulder_to_lever, "unscaled_reward": reward}
    return reward, infos
