"""The handles' ``evaluate_state`` as arrays: handle-press, handle-pull and their side variants (registered in
``rewards.SPECS``). The presses have no action in their rewards; the pulls' gripping rows (float32 from the
action) go to the env's own ``evaluate_state``, as push's (``grasping.caging_reward``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms
from .grasping import caging_reward


def handle_press_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerHandlePressEnvV3.evaluate_state`` and its side variant's (v2 rewards): no action in the
    reward; the distance along z is ``np.linalg.norm`` of a scalar, as the window's along x."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, target = observations[:, 4:7], batch.target  # _get_pos_objects(), as in the observation
    handle_init = batch.values["_handle_init_pos"]
    target_to_obj = norms((obj[:, 2] - target[:, 2])[:, None])
    target_to_obj_init = norms((handle_init[:, 2] - target[:, 2])[:, None])
    in_place = long_tail(target_to_obj, 0, radius, np.abs(target_to_obj_init - radius))
    tcp_to_obj = norms(obj - batch.tcp_center())
    reach = long_tail(tcp_to_obj, 0, 0.02, np.abs(norms(handle_init - batch.init_tcp) - 0.02))
    pressed = target_to_obj <= radius
    reward = np.where(pressed, 1.0, hamacher(reach, in_place)) * 10
    infos = {"success": pressed.astype(np.float64), "near_object": (tcp_to_obj <= 0.05).astype(np.float64),
             "grasp_success": np.ones(len(obj)), "grasp_reward": reach, "in_place_reward": in_place,
             "obj_to_target": target_to_obj, "unscaled_reward": reward}
    return reward, infos


def handle_pull_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *, side: bool = False):
    """``SawyerHandlePullEnvV3.evaluate_state`` (v2 rewards), or with ``side`` ``SawyerHandlePullSideEnvV3``'s:
    the distance to the target along z (side: in space, its scale of ones exact), wider pads, success within
    0.08. Both compare the object's y (pull) or z (side) with the initial position's z for the bonus."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    tcp = batch.tcp_center()
    if side:
        target_to_obj, target_to_obj_init = norms(obj - target), norms(batch.obj_init - target)
    else:
        target_to_obj = np.abs(target[:, 2] - obj[:, 2])
        target_to_obj_init = np.abs(target[:, 2] - batch.obj_init[:, 2])
    in_place = long_tail(target_to_obj, 0, radius, target_to_obj_init)
    object_grasped, rare = caging_reward(batch, actions, obj, tcp, obj_radius=0.032 if side else 0.022,
                                         pad_success_thresh=0.06 if side else 0.05, xz_thresh=0.01,
                                         high_density=True)
    reward = hamacher(object_grasped, in_place)
    tcp_to_obj = norms(obj - tcp)
    init_z = batch.obj_init[:, 2]
    lifted = (tcp_to_obj < 0.035) & (tcp_opened > 0) & ((obj[:, 2] if side else obj[:, 1]) - 0.01 > init_z)
    reward = np.where(lifted, reward + (1.0 + 5.0 * in_place), reward)
    reward = np.where(target_to_obj < radius, 10.0, reward)
    infos = {"success": (target_to_obj <= (0.08 if side else radius)).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.05).astype(np.float64),
             "grasp_success": ((tcp_opened > 0) & (obj[:, 2] - 0.03 > init_z)).astype(np.float64),
             "grasp_reward": object_grasped, "in_place_reward": in_place, "obj_to_target": target_to_obj,
             "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos
