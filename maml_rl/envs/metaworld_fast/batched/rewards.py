"""The batched classes, all 50 of Meta-World's: what each reads and how its ``evaluate_state`` runs as arrays
(see ``sawyer.py``).

A class's outputs function (``outputs(batch, observations, actions)``, ``batch`` the ``BatchedSawyer``, not
imported here: it imports this registry) gives every env's reward and infos, bit for bit Meta-World's own
``evaluate_state``. By module: ``articulated.py``: reach, button-press-topdown, drawers, windows, doors, lever;
``buttons.py``: the other buttons; ``handles.py``; ``faucets.py``; ``locks.py``: the door locks; ``dials.py``;
``plates.py``: the plate slides; ``boxes.py``: box-close; ``grasping.py``: the classes that grasp or push an
object, with the rows their arrays cannot give; ``pushing.py``: push-back and soccer; ``walls.py``: push-wall and
pick-place-wall; ``holes.py``; ``bins.py``: bin-picking; ``sticks.py``; ``tools.py``: hammer, assembly and
disassemble.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from .articulated import (button_press_topdown_outputs, door_close_outputs, door_open_outputs, drawer_close_outputs,
                          drawer_open_outputs, lever_pull_outputs, reach_outputs, window_outputs)
from .bins import bin_picking_outputs
from .boxes import box_close_outputs
from .buttons import button_press_outputs, button_press_topdown_wall_outputs, button_press_wall_outputs
from .dials import dial_knob, dial_turn_outputs
from .faucets import faucet_outputs
from .grasping import (basketball_outputs, coffee_outputs, peg_insert_side_outputs, pick_place_outputs, push_outputs,
                       shelf_place_outputs, sweep_outputs)
from .handles import handle_press_outputs, handle_pull_outputs
from .holes import hand_insert_outputs, peg_unplug_side_outputs, pick_out_of_hole_outputs
from .locks import door_lock_outputs, door_unlock_outputs
from .plates import plate_slide_outputs
from .pushing import push_back_outputs, soccer_outputs
from .sticks import stick_pull_outputs, stick_push_outputs
from .tools import assembly_outputs, disassemble_outputs, hammer_outputs
from .walls import pick_place_wall_outputs, push_wall_outputs

__all__ = ["ClassSpec", "ObjectSpec", "SPECS", "batched_spec"]


@dataclass(frozen=True)
class ObjectSpec:
    """One object of the observation: its position (the class's ``_get_pos_objects``), a body's ``xpos``
    (``("body", name)``), a site's (``("site", name)``) or a geom's (``("geom", name)``), plus ``offset`` if
    any; and its quaternion, from ``("geom", name)``, ``("site", name)`` or ``("body_xmat", name)``: Markley's
    conversion of the geom's, the site's or the body's ``xmat``; ``("body", name)``: the body's ``xquat``;
    ``("zeros", "")``; or ``("unit", "")``, the constant ``[1, 0, 0, 0]``."""

    position: Tuple[str, str] = ("body", "obj")
    offset: Optional[Tuple[float, float, float]] = None
    quat: Tuple[str, str] = ("geom", "objGeom")
    #: The position computed from the batch instead, where no body, site or geom holds it (dial-turn's knob).
    position_of: Optional[Callable[[Any], np.ndarray]] = None


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
_BUTTON = ObjectSpec(("body", "button"), (0.0, -0.193, 0.0), ("body", "button"))
_BUTTON_TOPDOWN = ObjectSpec(("body", "button"), (0.0, 0.0, 0.193), ("body", "button"))
_OBJ_GEOM = ObjectSpec(("geom", "objGeom"), None, ("geom", "objGeom"))
_OBJ_BODY = ObjectSpec(quat=("body", "obj"))
_MUG = ObjectSpec(("body", "obj"), None, ("geom", "mug"))
_STICK = ObjectSpec(("body", "stick"), None, ("body_xmat", "stick"))
_NUT = ObjectSpec(("site", "RoundNut-8"), None, ("body", "RoundNut"))
_PUCK = ObjectSpec(("geom", "puck"), None, ("geom", "puck"))
_HANDLE_START = ObjectSpec(("site", "handleStart"), None, ("zeros", ""))

#: Meta-World class name -> how to batch it.
SPECS: Dict[str, ClassSpec] = {
    "SawyerReachEnvV3": ClassSpec((ObjectSpec(),), reach_outputs),
    "SawyerPushEnvV3": ClassSpec((ObjectSpec(),), push_outputs),
    "SawyerPickPlaceEnvV3": ClassSpec((ObjectSpec(),), pick_place_outputs),
    "SawyerButtonPressTopdownEnvV3": ClassSpec((_BUTTON_TOPDOWN,), button_press_topdown_outputs,
                                               env_values=("_obj_to_target_init",)),
    "SawyerDrawerCloseEnvV3": ClassSpec((ObjectSpec(("body", "drawer_link"), (0.0, -0.16, 0.05), ("zeros", "")),),
                                        drawer_close_outputs),
    "SawyerDrawerOpenEnvV3": ClassSpec(
        (ObjectSpec(("body", "drawer_link"), (0.0, -0.16, 0.0), ("body", "drawer_link")),), drawer_open_outputs),
    "SawyerWindowOpenEnvV3": ClassSpec((ObjectSpec(("site", "handleOpenStart"), None, ("zeros", "")),),
                                       window_outputs, env_values=("window_handle_pos_init",)),
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
    # The other 35 (ML45's further classes, MT50's).
    "SawyerReachWallEnvV3": ClassSpec((ObjectSpec(),), functools.partial(reach_outputs, wall=True)),
    "SawyerWindowCloseEnvV3": ClassSpec((ObjectSpec(("site", "handleCloseStart"), None, ("zeros", "")),),
                                        functools.partial(window_outputs, closing=True),
                                        env_values=("window_handle_pos_init",)),
    "SawyerButtonPressEnvV3": ClassSpec((_BUTTON,), button_press_outputs, env_values=("_obj_to_target_init",)),
    "SawyerButtonPressWallEnvV3": ClassSpec((_BUTTON,), button_press_wall_outputs,
                                            env_values=("_obj_to_target_init",)),
    "SawyerButtonPressTopdownWallEnvV3": ClassSpec((_BUTTON_TOPDOWN,), button_press_topdown_wall_outputs,
                                                   env_values=("_obj_to_target_init",)),
    "SawyerCoffeeButtonEnvV3": ClassSpec((ObjectSpec(("site", "buttonStart"), None, ("unit", "")),),
                                         functools.partial(button_press_outputs, coffee=True)),
    "SawyerHandlePressEnvV3": ClassSpec((_HANDLE_START,), handle_press_outputs, env_values=("_handle_init_pos",)),
    "SawyerHandlePressSideEnvV3": ClassSpec((_HANDLE_START,), handle_press_outputs,
                                            env_values=("_handle_init_pos",)),
    "SawyerPlateSlideEnvV3": ClassSpec((_PUCK,), plate_slide_outputs),
    "SawyerPlateSlideSideEnvV3": ClassSpec((_PUCK,), functools.partial(plate_slide_outputs, variant="side")),
    "SawyerPlateSlideBackEnvV3": ClassSpec((_PUCK,), functools.partial(plate_slide_outputs, variant="back")),
    "SawyerPlateSlideBackSideEnvV3": ClassSpec((_PUCK,), functools.partial(plate_slide_outputs,
                                                                           variant="back-side")),
    "SawyerFaucetOpenEnvV3": ClassSpec(
        (ObjectSpec(("site", "handleStartOpen"), (0.0, 0.0, -0.01), ("body", "faucetBase")),),
        functools.partial(faucet_outputs, offset=(-0.04, 0.0, 0.03))),
    "SawyerFaucetCloseEnvV3": ClassSpec(
        (ObjectSpec(("site", "handleStartClose"), (0.0, 0.0, -0.01), ("body", "faucetBase")),), faucet_outputs),
    "SawyerDoorLockEnvV3": ClassSpec((ObjectSpec(("site", "lockStartLock"), None, ("body", "door_link")),),
                                     door_lock_outputs),
    "SawyerDoorUnlockEnvV3": ClassSpec((ObjectSpec(("site", "lockStartUnlock"), None, ("body", "door_link")),),
                                       door_unlock_outputs),
    "SawyerPushBackEnvV3": ClassSpec((_OBJ_GEOM,), push_back_outputs),
    "SawyerPushWallEnvV3": ClassSpec((_OBJ_GEOM,), push_wall_outputs),
    "SawyerPickPlaceWallEnvV3": ClassSpec((_OBJ_GEOM,), pick_place_wall_outputs),
    "SawyerHandlePullEnvV3": ClassSpec((ObjectSpec(("site", "handleRight"), None, ("zeros", "")),),
                                       handle_pull_outputs),
    "SawyerHandlePullSideEnvV3": ClassSpec((ObjectSpec(("site", "handleCenter"), None, ("zeros", "")),),
                                           functools.partial(handle_pull_outputs, side=True)),
    "SawyerCoffeePushEnvV3": ClassSpec((_MUG,), coffee_outputs, contacts=True),
    "SawyerCoffeePullEnvV3": ClassSpec((_MUG,), coffee_outputs, contacts=True),
    "SawyerHandInsertEnvV3": ClassSpec((_OBJ_BODY,), hand_insert_outputs),
    "SawyerPickOutOfHoleEnvV3": ClassSpec((_OBJ_BODY,), pick_out_of_hole_outputs),
    "SawyerBoxCloseEnvV3": ClassSpec((ObjectSpec(("body", "top_link"), None, ("body", "top_link")),),
                                     box_close_outputs),
    "SawyerPegUnplugSideEnvV3": ClassSpec((ObjectSpec(("site", "pegEnd"), None, ("body", "plug1")),),
                                          peg_unplug_side_outputs),
    "SawyerHammerEnvV3": ClassSpec((ObjectSpec(("body", "hammer"), None, ("body", "hammer")),
                                    ObjectSpec(("body", "nail_link"), None, ("body", "nail_link"))), hammer_outputs),
    "SawyerSoccerEnvV3": ClassSpec((ObjectSpec(("body", "soccer_ball"), None, ("body_xmat", "soccer_ball")),),
                                   soccer_outputs),
    "SawyerStickPushEnvV3": ClassSpec(
        (_STICK, ObjectSpec(("site", "insertion"), (0.0, 0.09, 0.0), ("zeros", ""))), stick_push_outputs,
        env_values=("stick_init_pos",)),
    "SawyerStickPullEnvV3": ClassSpec((_STICK, ObjectSpec(("site", "insertion"), None, ("zeros", ""))),
                                      stick_pull_outputs, env_values=("stick_init_pos",)),
    "SawyerNutAssemblyEnvV3": ClassSpec((_NUT,), assembly_outputs),
    "SawyerNutDisassembleEnvV3": ClassSpec((_NUT,), disassemble_outputs),
    "SawyerBinPickingEnvV3": ClassSpec((_OBJ_BODY,), bin_picking_outputs),
    "SawyerDialTurnEnvV3": ClassSpec((ObjectSpec(("body", "dial"), None, ("body", "dial"), position_of=dial_knob),),
                                     dial_turn_outputs, env_values=("dial_push_position",)),
}


def batched_spec(env: Any) -> ClassSpec | None:
    """The spec of ``env``'s Meta-World class (a fast subclass counts as its class), or ``None``."""
    for cls in type(env).__mro__:
        spec = SPECS.get(cls.__name__)
        if spec is not None and cls.__module__.startswith("metaworld."):
            return spec
    return None
