"""Bin-picking's ``evaluate_state`` as arrays (registered in ``rewards.SPECS``): a floor of two funnels (``np.log``
as the scalar's), the base class's caging at 0.7 of the gripper's effort (its gripping rows by the env's own
code), and an in-place margin that is the distance at the episode's first step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms
from .grasping import caging_reward


def _funnel(distance: np.ndarray, threshold: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):  # the rows within the threshold take 0.0
        return np.where(distance > threshold, 0.02 * np.log(distance - threshold) + 0.2, 0.0)


def bin_picking_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerBinPickingEnvV3.evaluate_state`` (v2 rewards) of every env. Its ``_target_pos`` is
    ``get_body_com``'s view of the goal bin's ``xpos``, read where it is now. Its ``_target_to_obj_init`` is set
    by the first ``compute_reward`` after a reset (None before): kept here per env, and given to the env at that
    step, so that the env's own code (its gripping rows, a later step) reads the same."""
    env = batch.envs[0]
    hand, obj = observations[:, :3], observations[:, 4:7]
    target = batch.xpos[:, batch.id("body", "bin_goal")]
    target_to_obj = norms(obj - target)
    first = batch.values.get("_target_to_obj_init")
    if first is None:
        first = batch.values["_target_to_obj_init"] = np.zeros(len(obj))
    starting = np.flatnonzero(batch.path_length == 1)  # the first step after each env's reset
    first[starting] = target_to_obj[starting]
    for i in starting:
        batch.envs[i]._target_to_obj_init = float(target_to_obj[i])
    in_place = long_tail(target_to_obj, 0, env.TARGET_RADIUS, first)
    threshold = 0.03
    around_obj = _funnel(norms(hand[:, :2] - batch.obj_init[:, :2]), threshold)
    around_target = _funnel(norms(hand[:, :2] - target[:, :2]), threshold)
    floor = np.where(around_target < around_obj, around_target, around_obj)  # min([obj's, target's])
    below = floor - hand[:, 2]
    above_floor = np.where(hand[:, 2] >= floor, 1.0, long_tail(np.where(0.0 > below, 0.0, below), 0.0, 0.01, 0.05))
    object_grasped, rare = caging_reward(batch, actions, obj, batch.tcp_center(), obj_radius=0.015,
                                         pad_success_thresh=0.05, xz_thresh=0.01, high_density=True,
                                         desired_gripper_effort=0.7)
    reward = hamacher(object_grasped, in_place)
    near_object = norms(obj - hand) < 0.04
    grasp_success = near_object & (obj[:, 2] - 0.02 > batch.obj_init[:, 2]) & ~(observations[:, 3] < 0.43)
    reward = np.where(grasp_success, reward + (1.0 + 5.0 * hamacher(above_floor, in_place)), reward)
    reward = np.where(target_to_obj < env.TARGET_RADIUS, 10.0, reward)
    infos = {"success": (target_to_obj <= 0.05).astype(np.float64), "near_object": near_object.astype(np.float64),
             "grasp_success": grasp_success.astype(np.float64), "grasp_reward": object_grasped,
             "in_place_reward": in_place, "obj_to_target": target_to_obj, "unscaled_reward": reward}
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos
