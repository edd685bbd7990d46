"""The tools' ``evaluate_state`` as arrays: hammer, and the wrench of assembly and disassemble (registered in
``rewards.SPECS``): their static ``_reward_quat`` and ``_reward_pos``, and the base class's caging
(``grasping.caging_reward``, its gripping rows by the env's own code) on the handle's position moved to the
hand's x within half the handle's length. Their ``obj_to_target`` is the int 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import long_tail, norms
from .grasping import caging_reward

_LAID_DOWN = np.array([1.0, 0.0, 0.0, 0.0])
_WRENCH_LAID_DOWN = np.array([0.707, 0, 0, 0.707])


def _threshed(observations: np.ndarray, handle_length: float) -> np.ndarray:
    """The object's position with the hand's x where they are within half the handle's length in x."""
    hand, obj = observations[:, :3], observations[:, 4:7]
    threshed = obj.copy()
    within = np.abs(obj[:, 0] - hand[:, 0]) < handle_length / 2.0
    threshed[within, 0] = hand[within, 0]
    return threshed


def _flat(observations: np.ndarray, ideal: np.ndarray, tolerance: float) -> np.ndarray:
    """``_reward_quat``: ``max(1 - error / tolerance, 0.0)``, the error a norm over the object's quaternion."""
    quat = 1.0 - norms(observations[:, 7:11] - ideal) / tolerance
    return np.where(0.0 > quat, 0.0, quat)


def _tool_infos(reward, reward_grab, reward_quat, in_place, success):
    return {"success": success.astype(np.float64), "near_object": reward_quat,
            "grasp_success": (reward_grab >= 0.5).astype(np.float64), "grasp_reward": reward_grab,
            "in_place_reward": in_place, "obj_to_target": np.zeros(len(reward)), "unscaled_reward": reward}


def hammer_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerHammerEnvV3.evaluate_state`` (v2 rewards) of every env: its reward scaled by how flat the hammer
    lies; a success (the nail in past 9 cm) only above a reward of 5; ``obj_to_target`` the int 0."""
    hammer = observations[:, 4:7]
    hammer_head = hammer + np.array([0.16, 0.06, 0.0])
    reward_quat = _flat(observations, _LAID_DOWN, 0.4)
    reward_grab, rare = caging_reward(batch, actions, _threshed(observations, type(batch.envs[0]).HAMMER_HANDLE_LENGTH),
                                      batch.tcp_center(), obj_radius=0.015, pad_success_thresh=0.02, xz_thresh=0.01,
                                      high_density=True)
    lifted = (hammer_head[:, 2] > 0.02).astype(np.float64)
    in_place = 0.1 * lifted + 0.9 * long_tail(norms(batch.target - hammer_head), 0, 0.02, 0.2)
    reward = (2.0 * reward_grab + 6.0 * in_place) * reward_quat
    success = batch.joint_qpos("NailSlideJoint") > 0.09
    reward = np.where(success & (reward > 5.0), 10.0, reward)
    infos = _tool_infos(reward, reward_grab, reward_quat, in_place, success)
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos


def assembly_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerNutAssemblyEnvV3.evaluate_state`` (v2 rewards) of every env: the medium-density caging on the
    wrench; its ``_reward_pos`` from the nut's centre (the ``RoundNut`` site), a funnel above the peg (``np.log``
    as the scalar's) that widens once the nut is aligned and hooked, which is success."""
    wrench_center = batch.site_xpos[:, batch.id("site", "RoundNut")]
    reward_quat = _flat(observations, _WRENCH_LAID_DOWN, 0.4)
    reward_grab, rare = caging_reward(batch, actions, _threshed(observations, type(batch.envs[0]).WRENCH_HANDLE_LENGTH),
                                      batch.tcp_center(), obj_radius=0.015, pad_success_thresh=0.02, xz_thresh=0.01,
                                      high_density=False, medium_density=True, object_reach_radius=0.01)
    pos_error = batch.target - wrench_center
    radius = norms(pos_error[:, :2])
    success = (radius < 0.02) & (pos_error[:, 2] > 0.0)
    threshold = np.where(success, 0.02, 0.01)
    with np.errstate(divide="ignore", invalid="ignore"):  # the rows within the threshold take 0.0
        target_height = np.where(radius > threshold, 0.02 * np.log(radius - threshold) + 0.2, 0.0)
    pos_error[:, 2] = target_height - wrench_center[:, 2]
    lifted = ((wrench_center[:, 2] > 0.02) | (radius < threshold)).astype(np.float64)
    in_place = 0.1 * lifted + 0.9 * long_tail(norms(pos_error * np.array([1.0, 1.0, 3.0])), 0, 0.02, 0.4)
    reward = (2.0 * reward_grab + 6.0 * in_place) * reward_quat
    reward = np.where(success, 10.0, reward)
    infos = _tool_infos(reward, reward_grab, reward_quat, in_place, success)
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos


def disassemble_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerNutDisassembleEnvV3.evaluate_state`` (v2 rewards) of every env: the high-density caging on the
    wrench; its ``_reward_pos`` to 10 cm above the target from the nut's centre; success with the wrench above
    the target's height."""
    wrench_center = batch.site_xpos[:, batch.id("site", "RoundNut")]
    reward_quat = _flat(observations, _WRENCH_LAID_DOWN, 0.4)
    reward_grab, rare = caging_reward(batch, actions, _threshed(observations, type(batch.envs[0]).WRENCH_HANDLE_LENGTH),
                                      batch.tcp_center(), obj_radius=0.015, pad_success_thresh=0.02, xz_thresh=0.01,
                                      high_density=True)
    pos_error = batch.target + np.array([0.0, 0.0, 0.1]) - wrench_center
    lifted = (wrench_center[:, 2] > 0.02).astype(np.float64)
    in_place = 0.1 * lifted + 0.9 * long_tail(norms(pos_error), 0, 0.02, 0.2)
    reward = (2.0 * reward_grab + 6.0 * in_place) * reward_quat
    success = observations[:, 6] > batch.target[:, 2]
    reward = np.where(success, 10.0, reward)
    infos = _tool_infos(reward, reward_grab, reward_quat, in_place, success)
    batch.evaluate_rows(np.flatnonzero(rare), observations, actions, reward, infos)
    return reward, infos
