"""Push-back's and soccer's ``evaluate_state`` as arrays (registered in ``rewards.SPECS``; push itself is in
``grasping.py``): their own caging reward, with no action in it (``grasping.object_caging``). As push's, the
rows whose ``grasp_success`` needs the contacts (the gripper open and the object lifted) go to the env's own
``evaluate_state``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms
from .grasping import _for_grasp_success, _grasp_infos, object_caging


def push_back_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerPushBackEnvV3.evaluate_state`` (v2 rewards) of every env."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    tcp = batch.tcp_center()
    tcp_to_obj = norms(obj - tcp)
    target_to_obj = norms(obj - batch.target)
    target_to_obj_init = norms(batch.obj_init - batch.target)
    in_place = long_tail(target_to_obj, 0, radius, target_to_obj_init)
    object_grasped, rare = object_caging(batch, obj, tcp, batch.envs[0].OBJ_RADIUS, grip_margin=0.003,
                                        xz_margin=0.01)
    reward = hamacher(object_grasped, in_place)
    pushing = (tcp_to_obj < 0.01) & (0 < tcp_opened) & (tcp_opened < 0.55) & (target_to_obj_init - target_to_obj > 0.01)
    reward = np.where(pushing, reward + (1.0 + 5.0 * in_place), reward)
    reward = np.where(target_to_obj < radius, 10.0, reward)
    lifted = (tcp_opened > 0) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(target_to_obj <= 0.07, tcp_to_obj, object_grasped, in_place, target_to_obj, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, lifted)), observations, actions, reward,
                        infos)
    return reward, infos


def soccer_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerSoccerEnvV3.evaluate_state`` (v2 rewards) of every env: the distances along x scaled by 3, the
    in-place reward cut past the goal line away from the goal; its infos' distance is the unscaled one."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened, target = observations[:, 4:7], observations[:, 3], batch.target
    scale = np.array([3.0, 1.0, 1.0])
    tcp_to_obj = norms(obj - batch.tcp_center())
    target_to_obj = norms((obj - target) * scale)
    in_place = long_tail(target_to_obj, 0, radius, norms((obj - batch.obj_init) * scale))
    goal_line = target[:, 1] - 0.1
    wide = (obj[:, 1] > goal_line) & (np.abs(obj[:, 0] - target[:, 0]) > 0.10)
    with np.errstate(divide="ignore", invalid="ignore"):  # only the wide rows' values are taken
        cut = np.clip(in_place - 2 * ((obj[:, 1] - goal_line) / (1 - goal_line)), 0.0, 1.0)
    in_place = np.where(wide, cut, in_place)
    object_grasped, rare = object_caging(batch, obj, batch.tcp_center(), batch.envs[0].OBJ_RADIUS,
                                        grip_margin=0.01, xz_margin=0.005)
    reward = (3 * object_grasped) + (6.5 * in_place)
    reward = np.where(target_to_obj < radius, 10.0, reward)
    obj_to_target = norms(obj - target)
    lifted = (tcp_opened > 0) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, lifted)), observations, actions, reward,
                        infos)
    return reward, infos
