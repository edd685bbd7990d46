"""The batched classes: what each reads and how its ``evaluate_state`` runs as arrays (see ``sawyer.py``).

A class's outputs function (``outputs(batch, observations, actions)``, ``batch`` the ``BatchedSawyer``, not
imported here: it imports this registry) gives every env's reward and infos, bit for bit Meta-World's own
``evaluate_state`` (``articulated.py``: reach, buttons, drawers, window, doors, lever; ``grasping.py``: the
classes that grasp or push an object, with the rows their arrays cannot give).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from .articulated import (button_press_topdown_outputs, door_close_outputs, door_open_outputs, drawer_close_outputs,
                          drawer_open_outputs, lever_pull_outputs, reach_outputs, window_open_outputs)
from .grasping import (basketball_outputs, peg_insert_side_outputs, pick_place_outputs, push_outputs,
                       shelf_place_outputs, sweep_outputs)

__all__ = ["ClassSpec", "ObjectSpec", "SPECS", "batched_spec"]


@dataclass(frozen=True)
class ObjectSpec:
    """One object of the observation: its position (the class's ``_get_pos_objects``), a body's ``xpos``
    (``("body", name)``), a site's (``("site", name)``) or a geom's (``("geom", name)``), plus ``offset`` if
    any; and its quaternion, from ``("geom", name)`` or ``("site", name)``: Markley's conversion of the geom's
    or the site's ``xmat``; ``("body", name)``: the body's ``xquat``; or ``("zeros", "")``."""

    position: Tuple[str, str] = ("body", "obj")
    offset: Optional[Tuple[float, float, float]] = None
    quat: Tuple[str, str] = ("geom", "objGeom")


@dataclass(frozen=True)
class ClassSpec:
    """What a batched class reads (its objects, in order) and its ``evaluate_state`` as arrays."""

    objects: Tuple[ObjectSpec, ...]
    outputs: Callable[[Any, np.ndarray, np.ndarray], Tuple[np.ndarray, Dict[str, np.ndarray]]]
    #: Attributes of each env its reward reads, set by its reset (``BatchedSawyer.values[name]``, one row each).
    env_values: Tuple[str, ...] = ()
    #: The site whose ``xpos`` the class's ``_target_pos`` is a view of (so it moves at every step), if any.
    target_site: Optional[str] = None
    #: Whether its outputs read contacts (``BatchedSawyer.touching``: the batch then keeps whole MjData).
    contacts: bool = False


_HANDLE = ObjectSpec(("geom", "handle"), None, ("geom", "handle"))

#: Meta-World class name -> how to batch it.
SPECS: Dict[str, ClassSpec] = {
    "SawyerReachEnvV3": ClassSpec((ObjectSpec(),), reach_outputs),
    "SawyerPushEnvV3": ClassSpec((ObjectSpec(),), push_outputs),
    "SawyerPickPlaceEnvV3": ClassSpec((ObjectSpec(),), pick_place_outputs),
    "SawyerButtonPressTopdownEnvV3": ClassSpec(
        (ObjectSpec(("body", "button"), (0.0, 0.0, 0.193), ("body", "button")),), button_press_topdown_outputs,
        env_values=("_obj_to_target_init",)),
    "SawyerDrawerCloseEnvV3": ClassSpec((ObjectSpec(("body", "drawer_link"), (0.0, -0.16, 0.05), ("zeros", "")),),
                                        drawer_close_outputs),
    "SawyerDrawerOpenEnvV3": ClassSpec(
        (ObjectSpec(("body", "drawer_link"), (0.0, -0.16, 0.0), ("body", "drawer_link")),), drawer_open_outputs),
    "SawyerWindowOpenEnvV3": ClassSpec((ObjectSpec(("site", "handleOpenStart"), None, ("zeros", "")),),
                                       window_open_outputs, env_values=("window_handle_pos_init",)),
    "SawyerDoorEnvV3": ClassSpec((_HANDLE,), door_open_outputs),
    "SawyerDoorCloseEnvV3": ClassSpec((_HANDLE,), door_close_outputs),
    "SawyerLeverPullEnvV3": ClassSpec((ObjectSpec(("site", "leverStart"), None, ("geom", "objGeom")),),
                                      lever_pull_outputs, env_values=("_lever_pos_init",)),
    "SawyerShelfPlaceEnvV3": ClassSpec((ObjectSpec(),), shelf_place_outputs),
    "SawyerSweepEnvV3": ClassSpec((ObjectSpec(quat=("body", "obj")),), functools.partial(
        sweep_outputs, grip_margin=0.01, xz_margin=0.005, goal_at_object_height=False), contacts=True),
    "SawyerSweepIntoGoalEnvV3": ClassSpec((ObjectSpec(),), functools.partial(
        sweep_outputs, grip_margin=0.005, xz_margin=0.01, goal_at_object_height=True), contacts=True),
    "SawyerPegInsertionSideEnvV3": ClassSpec((ObjectSpec(("site", "pegGrasp"), None, ("site", "pegGrasp")),),
                                             peg_insert_side_outputs, env_values=("peg_head_pos_init",)),
    "SawyerBasketballEnvV3": ClassSpec((ObjectSpec(("body", "bsktball"), None, ("body", "bsktball")),),
                                       basketball_outputs, target_site="goal"),
}


def batched_spec(env: Any) -> ClassSpec | None:
    """The spec of ``env``'s Meta-World class (a fast subclass counts as its class), or ``None``."""
    for cls in type(env).__mro__:
        spec = SPECS.get(cls.__name__)
        if spec is not None and cls.__module__.startswith("metaworld."):
            return spec
    return None
