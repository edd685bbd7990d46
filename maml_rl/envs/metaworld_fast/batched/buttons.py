"""The buttons' ``evaluate_state`` as arrays: button-press (and its wall), button-press-topdown's wall and
coffee-button (registered in ``rewards.SPECS``; button-press-topdown itself is in ``articulated.py``). No
action enters their rewards. Each gives every env's reward and infos, bit for bit Meta-World's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms


def _at_least_zero(x: np.ndarray) -> np.ndarray:
    """Python's ``max(x, 0.0)`` of each value: ``x`` unless ``0.0 > x`` (so NaN and -0.0 stay)."""
    return np.where(0.0 > x, 0.0, x)


def _button(batch: Any, observations: np.ndarray, axis: int, near_bound: float, margin: Any):
    """What every button reward starts from: the distances, and the near and pressed tolerances."""
    obj = observations[:, 4:7]
    tcp_to_obj = norms(obj - batch.tcp_center())
    tcp_to_obj_init = norms(obj - batch.init_tcp)
    obj_to_target = np.abs(batch.target[:, axis] - obj[:, axis])
    near_button = long_tail(tcp_to_obj, 0, near_bound, tcp_to_obj_init)
    button_pressed = long_tail(obj_to_target, 0, 0.005, margin)
    return tcp_to_obj, obj_to_target, near_button, button_pressed


def _infos(observations, reward, tcp_to_obj, obj_to_target, near_button, button_pressed, success: float):
    return reward, {"success": (obj_to_target <= success).astype(np.float64),
                    "near_object": (tcp_to_obj <= 0.05).astype(np.float64),
                    "grasp_success": (observations[:, 3] > 0).astype(np.float64), "grasp_reward": near_button,
                    "in_place_reward": button_pressed, "obj_to_target": obj_to_target, "unscaled_reward": reward}


def button_press_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *, coffee: bool = False):
    """``SawyerButtonPressEnvV3.evaluate_state`` (v2 rewards), or with ``coffee``
    ``SawyerCoffeeButtonEnvV3``'s: the same but for its pressed margin, the class's ``max_dist``."""
    margin = batch.envs[0].max_dist if coffee else batch.values["_obj_to_target_init"]
    tcp_to_obj, obj_to_target, near, pressed = _button(batch, observations, 1, 0.05, margin)
    reward = 2 * hamacher(_at_least_zero(observations[:, 3]), near)
    reward = np.where(tcp_to_obj <= 0.05, reward + 8 * pressed, reward)
    return _infos(observations, reward, tcp_to_obj, obj_to_target, near, pressed, 0.02)


def button_press_wall_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerButtonPressWallEnvV3.evaluate_state`` (v2 rewards): near the button, ``2 + 2 * (1 + obs[3]) +
    4 * pressed ** 2`` (a Python float's ``** 2``: C's ``pow``, as ``np.float_power``)."""
    tcp_to_obj, obj_to_target, near, pressed = _button(batch, observations, 1, 0.01,
                                                       batch.values["_obj_to_target_init"])
    gripper = observations[:, 3]
    far = 2 * hamacher((1 - gripper) / 2.0, near)
    close = 2 + 2 * (1 + gripper) + 4 * np.float_power(pressed, 2)
    reward = np.where(tcp_to_obj > 0.07, far, close)
    return _infos(observations, reward, tcp_to_obj, obj_to_target, near, pressed, 0.03)


def button_press_topdown_wall_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray):
    """``SawyerButtonPressTopdownWallEnvV3.evaluate_state`` (v2 rewards): button-press-topdown's, with
    ``max(obs[3], 0.0)`` for its ``1 - obs[3]``."""
    tcp_to_obj, obj_to_target, near, pressed = _button(batch, observations, 2, 0.01,
                                                       batch.values["_obj_to_target_init"])
    reward = 5 * hamacher(_at_least_zero(observations[:, 3]), near)
    reward = np.where(tcp_to_obj <= 0.03, reward + 5 * pressed, reward)
    return _infos(observations, reward, tcp_to_obj, obj_to_target, near, pressed, 0.024)
