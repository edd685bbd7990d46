"""The faucets' ``evaluate_state`` as arrays: faucet-open and faucet-close (registered in ``rewards.SPECS``).
No action enters their rewards; each gives every env's reward and infos, bit for bit Meta-World's own.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from .arrays import gaussian, long_tail, norms


def faucet_outputs(batch: Any, observations: np.ndarray, actions: np.ndarray, *,
                   offset: Optional[Tuple[float, float, float]] = None):
    """``SawyerFaucetCloseEnvV3.evaluate_state`` (v2 rewards), or with ``offset`` ``(-0.04, 0.0, 0.03)``
    ``SawyerFaucetOpenEnvV3``'s, whose handle is the observation's plus that offset. Within the class's
    ``_target_radius`` of the target the reward is the int 10 (the same float64)."""
    radius = batch.envs[0]._target_radius
    obj = observations[:, 4:7] if offset is None else observations[:, 4:7] + np.array(offset)
    target = batch.target
    target_to_obj = norms(obj - target)
    in_place = long_tail(target_to_obj, 0, radius, np.abs(norms(batch.obj_init - target) - radius))
    tcp_to_obj = norms(obj - batch.tcp_center())
    reach = gaussian(tcp_to_obj, 0, 0.01, np.abs(norms(batch.obj_init - batch.init_tcp) - 0.01))
    reward = (2 * reach + 3 * in_place) * 2
    reward = np.where(target_to_obj <= radius, 10.0, reward)
    batch.typed("unscaled_reward", target_to_obj <= radius, int)
    infos = {"success": (target_to_obj <= 0.07).astype(np.float64),
             "near_object": (tcp_to_obj <= 0.01).astype(np.float64), "grasp_success": np.ones(len(obj)),
             "grasp_reward": reach, "in_place_reward": in_place, "obj_to_target": target_to_obj,
             "unscaled_reward": reward}
    return reward, infos
