"""The plate slides' ``evaluate_state`` as arrays: plate-slide and its side, back and back-side variants
(registered in ``rewards.SPECS``). No action enters their rewards, and no contact; each gives every env's
reward and infos, bit for bit Meta-World's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import hamacher, long_tail, norms

_RADIUS = 0.05  # their compute_reward's _TARGET_RADIUS


def plate_slide_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *, variant: str = ""):
    """``SawyerPlateSlideEnvV3.evaluate_state`` (v2 rewards), or with ``variant`` "side", "back" or
    "back-side" that class's: their margins less the radius, and a reward in steps (1.5 x grasped; near
    the plate with the hand low, 2 + 7 x in place) where plate-slide's is 8 x their Hamacher product. Both
    are 10 with the plate in place. The back variants list ``grasp_success`` before ``grasp_reward``."""
    obj, tcp, target = observations[:, 4:7], batch.tcp_center(), batch.target
    obj_to_target = norms(obj - target)
    in_place_margin = norms(batch.obj_init - target)
    tcp_to_obj = norms(tcp - obj)
    grasped_margin = norms(batch.init_tcp - batch.obj_init)
    if variant:
        in_place_margin, grasped_margin = in_place_margin - _RADIUS, grasped_margin - _RADIUS
    in_place = long_tail(obj_to_target, 0, _RADIUS, in_place_margin)
    grasped = long_tail(tcp_to_obj, 0, _RADIUS, grasped_margin)
    if variant:
        reward = np.where((tcp[:, 2] <= 0.03) & (tcp_to_obj < 0.07), 2.0 + 7.0 * in_place, 1.5 * grasped)
    else:
        reward = 8 * hamacher(grasped, in_place)
    reward = np.where(obj_to_target < _RADIUS, 10.0, reward)
    n = len(reward)
    infos = {"success": (obj_to_target <= 0.07).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.03).astype(np.float64)}
    if variant.startswith("back"):
        infos.update(grasp_success=np.zeros(n), grasp_reward=grasped)
    else:
        infos.update(grasp_reward=grasped, grasp_success=np.zeros(n))
    infos.update(in_place_reward=in_place, obj_to_target=obj_to_target, unscaled_reward=reward)
    return reward, infos
