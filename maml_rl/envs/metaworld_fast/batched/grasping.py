"""The grasping classes' ``evaluate_state`` as arrays: push, pick-place, shelf-place, basketball,
peg-insert-side, sweep, sweep-into and the coffee mug's push and pull (registered in ``rewards.SPECS``).

Each function gives every env's reward and infos, bit for bit Meta-World's own ``evaluate_state``. Rows its
arrays cannot give exactly go to ``BatchedSawyer.evaluate_rows`` (the env's own code on its synced state): where
the gripper grips the object, Meta-World's arithmetic turns float32 with the action; where ``grasp_success``
needs the contacts with the object lifted; where a margin is negative (Meta-World's ValueError).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from .arrays import hamacher, long_tail, norms, xz

_XZ = np.array([0, 2])


def caging_reward(batch: Any, actions: np.ndarray, obj: np.ndarray, tcp: np.ndarray, obj_radius: float,
                  pad_success_thresh: float, xz_thresh: float, high_density: bool, medium_density: bool = False,
                  object_reach_radius: float = 0.0, desired_gripper_effort: float = 1.0,
                  init: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``_gripper_caging_reward`` of every env, and the rows it cannot give exactly: where the gripper grips
    (``caging > 0.97`` and ``0 < action[3] <= desired_gripper_effort``), Meta-World mixes the action's float32
    into the rest, which then runs in float32; and where a margin is negative (its ValueError). Above the
    desired effort the effort is ``effort / effort``, 1.0. ``init``: the object's initial positions, where
    not ``obj_init_pos`` (stick-push's override reads ``stick_init_pos``)."""
    init = batch.obj_init if init is None else init
    left_y = batch.xpos[:, batch.left_pad, 1]
    right_y = batch.xpos[:, batch.right_pad, 1]
    obj_y, init_y = obj[:, 1], init[:, 1]
    margin_left = np.abs(np.abs(left_y - init_y) - pad_success_thresh)
    margin_right = np.abs(np.abs(right_y - init_y) - pad_success_thresh)
    caging_y = hamacher(long_tail(np.abs(left_y - obj_y), obj_radius, pad_success_thresh, margin_left),
                        long_tail(np.abs(right_y - obj_y), obj_radius, pad_success_thresh, margin_right))
    caging_xz_margin = norms(init[:, _XZ] - batch.init_tcp[:, _XZ]) - xz_thresh
    caging_xz = long_tail(norms(tcp[:, _XZ] - obj[:, _XZ]), 0, xz_thresh, caging_xz_margin)
    caging = hamacher(caging_y, caging_xz)
    grip = actions[:, -1]
    gripping = (caging > 0.97) & (grip > 0)
    rare = (gripping & (grip <= desired_gripper_effort)) | (caging_xz_margin < 0)
    # Elsewhere the gripper effort is 1.0 (an action above the desired effort) or nothing: float64 throughout.
    caging_and_gripping = hamacher(caging, np.where(gripping, 1.0, 0.0))
    if high_density:
        caging_and_gripping = (caging_and_gripping + caging) / 2
    if medium_density:
        reach_margin = np.abs(norms(init - batch.init_tcp) - object_reach_radius)
        reach = long_tail(norms(obj - tcp), 0, object_reach_radius, reach_margin)
        caging_and_gripping = (caging_and_gripping + reach) / 2
    return caging_and_gripping, rare

def object_caging(batch: Any, obj: np.ndarray, tcp: np.ndarray, obj_radius: float, grip_margin: float,
                  xz_margin: float) -> Tuple[np.ndarray, np.ndarray]:
    """The ``_gripper_caging_reward`` of sweep, sweep-into, push-back and soccer (their own, alike but for the
    grip and xz margins): no action in it (its ``gripper_closed`` is unused), the pads' caging and gripping
    tolerances instead. Its ``init_left_pad`` and ``init_right_pad`` are views of the pads' ``xpos`` (see
    pick-place): where they are now. Also the rows with a negative xz margin (its ValueError)."""
    pad_margin, grip_success_margin = 0.05, obj_radius + grip_margin
    left_pad, right_pad = batch.xpos[:, batch.left_pad, 1], batch.xpos[:, batch.right_pad, 1]
    left, right = left_pad - obj[:, 1], obj[:, 1] - right_pad
    right_margin = np.abs(np.abs(obj[:, 1] - right_pad) - pad_margin)
    left_margin = np.abs(np.abs(obj[:, 1] - left_pad) - pad_margin)
    y_caging = hamacher(long_tail(right, obj_radius, pad_margin, right_margin),
                        long_tail(left, obj_radius, pad_margin, left_margin))
    y_gripping = hamacher(long_tail(right, obj_radius, grip_success_margin, right_margin),
                          long_tail(left, obj_radius, grip_success_margin, left_margin))
    x_z_margin = norms(xz(batch.obj_init) - xz(batch.init_tcp)) - xz_margin
    x_z_caging = long_tail(norms(xz(tcp) - xz(obj)), 0, xz_margin, x_z_margin)
    caging = hamacher(y_caging, x_z_caging)
    return (caging + np.where(caging > 0.95, y_gripping, 0.0)) / 2, x_z_margin < 0

def _grasp_infos(success: np.ndarray, tcp_to_obj: np.ndarray, grasp_reward: np.ndarray, in_place: np.ndarray,
                 obj_to_target: np.ndarray, reward: np.ndarray,
                 grasp_success: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """A grasping class's infos in Meta-World's order. ``grasp_success`` (touching_main_object and the gripper
    open and the object lifted) is False unless given: the rows where the object is lifted are evaluated by
    the env."""
    grasp_success = np.zeros(len(reward)) if grasp_success is None else grasp_success.astype(np.float64)
    return {"success": success.astype(np.float64), "near_object": (tcp_to_obj <= 0.03).astype(np.float64),
            "grasp_success": grasp_success, "grasp_reward": grasp_reward, "in_place_reward": in_place,
            "obj_to_target": obj_to_target, "unscaled_reward": reward}

def _for_grasp_success(batch: Any, lifted: np.ndarray) -> np.ndarray:
    """The rows whose ``grasp_success`` the env's own code gives (``lifted``), where the caller reads it; else none
    (its placeholder 0 is then left out of the step's infos, ``BatchedSawyer.step``)."""
    return lifted if batch.wants("grasp_success") else np.zeros_like(lifted)

def push_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPushEnvV3.evaluate_state`` (v2 rewards) of every env; the rows :func:`caging_reward` cannot give,
    and those whose ``grasp_success`` needs the contacts (the gripper open and the object lifted), by the
    env's own ``evaluate_state`` on its synced state."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    tcp = batch.tcp_center()
    tcp_to_obj = norms(obj - tcp)
    target_to_obj = norms(obj - batch.target)
    target_to_obj_init = norms(batch.obj_init - batch.target)
    in_place = long_tail(target_to_obj, 0, radius, target_to_obj_init)
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.015, pad_success_thresh=0.05,
                                         xz_thresh=0.005, high_density=True)
    reward = 2 * object_grasped
    reward = np.where((tcp_to_obj < 0.02) & (tcp_opened > 0), reward + (1.0 + reward + 5.0 * in_place), reward)
    reward = np.where(target_to_obj < radius, 10.0, reward)
    lifted = (tcp_opened > 0) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(target_to_obj <= radius, tcp_to_obj, object_grasped, in_place, target_to_obj, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, lifted)), observations, actions, reward,
                        infos)
    return reward, infos

def pick_place_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPickPlaceEnvV3.evaluate_state`` (v2 rewards, its own ``_gripper_caging_reward``) of every env;
    the rows where the gripper grips (float32 from the action, as for push) or the object is lifted (the
    contacts, for ``grasp_success``) by the env's own ``evaluate_state`` on its synced state."""
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    tcp = batch.tcp_center()
    obj_to_target = norms(obj - batch.target)
    tcp_to_obj = norms(obj - tcp)
    in_place = long_tail(obj_to_target, 0, 0.05, norms(batch.obj_init - batch.target))
    # _gripper_caging_reward of SawyerPickPlaceEnvV3.
    pad_margin, xz_margin, obj_radius = 0.05, 0.005, 0.015
    left_pad, right_pad = batch.xpos[:, batch.left_pad], batch.xpos[:, batch.right_pad]
    # init_left_pad and init_right_pad are get_body_com's views of data.xpos: the pads where they are now.
    right_caging_margin = np.abs(np.abs(obj[:, 1] - right_pad[:, 1]) - pad_margin)
    left_caging_margin = np.abs(np.abs(obj[:, 1] - left_pad[:, 1]) - pad_margin)
    right_caging = long_tail(obj[:, 1] - right_pad[:, 1], obj_radius, pad_margin, right_caging_margin)
    left_caging = long_tail(left_pad[:, 1] - obj[:, 1], obj_radius, pad_margin, left_caging_margin)
    y_caging = hamacher(left_caging, right_caging)
    tcp_obj_norm_x_z = norms(xz(tcp) - xz(obj))
    tcp_obj_x_z_margin = norms(xz(batch.obj_init) - xz(batch.init_tcp)) - xz_margin
    x_z_caging = long_tail(tcp_obj_norm_x_z, 0, xz_margin, tcp_obj_x_z_margin)
    caging = hamacher(y_caging, x_z_caging)
    grip = actions[:, -1]
    gripping = (caging > 0.97) & (grip > 0)
    rare = (gripping & (grip <= 1)) | (tcp_obj_x_z_margin < 0)
    # Elsewhere min(max(0, grip), 1) is the int 1 or 0: float64 throughout.
    object_grasped = (hamacher(caging, np.where(gripping, 1.0, 0.0)) + caging) / 2
    reward = hamacher(object_grasped, in_place)
    lifted = tcp_opened > 0
    reward = np.where((tcp_to_obj < 0.02) & lifted & (obj[:, 2] - 0.01 > batch.obj_init[:, 2]),
                      reward + (1.0 + 5.0 * in_place), reward)
    reward = np.where(obj_to_target < 0.05, 10.0, reward)
    grasped = lifted & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, grasped)), observations, actions, reward,
                        infos)
    return reward, infos

def shelf_place_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerShelfPlaceEnvV3.evaluate_state`` (v2 rewards); the gripping rows and those whose
    ``grasp_success`` needs the contacts by the env's own code, as for push."""
    radius = 0.05
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    tcp = batch.tcp_center()
    obj_to_target = norms(obj - target)
    tcp_to_obj = norms(obj - tcp)
    in_place = long_tail(obj_to_target, 0, radius, norms(batch.obj_init - target))
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.02, pad_success_thresh=0.05,
                                         xz_thresh=0.01, high_density=False)
    reward = hamacher(object_grasped, in_place)
    x, y, z = obj[:, 0], obj[:, 1], obj[:, 2]
    near_shelf = (0.0 < z) & (z < 0.24) & (target[:, 0] - 0.15 < x) & (x < target[:, 0] + 0.15)
    below = near_shelf & ((target[:, 1] - 3 * radius) < y) & (y < target[:, 1])
    z_scaling = (0.24 - z) / 0.24
    y_scaling = (y - (target[:, 1] - 3 * radius)) / (3 * radius)
    bound_loss = hamacher(y_scaling, z_scaling)
    in_place = np.where(below, np.clip(in_place - bound_loss, 0.0, 1.0), in_place)
    in_place = np.where(near_shelf & (y > target[:, 1]), 0.0, in_place)
    bonus = (tcp_to_obj < 0.025) & (tcp_opened > 0) & (z - 0.01 > batch.obj_init[:, 2])
    reward = np.where(bonus, reward + (1.0 + 5.0 * in_place), reward)
    reward = np.where(obj_to_target < radius, 10.0, reward)
    lifted = (tcp_opened > 0) & (z - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, lifted)), observations, actions, reward,
                        infos)
    return reward, infos

def basketball_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerBasketballEnvV3.evaluate_state`` (v2 rewards); the gripping rows by the env's own code, as for
    push. Its ``_target_pos`` is a view of the goal site's ``xpos`` (``ClassSpec.target_site``)."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    target = batch.target.copy()
    target[:, 2] = 0.3
    scale = np.array([1.0, 1.0, 2.0])
    target_to_obj = norms((obj - target) * scale)
    in_place = long_tail(target_to_obj, 0, radius, norms((batch.obj_init - target) * scale))
    tcp = batch.tcp_center()
    tcp_to_obj = norms(obj - tcp)
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.025, pad_success_thresh=0.06,
                                         xz_thresh=0.005, high_density=True)
    holding = (tcp_to_obj < 0.035) & (tcp_opened > 0) & (obj[:, 2] - 0.01 > batch.obj_init[:, 2])
    object_grasped = np.where(holding, 1.0, object_grasped)
    reward = hamacher(object_grasped, in_place)
    reward = np.where(holding, reward + (1.0 + 5.0 * in_place), reward)
    reward = np.where(target_to_obj < radius, 10.0, reward)
    infos = {"success": (target_to_obj <= radius).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.05).astype(np.float64),
             "grasp_success": ((tcp_opened > 0) & (obj[:, 2] - 0.03 > batch.obj_init[:, 2])).astype(np.float64),
             "grasp_reward": object_grasped, "in_place_reward": in_place, "obj_to_target": target_to_obj,
             "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos

def _rect_prism(curr: np.ndarray, zero: np.ndarray, one: np.ndarray) -> np.ndarray:
    """``reward_utils.rect_prism_tolerance(curr_i, zero_i, one_i)`` of each row."""
    inside = np.ones(len(curr), dtype=np.bool_)
    for k in range(3):
        a, b, c = curr[:, k], zero[:, k], one[:, k]
        inside &= np.where(c >= b, (b <= a) & (a <= c), (c <= a) & (a <= b))
    diff = one - zero
    with np.errstate(divide="ignore", invalid="ignore"):
        scales = (curr[:, 0] - zero[:, 0]) / diff[:, 0] * ((curr[:, 1] - zero[:, 1]) / diff[:, 1]) \
            * ((curr[:, 2] - zero[:, 2]) / diff[:, 2])
    return np.where(inside, scales, 1.0)

def peg_insert_side_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPegInsertionSideEnvV3.evaluate_state`` (v2 rewards); the gripping rows by the env's own code."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    sites = batch.site_xpos
    obj_head = sites[:, batch.id("site", "pegHead")]
    tcp = batch.tcp_center()
    tcp_to_obj = norms(obj - tcp)
    scale = np.array([1.0, 2.0, 2.0])
    obj_to_target = norms((obj_head - target) * scale)
    in_place = long_tail(obj_to_target, 0, radius, norms((batch.values["peg_head_pos_init"] - target) * scale))
    corners = [sites[:, batch.id("site", name)] for name in (
        "bottom_right_corner_collision_box_1", "top_left_corner_collision_box_1",
        "bottom_right_corner_collision_box_2", "top_left_corner_collision_box_2")]
    box_1 = _rect_prism(obj_head, zero=corners[0], one=corners[1])
    box_2 = _rect_prism(obj_head, zero=corners[2], one=corners[3])
    in_place = hamacher(in_place, hamacher(box_2, box_1))
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.0075, pad_success_thresh=0.03,
                                         xz_thresh=0.005, high_density=True)
    lifted = (tcp_opened > 0) & (obj[:, 2] - 0.01 > batch.obj_init[:, 2])
    holding = (tcp_to_obj < 0.08) & lifted
    object_grasped = np.where(holding, 1.0, object_grasped)
    reward = hamacher(object_grasped, in_place)
    reward = np.where(holding, reward + (1.0 + 5 * in_place), reward)
    reward = np.where(obj_to_target <= 0.07, 10.0, reward)
    infos = {"success": (obj_to_target <= 0.07).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.03).astype(np.float64),
             "grasp_success": ((tcp_to_obj < 0.02) & lifted).astype(np.float64), "grasp_reward": object_grasped,
             "in_place_reward": in_place, "obj_to_target": obj_to_target, "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos

def sweep_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *, grip_margin: float,
                   xz_margin: float, goal_at_object_height: bool):
    """``SawyerSweepEnvV3`` and ``SawyerSweepIntoGoalEnvV3``'s ``evaluate_state`` (v2 rewards): their own
    ``_gripper_caging_reward`` (:func:`object_caging`), and ``grasp_success`` from the contacts where the gripper
    is open (``BatchedSawyer.touching``); rows where the xz margin is negative (Meta-World's ValueError)
    by the env's own code."""
    radius, obj_radius = 0.05, batch.envs[0].OBJ_RADIUS
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    target = batch.target.copy()
    if goal_at_object_height:
        target[:, 2] = obj[:, 2]
    tcp = batch.tcp_center()
    obj_to_target = norms(obj - target)
    tcp_to_obj = norms(obj - tcp)
    in_place = long_tail(obj_to_target, 0, radius, norms(batch.obj_init - target))
    object_grasped, rare = object_caging(batch, obj, tcp, obj_radius, grip_margin=grip_margin, xz_margin=xz_margin)
    reward = (2 * object_grasped) + (6 * hamacher(object_grasped, in_place))
    reward = np.where(obj_to_target < radius, 10.0, reward)
    opened = np.flatnonzero(tcp_opened > 0)
    grasp_success = np.zeros(len(reward))
    if batch.wants("grasp_success"):
        grasp_success[opened] = batch.touching(opened, "objGeom")
    infos = {"success": (obj_to_target <= radius).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.03).astype(np.float64), "grasp_reward": object_grasped,
             "grasp_success": grasp_success, "in_place_reward": in_place, "obj_to_target": obj_to_target,
             "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos

def coffee_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerCoffeePushEnvV3`` and ``SawyerCoffeePullEnvV3``'s ``evaluate_state`` (v2 rewards, the same): the
    medium-density caging at 0.7 of the gripper's effort (its gripping rows by the env's own code, as push's),
    and ``grasp_success`` from the mug's contacts where the gripper is open (``BatchedSawyer.touching``)."""
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    scale = np.array([2.0, 2.0, 1.0])
    target_to_obj = norms((obj - target) * scale)
    in_place = long_tail(target_to_obj, 0, 0.05, norms((batch.obj_init - target) * scale))
    tcp = batch.tcp_center()
    tcp_to_obj = norms(obj - tcp)
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.02, pad_success_thresh=0.05,
                                         xz_thresh=0.05, high_density=False, medium_density=True,
                                         object_reach_radius=0.04, desired_gripper_effort=0.7)
    reward = hamacher(object_grasped, in_place)
    reward = np.where((tcp_to_obj < 0.04) & (tcp_opened > 0), reward + (1.0 + 5.0 * in_place), reward)
    reward = np.where(target_to_obj < 0.05, 10.0, reward)
    obj_to_target = norms(obj - target)
    opened = np.flatnonzero(tcp_opened > 0)
    grasp_success = np.zeros(len(reward))
    if batch.wants("grasp_success"):
        grasp_success[opened] = batch.touching(opened, "mug")
    infos = {"success": (obj_to_target <= 0.07).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.03).astype(np.float64), "grasp_success": grasp_success,
             "grasp_reward": object_grasped, "in_place_reward": in_place, "obj_to_target": obj_to_target,
             "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos
