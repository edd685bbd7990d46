"""The sticks' ``evaluate_state`` as arrays: stick-push and stick-pull (registered in ``rewards.SPECS``). Their
caging is the base class's (``grasping.caging_reward``; stick-push's from the stick's initial position), its
gripping rows by the env's own code; so are the
rows where a margin is negative (Meta-World's ValueError), and those whose ``grasp_success`` needs the stick's
contacts (the gripper open and the stick lifted) where the caller reads it or, for stick-push, where the
container is in place (its ``success`` is ``grasp_success and`` that).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms
from .grasping import _for_grasp_success, caging_reward


def _infos(success, tcp_to_stick, grasp_reward, in_place, to_target, reward):
    """Their infos in Meta-World's order; ``grasp_success`` 0 here (the rows where it may not be, by the env)."""
    return {"success": success.astype(np.float64), "near_object": (tcp_to_stick <= 0.03).astype(np.float64),
            "grasp_success": np.zeros(len(reward)), "grasp_reward": grasp_reward, "in_place_reward": in_place,
            "obj_to_target": to_target, "unscaled_reward": reward}


def stick_push_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerStickPushEnvV3.evaluate_state`` (v2 rewards) of every env."""
    radius = 0.12
    stick = observations[:, 4:7] + np.array([0.015, 0.0, 0.0])
    container, tcp_opened, target = observations[:, 11:14], observations[:, 3], batch.target
    stick_init = batch.values["stick_init_pos"]
    tcp = batch.tcp_center()
    tcp_to_stick = norms(stick - tcp)
    stick_margin = norms(stick_init - target) - radius
    stick_in_place = long_tail(norms(stick - target), 0, radius, stick_margin)
    container_to_target = norms(container - target)
    container_margin = norms(batch.obj_init - target) - radius
    container_in_place = long_tail(container_to_target, 0, radius, container_margin)
    caging, rare = caging_reward(batch, actions, stick, tcp, obj_radius=0.04, pad_success_thresh=0.05,
                                 xz_thresh=0.01, high_density=True, init=stick_init)
    lifted = (tcp_opened > 0) & (stick[:, 2] - 0.01 > stick_init[:, 2])
    holding = (tcp_to_stick < 0.02) & lifted
    reward = np.where(holding, np.where(container_to_target <= radius, 10.0,
                                        2.0 + 5.0 * stick_in_place + 3.0 * container_in_place), caging)
    placed = container_to_target <= 0.12
    infos = _infos(np.zeros(len(reward), dtype=np.bool_), tcp_to_stick, np.where(holding, 1.0, caging),
                   stick_in_place, container_to_target, reward)
    by_env = rare | (stick_margin < 0) | (container_margin < 0) | (lifted & placed) | _for_grasp_success(batch, lifted)
    batch.evaluate_rows(np.flatnonzero(by_env), observations, actions, reward, infos)
    return reward, infos


def stick_pull_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerStickPullEnvV3.evaluate_state`` (v2 rewards) of every env: success with the handle in place and
    the stick's end inserted in it (the ``stick_end`` site); ``grasp_success`` against the container's initial
    height."""
    radius = 0.05
    stick, handle, tcp_opened, target = observations[:, 4:7], observations[:, 11:14], observations[:, 3], batch.target
    end_of_stick = batch.site_xpos[:, batch.id("site", "stick_end")]
    container = handle + np.array([0.05, 0.0, 0.0])
    container_init = batch.obj_init + np.array([0.05, 0.0, 0.0])
    stick_init = batch.values["stick_init_pos"]
    tcp = batch.tcp_center()
    tcp_to_stick = norms(stick - tcp)
    handle_to_target = norms(handle - target)
    scale = np.array([1.0, 1.0, 2.0])
    stick_in_place = long_tail(norms((stick - container) * scale), 0, radius,
                               norms((stick_init - container_init) * scale))
    stick_in_place_2 = long_tail(norms(stick - target), 0, radius, norms(stick_init - target))
    container_in_place = long_tail(norms(container - target), 0, radius, norms(batch.obj_init - target))
    caging, rare = caging_reward(batch, actions, stick, tcp, obj_radius=0.014, pad_success_thresh=0.05,
                                 xz_thresh=0.01, high_density=True)
    holding = (tcp_to_stick < 0.02) & (tcp_opened > 0) & (stick[:, 2] - 0.01 > stick_init[:, 2])
    object_grasped = np.where(holding, 1.0, caging)
    grasped_in_place = hamacher(object_grasped, stick_in_place)
    inserted = ((end_of_stick[:, 0] >= handle[:, 0]) & (np.abs(end_of_stick[:, 1] - handle[:, 1]) <= 0.040)
                & (np.abs(end_of_stick[:, 2] - handle[:, 2]) <= 0.060))
    pulled = np.where(handle_to_target <= 0.12, 10.0,
                      1.0 + grasped_in_place + 5.0 + 2.0 * stick_in_place_2 + 1.0 * container_in_place)
    reward = np.where(holding, np.where(inserted, pulled, 1.0 + grasped_in_place + 5.0 * stick_in_place),
                      grasped_in_place)
    success = (handle_to_target <= 0.12) & inserted
    lifted = (tcp_opened > 0) & (stick[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _infos(success, tcp_to_stick, object_grasped, stick_in_place, handle_to_target, reward)
    batch.evaluate_rows(np.flatnonzero(rare | _for_grasp_success(batch, lifted)), observations, actions, reward,
                        infos)
    return reward, infos
