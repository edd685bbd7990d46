"""The door locks' ``evaluate_state`` as arrays: door-lock and door-unlock (registered in ``rewards.SPECS``).
No action enters their rewards; each gives every env's reward and infos, bit for bit Meta-World's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms
from .buttons import _at_least_zero

_SCALE = np.array([0.25, 1.0, 0.5])


def _infos(observations, reward, tcp_to_obj, obj_to_target, near, pressed):
    return reward, {"success": (obj_to_target <= 0.02).astype(np.float64),
                    "near_object": (tcp_to_obj <= 0.05).astype(np.float64),
                    "grasp_success": (observations[:, 3] > 0).astype(np.float64), "grasp_reward": near,
                    "in_place_reward": pressed, "obj_to_target": obj_to_target, "unscaled_reward": reward}


def door_lock_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDoorLockEnvV3.evaluate_state`` (v2 rewards): the left pad's distance to the lock, scaled. Its
    ``init_left_pad`` is ``get_body_com``'s view of the pad's ``xpos`` (see pick-place): the pad where it is
    now, so the near tolerance's margin is that same distance."""
    obj = observations[:, 4:7]
    tcp_to_obj = norms((obj - batch.xpos[:, batch.left_pad]) * _SCALE)
    obj_to_target = np.abs(batch.target[:, 2] - obj[:, 2])
    near = long_tail(tcp_to_obj, 0, 0.01, tcp_to_obj)
    pressed = long_tail(obj_to_target, 0, 0.005, batch.envs[0]._lock_length)
    reward = 2 * hamacher(_at_least_zero(observations[:, 3]), near) + 8 * pressed
    return _infos(observations, reward, tcp_to_obj, obj_to_target, near, pressed)


def door_unlock_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerDoorUnlockEnvV3.evaluate_state`` (v2 rewards). Its ``obj_init_pos`` is a view of the lock
    link's ``xpos`` (taken at reset, never copied), so it reads the link's current position: the batch's."""
    gripper, lock = observations[:, :3], observations[:, 4:7]
    lock_link = batch.id("body", "lock_link")
    offset = np.array([0.0, 0.055, 0.07])
    shoulder_to_lock = norms((gripper + offset - lock) * _SCALE)
    shoulder_to_lock_init = norms((batch.init_tcp + offset - batch.xpos[:, lock_link]) * _SCALE)
    ready = long_tail(shoulder_to_lock, 0, 0.02, shoulder_to_lock_init)
    obj_to_target = np.abs(batch.target[:, 0] - lock[:, 0])
    pushed = long_tail(obj_to_target, 0, 0.005, batch.envs[0]._lock_length)
    reward = 2 * ready + 8 * pushed
    return _infos(observations, reward, shoulder_to_lock, obj_to_target, ready, pushed)
