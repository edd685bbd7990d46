"""The keys of each Meta-World class's step info, in the order its ``evaluate_state`` writes them, and the type of
each value (``bool``, ``int`` or ``float``; a NumPy float64 counts as ``float``) in the rows a batch computes as
arrays (``BatchedSawyer.typed`` marks a step's exceptions; the rows handed to the env's own ``evaluate_state`` have
its own dict).

A batched step gives every info as a float64 column (``BatchedSawyer.step``); where a caller rebuilds the infos
Meta-World's own ``env.step`` returns (the vector env: gymnasium makes a bool or int64 array of a bool or int
value), it needs these. Checked against every class's own steps by ``tests/envs/test_metaworld_batched.py``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .rewards import SPECS

__all__ = ["INFO_KEYS", "INFO_TYPES", "InfoTypes", "info_types"]

#: ((key, type), ...) in the info's order.
InfoTypes = Tuple[Tuple[str, type], ...]

#: The keys of every class's info (in most classes' order).
INFO_KEYS = ("success", "near_object", "grasp_success", "grasp_reward", "in_place_reward", "obj_to_target",
         "unscaled_reward")


def _types(keys: Tuple[str, ...] = INFO_KEYS, **types: type) -> InfoTypes:
    return tuple((key, types.get(key, float)) for key in keys)


# The tools, the box and the door return grasp_success as a bool and obj_to_target as the int 0; the door's
# closing, the plates and the sweeps order their keys otherwise.
_GRASP_BOOL = _types(grasp_success=bool, obj_to_target=int)
_PLATES = _types(("success", "near_object", "grasp_reward", "grasp_success", "in_place_reward", "obj_to_target",
                  "unscaled_reward"))

#: Meta-World class name -> its info's keys and types (where a branch gives another type, its outputs function
#: says so at that step: ``BatchedSawyer.typed``).
INFO_TYPES: Dict[str, InfoTypes] = {
    **{name: _types() for name in SPECS},
    **{name: _GRASP_BOOL for name in ("SawyerNutAssemblyEnvV3", "SawyerBoxCloseEnvV3", "SawyerNutDisassembleEnvV3",
                                      "SawyerDoorEnvV3", "SawyerHammerEnvV3")},
    **{name: _PLATES for name in ("SawyerPlateSlideEnvV3", "SawyerPlateSlideSideEnvV3", "SawyerSweepIntoGoalEnvV3",
                                  "SawyerSweepEnvV3")},
    "SawyerDoorCloseEnvV3": _types(("obj_to_target", "in_place_reward", "success", "near_object", "grasp_success",
                                    "grasp_reward", "unscaled_reward")),
}


def info_types(env: Any) -> Optional[InfoTypes]:
    """The info keys and types of ``env``'s Meta-World class (a fast subclass counts as its class; ``env`` may be
    the class), or ``None`` (not a Meta-World class, or one whose types vary by step)."""
    for cls in (env if isinstance(env, type) else type(env)).__mro__:
        types = INFO_TYPES.get(cls.__name__)
        if types is not None and cls.__module__.startswith("metaworld."):
            return types
    return None
