"""The batched classes: what each reads and its ``evaluate_state`` as arrays (see ``sawyer.py``).

A class's outputs function (``outputs(batch, observations, actions)``, ``batch`` the ``BatchedSawyer``, not
imported here: it imports this registry) gives every env's reward and infos, bit for bit Meta-World's own
``evaluate_state``. Rows its arrays cannot give exactly go to ``BatchedSawyer.evaluate_rows`` (the env's
own code on its synced state): where the gripper grips the object, Meta-World's arithmetic turns float32
with the action; where ``grasp_success`` needs the contacts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from .arrays import gaussian, hamacher, long_tail, norms, xz

__all__ = ["ClassSpec", "ObjectSpec", "SPECS", "batched_spec"]

_XZ = np.array([0, 2])


@dataclass(frozen=True)
class ObjectSpec:
    """One object of the observation: its position (the class's ``_get_pos_objects``), a body's ``xpos``
    (``("body", name)``), a site's (``("site", name)``) or a geom's (``("geom", name)``), plus ``offset`` if any; and its quaternion, from
    ``("geom", name)`` or ``("site", name)``: Markley's conversion of the geom's or the site's ``xmat``; ``("body", name)``: the body's ``xquat``;
    or ``("zeros", "")``."""

    position: Tuple[str, str] = ("body", "obj")
    offset: Optional[Tuple[float, float, float]] = None
    quat: Tuple[str, str] = ("geom", "objGeom")


@dataclass(frozen=True)
class ClassSpec:
    """What a batched class reads (its objects, in order) and its ``evaluate_state`` as arrays."""

    objects: Tuple[ObjectSpec, ...]
    outputs: Callable[[Any, np.ndarray, np.ndarray], Tuple[np.ndarray, Dict[str, np.ndarray]]]
    #: Attributes of each env its reward reads, set by its reset (``BatchedSawyer.values[name]``, one row each).
    env_values: Tuple[str, ...] = ()
    #: The site whose ``xpos`` the class's ``_target_pos`` is a view of (so it moves at every step), if any.
    target_site: Optional[str] = None
    #: Whether its outputs read contacts (``BatchedSawyer.touching``: the batch then keeps whole MjData).
    contacts: bool = False


def _reach_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerReachEnvV3.evaluate_state`` (reward_function_version "v2") of every env."""
    tcp = batch.tcp_center()
    target = batch.target
    tcp_to_target = norms(tcp - target)
    in_place_margin = norms(batch.hand_init - target)
    in_place = long_tail(tcp_to_target, 0, 0.05, in_place_margin)
    reward = 10 * in_place
    success = (tcp_to_target <= 0.05).astype(np.float64)
    infos = {"success": success, "near_object": tcp_to_target, "grasp_success": np.ones(len(target)),
             "grasp_reward": tcp_to_target, "in_place_reward": in_place, "obj_to_target": tcp_to_target,
             "unscaled_reward": reward}
    return reward, infos


def caging_reward(batch: Any, actions: np.ndarray, obj: np.ndarray, tcp: np.ndarray, obj_radius: float,
                  pad_success_thresh: float, xz_thresh: float, high_density: bool) -> Tuple[np.ndarray, np.ndarray]:
    """``_gripper_caging_reward`` of every env (without medium density), and the rows it cannot give exactly:
    where the gripper grips (``caging > 0.97`` and ``0 < action[3] <= 1``), Meta-World mixes the action's
    float32 into the rest, which then runs in float32; and where a margin is negative (its ValueError)."""
    left_y = batch.xpos[:, batch.left_pad, 1]
    right_y = batch.xpos[:, batch.right_pad, 1]
    obj_y, init_y = obj[:, 1], batch.obj_init[:, 1]
    margin_left = np.abs(np.abs(left_y - init_y) - pad_success_thresh)
    margin_right = np.abs(np.abs(right_y - init_y) - pad_success_thresh)
    caging_y = hamacher(long_tail(np.abs(left_y - obj_y), obj_radius, pad_success_thresh, margin_left),
                        long_tail(np.abs(right_y - obj_y), obj_radius, pad_success_thresh, margin_right))
    caging_xz_margin = norms(batch.obj_init[:, _XZ] - batch.init_tcp[:, _XZ]) - xz_thresh
    caging_xz = long_tail(norms(tcp[:, _XZ] - obj[:, _XZ]), 0, xz_thresh, caging_xz_margin)
    caging = hamacher(caging_y, caging_xz)
    grip = actions[:, -1]
    gripping = (caging > 0.97) & (grip > 0)
    rare = (gripping & (grip <= 1)) | (caging_xz_margin < 0)
    # Elsewhere the gripper effort is 1.0 (an action above 1) or nothing: float64 throughout.
    caging_and_gripping = hamacher(caging, np.where(gripping, 1.0, 0.0))
    if high_density:
        caging_and_gripping = (caging_and_gripping + caging) / 2
    return caging_and_gripping, rare


def _grasp_infos(success: np.ndarray, tcp_to_obj: np.ndarray, grasp_reward: np.ndarray, in_place: np.ndarray,
                 obj_to_target: np.ndarray, reward: np.ndarray) -> Dict[str, np.ndarray]:
    """A grasping class's infos in Meta-World's order. ``grasp_success`` (touching_main_object and the gripper
    open and the object lifted) is False here: the rows where the object is lifted are evaluated by the env."""
    return {"success": success.astype(np.float64), "near_object": (tcp_to_obj <= 0.03).astype(np.float64),
            "grasp_success": np.zeros(len(reward)), "grasp_reward": grasp_reward, "in_place_reward": in_place,
            "obj_to_target": obj_to_target, "unscaled_reward": reward}


def _push_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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
    batch.evaluate_rows(np.flatnonzero(rare | lifted), observations, actions, reward, infos)
    return reward, infos


def _pick_place_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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
    batch.evaluate_rows(np.flatnonzero(rare | grasped), observations, actions, reward, infos)
    return reward, infos


def _button_press_topdown_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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


def _drawer_close_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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
    infos = {"success": closed_enough.astype(np.float64), "near_object": (tcp_to_obj <= 0.01).astype(np.float64),
             "grasp_success": np.ones(len(obj)), "grasp_reward": object_grasped, "in_place_reward": in_place,
             "obj_to_target": target_to_obj, "unscaled_reward": reward}
    return reward, infos


def _window_open_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerWindowOpenEnvV3.evaluate_state`` (v2 rewards): no action in the reward. Its distances along x
    are ``np.linalg.norm`` of a scalar (a one-element ``dot``)."""
    radius = batch.envs[0].TARGET_RADIUS
    obj = observations[:, 4:7]  # _get_pos_objects(): the handle site, as in the observation (unclipped there)
    tcp = batch.tcp_center()
    target_to_obj = norms((obj[:, 0] - batch.target[:, 0])[:, None])
    target_to_obj_init = norms((batch.obj_init[:, 0] - batch.target[:, 0])[:, None])
    in_place = long_tail(target_to_obj, 0, radius, np.abs(target_to_obj_init - radius))
    tcp_to_obj = norms(obj - tcp)
    tcp_to_obj_init = norms(batch.values["window_handle_pos_init"] - batch.init_tcp)
    reach = long_tail(tcp_to_obj, 0, 0.02, np.abs(tcp_to_obj_init - 0.02))
    reward = 10 * hamacher(reach, in_place)
    infos = {"success": (target_to_obj <= radius).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.05).astype(np.float64), "grasp_success": np.ones(len(obj)),
             "grasp_reward": reach, "in_place_reward": in_place, "obj_to_target": target_to_obj,
             "unscaled_reward": reward}
    return reward, infos


def _drawer_open_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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


def _door_open_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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


def _door_close_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDoorCloseEnvV3.evaluate_state`` (v2 rewards): no action in the reward; its infos' own order."""
    radius = 0.05
    obj, target = observations[:, 4:7], batch.target
    tcp_to_target = norms(batch.tcp_center() - target)
    obj_to_target = norms(obj - target)
    in_place = gaussian(obj_to_target, 0, radius, norms(batch.obj_init - target))
    hand_margin = norms(batch.hand_init - obj) + 0.1
    hand_in_place = gaussian(tcp_to_target, 0, 0.25 * radius, hand_margin)
    reward = np.where(obj_to_target < radius, 10.0, 3 * hand_in_place + 6 * in_place)
    n = len(reward)
    infos = {"obj_to_target": obj_to_target, "in_place_reward": hand_in_place,
             "success": (obj_to_target <= 0.08).astype(np.float64), "near_object": np.zeros(n),
             "grasp_success": np.ones(n), "grasp_reward": np.ones(n), "unscaled_reward": reward}
    return reward, infos


def _lever_pull_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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


def _shelf_place_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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
    batch.evaluate_rows(np.flatnonzero(rare | lifted), observations, actions, reward, infos)
    return reward, infos


def _basketball_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
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


def _peg_insert_side_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPegInsertionSideEnvV3.evaluate_state`` (v2 rewards); the gripping rows by the env's own code."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    sites = batch.site_xpos
    obj_head = sites[:, batch.model.site("pegHead").id]
    tcp = batch.tcp_center()
    tcp_to_obj = norms(obj - tcp)
    scale = np.array([1.0, 2.0, 2.0])
    obj_to_target = norms((obj_head - target) * scale)
    in_place = long_tail(obj_to_target, 0, radius, norms((batch.values["peg_head_pos_init"] - target) * scale))
    corners = [sites[:, batch.model.site(name).id] for name in (
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


def _sweep_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *, grip_margin: float,
                   xz_margin: float, goal_at_object_height: bool):
    """``SawyerSweepEnvV3`` and ``SawyerSweepIntoGoalEnvV3``'s ``evaluate_state`` (v2 rewards): their own
    ``_gripper_caging_reward`` (no action in it), and ``grasp_success`` from the contacts where the gripper
    is open (``BatchedSawyer.touching``); rows where the xz margin is negative (Meta-World's ValueError)
    by the env's own code."""
    radius, obj_radius, pad_margin = 0.05, batch.envs[0].OBJ_RADIUS, 0.05
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    target = batch.target.copy()
    if goal_at_object_height:
        target[:, 2] = obj[:, 2]
    tcp = batch.tcp_center()
    obj_to_target = norms(obj - target)
    tcp_to_obj = norms(obj - tcp)
    in_place = long_tail(obj_to_target, 0, radius, norms(batch.obj_init - target))
    # _gripper_caging_reward; init_left_pad and init_right_pad are views of the pads' xpos (see pick-place).
    left_pad, right_pad = batch.xpos[:, batch.left_pad, 1], batch.xpos[:, batch.right_pad, 1]
    left_delta, right_delta = left_pad - obj[:, 1], obj[:, 1] - right_pad
    right_margin = np.abs(np.abs(obj[:, 1] - right_pad) - pad_margin)
    left_margin = np.abs(np.abs(obj[:, 1] - left_pad) - pad_margin)
    y_caging = hamacher(long_tail(right_delta, obj_radius, pad_margin, right_margin),
                        long_tail(left_delta, obj_radius, pad_margin, left_margin))
    grip_success_margin = obj_radius + grip_margin
    y_gripping = hamacher(long_tail(right_delta, obj_radius, grip_success_margin, right_margin),
                          long_tail(left_delta, obj_radius, grip_success_margin, left_margin))
    caging_xz_margin = norms(xz(batch.obj_init) - xz(batch.init_tcp)) - xz_margin
    x_z_caging = long_tail(norms(xz(tcp) - xz(obj)), 0, xz_margin, caging_xz_margin)
    caging = hamacher(y_caging, x_z_caging)
    object_grasped = (caging + np.where(caging > 0.95, y_gripping, 0.0)) / 2
    reward = (2 * object_grasped) + (6 * hamacher(object_grasped, in_place))
    reward = np.where(obj_to_target < radius, 10.0, reward)
    opened = np.flatnonzero(tcp_opened > 0)
    grasp_success = np.zeros(len(reward))
    grasp_success[opened] = batch.touching(opened, "objGeom")
    infos = {"success": (obj_to_target <= radius).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.03).astype(np.float64), "grasp_reward": object_grasped,
             "grasp_success": grasp_success, "in_place_reward": in_place, "obj_to_target": obj_to_target,
             "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero(caging_xz_margin < 0), observations, actions, reward, infos)
    return reward, infos


_HANDLE = ObjectSpec(("geom", "handle"), None, ("geom", "handle"))

#: Meta-World class name -> how to batch it.
SPECS: Dict[str, ClassSpec] = {
    "SawyerReachEnvV3": ClassSpec((ObjectSpec(),), _reach_outputs),
    "SawyerPushEnvV3": ClassSpec((ObjectSpec(),), _push_outputs),
    "SawyerPickPlaceEnvV3": ClassSpec((ObjectSpec(),), _pick_place_outputs),
    "SawyerButtonPressTopdownEnvV3": ClassSpec(
        (ObjectSpec(("body", "button"), (0.0, 0.0, 0.193), ("body", "button")),), _button_press_topdown_outputs,
        env_values=("_obj_to_target_init",)),
    "SawyerDrawerCloseEnvV3": ClassSpec((ObjectSpec(("body", "drawer_link"), (0.0, -0.16, 0.05), ("zeros", "")),),
                                        _drawer_close_outputs),
    "SawyerDrawerOpenEnvV3": ClassSpec(
        (ObjectSpec(("body", "drawer_link"), (0.0, -0.16, 0.0), ("body", "drawer_link")),), _drawer_open_outputs),
    "SawyerWindowOpenEnvV3": ClassSpec((ObjectSpec(("site", "handleOpenStart"), None, ("zeros", "")),),
                                       _window_open_outputs, env_values=("window_handle_pos_init",)),
    "SawyerDoorEnvV3": ClassSpec((_HANDLE,), _door_open_outputs),
    "SawyerDoorCloseEnvV3": ClassSpec((_HANDLE,), _door_close_outputs),
    "SawyerLeverPullEnvV3": ClassSpec((ObjectSpec(("site", "leverStart"), None, ("geom", "objGeom")),),
                                      _lever_pull_outputs, env_values=("_lever_pos_init",)),
    "SawyerShelfPlaceEnvV3": ClassSpec((ObjectSpec(),), _shelf_place_outputs),
    "SawyerSweepEnvV3": ClassSpec((ObjectSpec(quat=("body", "obj")),), functools.partial(
        _sweep_outputs, grip_margin=0.01, xz_margin=0.005, goal_at_object_height=False), contacts=True),
    "SawyerSweepIntoGoalEnvV3": ClassSpec((ObjectSpec(),), functools.partial(
        _sweep_outputs, grip_margin=0.005, xz_margin=0.01, goal_at_object_height=True), contacts=True),
    "SawyerPegInsertionSideEnvV3": ClassSpec((ObjectSpec(("site", "pegGrasp"), None, ("site", "pegGrasp")),),
                                             _peg_insert_side_outputs, env_values=("peg_head_pos_init",)),
    "SawyerBasketballEnvV3": ClassSpec((ObjectSpec(("body", "bsktball"), None, ("body", "bsktball")),),
                                       _basketball_outputs, target_site="goal"),
}


def batched_spec(env: Any) -> ClassSpec | None:
    """The spec of ``env``'s Meta-World class (a fast subclass counts as its class), or ``None``."""
    for cls in type(env).__mro__:
        spec = SPECS.get(cls.__name__)
        if spec is not None and cls.__module__.startswith("metaworld."):
            return spec
    return None
