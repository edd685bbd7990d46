"""Faster copies of ``SawyerXYZEnv``'s per-step methods, computing the same bits.

Each function here replaces the base-class method of the same name in a fast
subclass (see ``classes.py``), and only where the task class inherits the base
method unchanged. What they save, per step:

* name lookups (``data.body("hand")``, ``data.site(...)``): the views of
  ``data.xpos``/``data.site_xpos`` rows are looked up once per env (they are
  views of the same memory, so what callers see and mutate is unchanged);
* ``touching_object``'s Python loop over ``data.contact`` objects: masks over
  the contact arrays, with the forces summed in the same order by ``sum``;
* ``np.hstack``/``np.split`` in the observation, ``np.linalg.norm``'s
  argument handling, and the 0-d arrays of ``reward_utils.tolerance``.

Every expression keeps Meta-World's operand types (NumPy float64 where it has
them, float32 where the action brings them in), because float32 and float64
mix differently with Python floats. ``tests/envs/test_metaworld_fast.py`` checks the
result against Meta-World's own env on every v3 class.
"""

from __future__ import annotations

import copy
from typing import Any

import mujoco
import numpy as np
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from metaworld.sawyer_xyz_env import SawyerXYZEnv
from metaworld.utils.reward_utils import hamacher_product

from maml_rl.envs.metaworld_fast.numpy_norm import norm as _norm
from maml_rl.envs.metaworld_fast.reward_utils import tolerance

__all__ = ["FAST_METHODS", "pads_touch", "simulates_directly"]

# np.clip(a, lo, hi, **kw) is this ufunc behind three Python calls.
_clip = getattr(getattr(np, "_core", None), "umath", None)
_clip = getattr(_clip, "clip", None) or np.clip
_MOCAP_QUAT = np.array([1, 0, 1, 0])
_XZ = np.array([0, 2])
_ZEROS = np.zeros(64)
_NO_INFO_ON_EXCEPTION = {
    "success": False, "near_object": 0.0, "grasp_success": False, "grasp_reward": 0.0,
    "in_place_reward": 0.0, "obj_to_target": 0.0, "unscaled_reward": 0.0,
}


class _Views:
    """Rows of ``data``'s arrays by name, looked up once."""

    __slots__ = ("data", "body", "site", "geom_ids")

    def __init__(self, data):
        self.data = data
        self.body: dict[str, np.ndarray] = {}  # name -> data.body(name).xpos
        self.site: dict[str, np.ndarray] = {}  # name -> data.site(name).xpos
        self.geom_ids: dict[str, int] = {}


def _views(env) -> _Views:
    views = env.__dict__.get("_fast_views")
    if views is None or views.data is not env.data:  # a new MjData: look up again
        views = env.__dict__["_fast_views"] = _Views(env.data)
    return views


def _xpos(env, kind: str, name: str) -> np.ndarray:
    """``env.data.body(name).xpos`` (``kind="body"``) or ``env.data.site(name).xpos``, looked up once."""
    rows = getattr(_views(env), kind)
    xpos = rows.get(name)
    if xpos is None:
        xpos = rows[name] = getattr(env.data, kind)(name).xpos
    return xpos


def _body_xpos(env, name: str) -> np.ndarray:
    return _xpos(env, "body", name)


def _site_xpos(env, name: str) -> np.ndarray:
    return _xpos(env, "site", name)


def _geom_id(env, name: str) -> int:
    views = _views(env)
    gid = views.geom_ids.get(name)
    if gid is None:
        gid = views.geom_ids[name] = env.data.geom(name).id
    return gid


# -- positions ----------------------------------------------------------------

def get_body_com(self, body_name):
    return _body_xpos(self, body_name)


def get_endeff_pos(self):
    return _body_xpos(self, "hand")


def _tcp_center(self):
    return (_site_xpos(self, "rightEndEffector") + _site_xpos(self, "leftEndEffector")) / 2.0


def _get_site_pos(self, site_name):
    return _site_xpos(self, site_name).copy()


def _set_pos_site(self, name, pos):
    assert isinstance(pos, np.ndarray)
    assert pos.ndim == 1
    _site_xpos(self, name)[:] = pos[:3]


# -- observation ----------------------------------------------------------------

def _get_curr_obs_combined_no_goal(self):
    pos_hand = self.get_endeff_pos()
    gripper = _norm(_body_xpos(self, "rightclaw") - _body_xpos(self, "leftclaw")) / 0.1
    # np.clip(gripper, 0.0, 1.0) on a scalar (NaN stays NaN).
    if gripper < 0.0:
        gripper = 0.0
    elif gripper > 1.0:
        gripper = 1.0
    obj_pos = self._get_pos_objects()
    assert len(obj_pos) % 3 == 0
    obj_quat = self._get_quat_objects()
    assert len(obj_quat) % 4 == 0
    n = len(obj_pos) // 3
    if n == 0 or n != len(obj_quat) // 4 or 7 * n > self._obs_obj_max_len:
        return SawyerXYZEnv._get_curr_obs_combined_no_goal(self)  # Meta-World's own error or result
    # (pos, quat) of each object, as np.split + np.hstack lay them out, then zeros: written into
    # float64 zeros by Meta-World, concatenated here (every part is converted to float64 alike).
    parts = [pos_hand, (gripper,)]
    for i in range(n):
        parts += (obj_pos[3 * i: 3 * i + 3], obj_quat[4 * i: 4 * i + 4])
    parts.append(_ZEROS[: self._obs_obj_max_len - 7 * n])
    return np.concatenate(parts, dtype=np.float64)


def _get_obs(self):
    pos_goal = self._get_pos_goal()
    if self._partially_observable:
        pos_goal = np.zeros(pos_goal.shape, pos_goal.dtype) if type(pos_goal) is np.ndarray else np.zeros_like(pos_goal)
    curr_obs = self._get_curr_obs_combined_no_goal()
    obs = np.concatenate((curr_obs, self._prev_obs, pos_goal))
    self._prev_obs = curr_obs
    return obs


# -- contacts and the grasp reward ------------------------------------------------

def pads_touch(data, object_geom_id: int, leftpad: int, rightpad: int) -> bool:
    """Meta-World's ``touching_object`` of ``data``'s contacts: both pads push on the object."""
    contact = data.contact
    geom1, geom2 = contact.geom1, contact.geom2
    on_object = (geom1 == object_geom_id) | (geom2 == object_geom_id)
    address = contact.efc_address
    force = data.efc_force
    # sum() from 0 over the contacts in order, as Meta-World's generator does.
    left = sum(force[address[on_object & ((geom1 == leftpad) | (geom2 == leftpad))]])
    right = sum(force[address[on_object & ((geom1 == rightpad) | (geom2 == rightpad))]])
    return 0 < left and 0 < right


def touching_object(self, object_geom_id):
    return pads_touch(self.data, object_geom_id, _geom_id(self, "leftpad_geom"), _geom_id(self, "rightpad_geom"))


def _touching_main_object(self):
    return self.touching_object(self._get_id_main_object())


def _gripper_caging_reward(self, action, obj_pos, obj_radius, pad_success_thresh, object_reach_radius, xz_thresh,
                           desired_gripper_effort=1.0, high_density=False, medium_density=False):
    assert self.obj_init_pos is not None, "`obj_init_pos` must be initialized before calling this function."
    if high_density and medium_density:
        raise ValueError("Can only be either high_density or medium_density")
    left_y = self.get_body_com("leftpad")[1]
    right_y = self.get_body_com("rightpad")[1]
    # Meta-World takes these in a float64 array [left, right]: the same operations element by element.
    obj_y = np.float64(obj_pos[1])
    init_y = np.float64(self.obj_init_pos[1])
    margin_left = abs(abs(left_y - init_y) - pad_success_thresh)
    margin_right = abs(abs(right_y - init_y) - pad_success_thresh)
    caging_y = hamacher_product(
        tolerance(abs(left_y - obj_y), bounds=(obj_radius, pad_success_thresh), margin=margin_left,
                  sigmoid="long_tail"),
        tolerance(abs(right_y - obj_y), bounds=(obj_radius, pad_success_thresh), margin=margin_right,
                  sigmoid="long_tail"))
    tcp = self.tcp_center
    caging_xz_margin = _norm(self.obj_init_pos[_XZ] - self.init_tcp[_XZ])
    caging_xz_margin -= xz_thresh
    caging_xz = tolerance(_norm(tcp[_XZ] - obj_pos[_XZ]), bounds=(0, xz_thresh), margin=caging_xz_margin,
                          sigmoid="long_tail")
    gripper_closed = min(max(0, action[-1]), desired_gripper_effort) / desired_gripper_effort
    caging = hamacher_product(caging_y, float(caging_xz))
    gripping = gripper_closed if caging > 0.97 else 0.0
    caging_and_gripping = hamacher_product(caging, gripping)
    if high_density:
        caging_and_gripping = (caging_and_gripping + caging) / 2
    if medium_density:
        tcp = self.tcp_center
        tcp_to_obj = _norm(obj_pos - tcp)
        tcp_to_obj_init = _norm(self.obj_init_pos - self.init_tcp)
        reach_margin = abs(tcp_to_obj_init - object_reach_radius)
        reach = tolerance(tcp_to_obj, bounds=(0, object_reach_radius), margin=reach_margin, sigmoid="long_tail")
        caging_and_gripping = (caging_and_gripping + float(reach)) / 2
    return caging_and_gripping


# -- construction -------------------------------------------------------------------

_MODELS: dict[str, mujoco.MjModel] = {}


def _initialize_simulation(self):
    """gymnasium's ``MujocoEnv._initialize_simulation`` with the compiled model copied (``mj_copyModel``)
    from one compiled per process and file: ML10/ML45 slots build an env whenever their class changes,
    and compiling Meta-World's XML takes 30-50 ms of the 35-55 ms an env takes to build."""
    template = _MODELS.get(self.fullpath)
    if template is None:
        template = _MODELS[self.fullpath] = mujoco.MjModel.from_xml_path(self.fullpath)
    model = copy.copy(template)
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
    return model, mujoco.MjData(model)


# -- the step ----------------------------------------------------------------------

def set_xyz_action(self, action):
    action = _clip(action, -1, 1)
    pos_delta = action * self.action_scale
    data = self.data
    new_mocap_pos = data.mocap_pos + pos_delta[None]
    row = new_mocap_pos[0]
    _clip(row, self.mocap_low, self.mocap_high, out=row)
    data.mocap_pos = new_mocap_pos
    data.mocap_quat = _MOCAP_QUAT


def simulates_directly(cls: type) -> bool:
    """Whether ``cls`` steps MuJoCo as gymnasium's ``MujocoEnv`` does (then ``_simulate`` may inline it)."""
    return (cls.do_simulation is MujocoEnv.do_simulation
            and cls._step_mujoco_simulation is MujocoEnv._step_mujoco_simulation)


def _simulate(self, grip) -> None:
    """``self.do_simulation([grip, -grip], n_frames=self.frame_skip)``."""
    if not self._fast_simulates_directly or self.model.nu != 2:
        self.do_simulation([grip, -grip], n_frames=self.frame_skip)
        return
    self.data.ctrl[:] = [grip, -grip]
    mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
    mujoco.mj_rnePostConstraint(self.model, self.data)


def step(self, action):
    if not self._set_task_called:
        raise RuntimeError("You must call env.set_task before using env.step")
    assert len(action) == 4, f"Actions should be size 4, got {len(action)}"
    self.set_xyz_action(action[:3])
    if self.curr_path_length >= self.max_path_length:
        raise ValueError("You must reset the env manually once truncate==True")
    _simulate(self, action[-1])
    self.curr_path_length += 1
    for site in self._target_site_config:
        self._set_pos_site(*site)
    if self._did_see_sim_exception:
        assert self._last_stable_obs is not None
        return self._last_stable_obs, 0.0, False, False, dict(_NO_INFO_ON_EXCEPTION)
    mujoco.mj_forward(self.model, self.data)
    space = self.sawyer_observation_space
    obs = _clip(self._get_obs(), space.low, space.high, dtype=np.float64)
    self._last_stable_obs = obs
    reward, info = self.evaluate_state(obs, action)
    return np.array(obs, dtype=np.float64), reward, False, self.curr_path_length == self.max_path_length, info


#: name -> replacement; a property where the base class has one.
FAST_METHODS: dict[str, Any] = {
    "get_body_com": get_body_com,
    "get_endeff_pos": get_endeff_pos,
    "tcp_center": property(_tcp_center, doc=SawyerXYZEnv.tcp_center.__doc__),
    "_get_site_pos": _get_site_pos,
    "_set_pos_site": _set_pos_site,
    "_get_curr_obs_combined_no_goal": _get_curr_obs_combined_no_goal,
    "_get_obs": _get_obs,
    "touching_object": touching_object,
    "touching_main_object": property(_touching_main_object, doc=SawyerXYZEnv.touching_main_object.__doc__),
    "_gripper_caging_reward": _gripper_caging_reward,
    "set_xyz_action": set_xyz_action,
    "step": step,
    "_initialize_simulation": _initialize_simulation,
}
