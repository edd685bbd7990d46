"""Meta-World envs of one task class stepped together, with Meta-World's bits (the classes of ``rewards.SPECS``).

The fast classes (``metaworld_fast/classes.py``) still pay Python once per env per step. Here the envs of
one class pay it once per *class*: ``BatchedSawyer(envs)`` advances ``n`` envs of one class in one
``mujoco.batch`` call per step (the physics, with the ``mj_forward`` Meta-World runs after it) and computes
their observations, rewards and infos as array arithmetic over the ``n`` envs (``arrays.py``,
``rewards.py``). Each env's results equal Meta-World's own ``env.step``, bit for bit
(``tests/envs/test_metaworld_batched.py``), because every expression keeps Meta-World's elementwise
operations, operand types and order. The rows a class's arrays cannot give exactly (``rewards.py`` says
which) go to the env's own ``evaluate_state``, on its state synced from the batch.

Resets stay each env's own: before one, the env's ``MjData`` and step counters are given its
simulation's state (so ``env.reset()`` runs exactly as after Meta-World's own steps); after it,
:meth:`BatchedSawyer.load` copies the whole integration state (warm start and mocap included) back.

Only the classes in ``SPECS`` are batched; the others keep the per-env fast path. The sampler's workers
use it through ``stepper.MetaWorldStepper`` (``MetaWorldEnv.batch_stepper``).
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Sequence, Tuple

import mujoco
import numpy as np

from maml_rl.envs.metaworld_fast.base import pads_touch
from maml_rl.envs.metaworld_fast.rotation import quats_from_matrices

from .arrays import norms
from .info_types import info_types
from .rewards import SPECS, batched_spec

try:
    from mujoco import batch as mujoco_batch
except ImportError:  # MuJoCo < 4.0
    mujoco_batch = None

__all__ = ["BatchedSawyer", "mujoco_batch"]

# MjData's integration state (mjSTATE_INTEGRATION): what a simulation continues from.
_STATE = ("time", "qpos", "qvel", "act", "history", "qacc_warmstart", "ctrl", "qfrc_applied", "xfrc_applied",
          "eq_active", "mocap_pos", "mocap_quat", "userdata", "plugin_state", "plastic")
_MOCAP_QUAT = np.array([1, 0, 1, 0])
_RESET_MODEL = ("body_pos", "site_pos")
# The MjData output an object's position or quaternion kind reads (rewards.ObjectSpec).
_POSITION_FIELDS = {"body": "xpos", "site": "site_xpos", "geom": "geom_xpos"}
_QUAT_FIELDS = {"geom": "geom_xmat", "site": "site_xmat", "body_xmat": "xmat", "body": "xquat"}


class BatchedSawyer:
    """``n`` Meta-World envs of one batched class, stepped together (see the module's docstring).

    :param envs: unwrapped Meta-World envs of one class in :data:`SPECS`, with their tasks set; each is
        loaded (:meth:`load`) after its first ``reset``.
    :param nthread: the ``mujoco.batch`` threads of the physics (this one included).
    """

    def __init__(self, envs: Sequence[Any], nthread: int = 1):
        if mujoco_batch is None:
            raise RuntimeError(f"mujoco {mujoco.__version__} has no mujoco.batch (it needs MuJoCo >= 4.0)")
        self.envs = list(envs)
        first = self.envs[0]
        self.spec = batched_spec(first)
        if self.spec is None:
            raise ValueError(f"{type(first).__name__} is not a batched class (batched: {', '.join(SPECS)})")
        for env in self.envs:
            if type(env) is not type(first):
                raise ValueError(f"the envs differ in class ({type(env).__name__}, {type(first).__name__}): one "
                                 "batch steps one class")
            if env.reward_function_version != "v2":
                raise ValueError("only the v2 rewards are batched")
        model = first.model
        if model.nmocap != 1 or model.nu != 2:
            raise ValueError("a Sawyer env has one mocap body and two actuators")
        n = len(self.envs)
        # A persistent batch keeps each simulation's whole MjData, contacts included (get_data, ~10 us a row).
        # Only where the outputs read contacts: its step costs 5-11% more than copying each state in and out
        # (20 envs of reach to the ML10 mix's 100; benchmarks/metaworld_persistent_batch.py), its ~0.5 MB of
        # MjData a simulation missing the caches.
        self.batch = mujoco_batch.Batch(model, n, nthread=nthread, persistent=self.spec.contacts)
        self.contact_data = mujoco.MjData(model) if self.spec.contacts else None
        self.state = {}
        for name in _STATE:
            rows = self.batch.bind(name)
            if rows[0].size:
                self.state[name] = rows
        # A bound output is copied out of every simulation after every step (geom_xmat: 72 bytes a geom, 2.7 KB
        # a reach env): only the bodies' and sites' positions (the hand, the pads, the fingers) and what the
        # objects read.
        self.xpos, self.site_xpos = self.batch.bind("xpos"), self.batch.bind("site_xpos")
        reads = {_POSITION_FIELDS[o.position[0]] for o in self.spec.objects if o.position_of is None}
        reads |= {_QUAT_FIELDS[o.quat[0]] for o in self.spec.objects if o.quat[0] in _QUAT_FIELDS}
        self.bound = {name: self.batch.bind(name) for name in sorted(reads)}
        self.model = model
        self._ids: Dict[Tuple[str, str], int] = {}  # (kind, name) -> id (see id)
        body, site, geom = (functools.partial(self.id, kind) for kind in ("body", "site", "geom"))
        self.hand, self.right_claw, self.left_claw = body("hand"), body("rightclaw"), body("leftclaw")
        self.right_effector, self.left_effector = site("rightEndEffector"), site("leftEndEffector")
        self.left_pad, self.right_pad = body("leftpad"), body("rightpad")
        self.pads = geom("leftpad_geom"), geom("rightpad_geom")
        ids = {"body": body, "site": site, "geom": geom, "body_xmat": body, "zeros": lambda name: -1,
               "unit": lambda name: -1}
        # (position's kind and id, offset, quaternion's kind and id, position function) of each object.
        self.objects = [(o.position[0], ids[o.position[0]](o.position[1]),
                         None if o.offset is None else np.array(o.offset), o.quat[0], ids[o.quat[0]](o.quat[1]),
                         o.position_of) for o in self.spec.objects]
        self.target_site = None if self.spec.target_site is None else site(self.spec.target_site)
        # The model fields Meta-World's resets move (a drawer's, a button box's body; a goal site), per env.
        self.model_rows = {name: self.batch.expand(name) for name in _RESET_MODEL}
        self.frame_skip = int(first.frame_skip)
        self.action_scale = first.action_scale
        self.obs_obj_max_len = first._obs_obj_max_len
        size = 4 + self.obs_obj_max_len
        # Each env's own values, read at load (they change with its task and reset).
        self.target = np.zeros((n, 3))
        self.hand_init = np.zeros((n, 3))
        self.obj_init, self.init_tcp = np.zeros((n, 3)), np.zeros((n, 3))
        self.mocap_low, self.mocap_high = np.zeros((n, 3)), np.zeros((n, 3))
        self.goal_visible = np.zeros(n, dtype=np.bool_)
        self.obs_low = np.zeros((n, 2 * size + 3))
        self.obs_high = np.zeros((n, 2 * size + 3))
        self.prev_obs = np.zeros((n, size))
        self.path_length = np.zeros(n, dtype=np.int64)
        self.max_path_length = np.zeros(n, dtype=np.int64)
        self.synced = np.ones(n, dtype=np.bool_)
        # observation column -> (the matrices of the last quaternions computed there, those quaternions)
        self.quat_memo: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        self.values: Dict[str, np.ndarray] = {}  # the spec's env_values, one row per env (made at the first load)
        # The info keys the current step's caller reads (None: all); see wants.
        self.info_keys: Optional[Sequence[str]] = None
        #: row -> the info its env's own evaluate_state returned at the last step (evaluate_rows' rows).
        self.own_infos: Dict[int, dict] = {}
        # The class's info keys and types, and the last step's exceptions to them (see typed).
        self.info_types = info_types(first)
        self.retyped: list = []

    def load(self, i: int) -> None:
        """Env ``i`` was just reset: copy its state into simulation ``i``."""
        env = self.envs[i]
        data = env.data
        for name, rows in self.state.items():
            rows[i] = getattr(data, name)
        for name, rows in self.model_rows.items():
            # Not followed by set_const: Meta-World moves these without mj_setConst, keeping compiled constants.
            rows[i] = getattr(env.model, name)
        for name in self.spec.env_values:
            value = getattr(env, name)
            if name not in self.values:
                self.values[name] = np.zeros((len(self.envs), *np.shape(value)))
            self.values[name][i] = value
        self.target[i] = env._target_pos
        self.hand_init[i] = env.hand_init_pos
        self.obj_init[i], self.init_tcp[i] = env.obj_init_pos, env.init_tcp
        self.mocap_low[i], self.mocap_high[i] = env.mocap_low, env.mocap_high
        self.goal_visible[i] = not env._partially_observable
        space = env.sawyer_observation_space
        self.obs_low[i], self.obs_high[i] = space.low, space.high
        self.prev_obs[i] = env._prev_obs
        self.path_length[i] = env.curr_path_length
        self.max_path_length[i] = env.max_path_length
        self.synced[i] = True

    def sync(self, i: int) -> None:
        """Give env ``i``'s own ``MjData`` and counters its simulation's state (before its ``reset``, or a
        call that reads it)."""
        if self.synced[i]:
            return
        env = self.envs[i]
        data = env.data
        for name, rows in self.state.items():
            if name == "time":
                data.time = float(rows[i])
            else:
                getattr(data, name)[:] = rows[i]
        mujoco.mj_forward(env.model, data)
        env.curr_path_length = int(self.path_length[i])
        env._prev_obs = self.prev_obs[i].copy()
        self.synced[i] = True

    def evaluate_rows(self, rows: np.ndarray, observations: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                      infos: Dict[str, np.ndarray]) -> None:
        """Set ``rewards`` and ``infos`` of ``rows`` from each env's own ``evaluate_state`` on its synced state
        (exact by construction; ~100 us a row)."""
        for i in rows:
            self.sync(i)
            reward, info = self.envs[i].evaluate_state(observations[i], actions[i])
            self.own_infos[int(i)] = info
            rewards[i] = reward
            for key, value in info.items():
                infos[key][i] = value

    def typed(self, key: str, rows: np.ndarray, kind: type) -> None:
        """At this step, info ``key`` of the rows where ``rows`` (a bool mask) is true is of type ``kind`` in
        Meta-World's own step (an outputs function says where a branch gives another type than the class's
        ``info_types``: an int 10, a float32 row)."""
        if rows.any():
            self.retyped.append((key, rows, kind))

    def row_info_types(self, i: int) -> Optional[Tuple[Tuple[str, type], ...]]:
        """The keys and value types of env ``i``'s info at the last step, where it is not in ``own_infos``."""
        types = self.info_types
        for key, rows, kind in self.retyped:
            if rows[i]:
                types = tuple((k, kind if k == key else t) for k, t in types)
        return types

    def id(self, kind: str, name: str) -> int:
        """``model.<kind>(name).id`` (kind: body, site, geom or joint), looked up once: an outputs function
        asks at every step, and MuJoCo's name lookup costs ~1 us a call (a dict's ~0.1 us)."""
        key = (kind, name)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = getattr(self.model, kind)(name).id
        return found

    def wants(self, key: str) -> bool:
        """Whether the current step's caller reads info ``key``: an outputs function leaves out the costly
        part of an info nobody reads (``grasp_success``'s contact reads, ~44 us a row)."""
        return self.info_keys is None or key in self.info_keys

    def touching(self, rows: np.ndarray, geom: str) -> np.ndarray:
        """``env.touching_object(geom's id)`` of each env in ``rows``, from its simulation's contacts and
        constraint forces after the step (the class's spec asks for ``contacts``)."""
        data, (left, right) = self.contact_data, self.pads
        target = self.id("geom", geom)
        out = np.zeros(len(rows), dtype=np.bool_)
        for k, i in enumerate(rows):
            self.batch.get_data(int(i), data)
            out[k] = pads_touch(data, target, left, right)
        return out

    def joint_qpos(self, name: str) -> np.ndarray:
        """``data.joint(name).qpos.item()`` of every env (a hinge or slide joint's one coordinate)."""
        return self.state["qpos"][:, self.model.jnt_qposadr[self.id("joint", name)]]

    def tcp_center(self) -> np.ndarray:
        """``SawyerXYZEnv.tcp_center`` of every env."""
        return (self.site_xpos[:, self.right_effector] + self.site_xpos[:, self.left_effector]) / 2.0

    def step(self, actions: np.ndarray, info_keys: Optional[Sequence[str]] = None
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Dict[str, np.ndarray]]:
        """``env.step(actions[i])`` of every env: observations (n, 39), rewards (n,), truncations (n,) and
        the infos, each key an (n,) float64 array: every key of Meta-World's info, or only those of
        ``info_keys`` that it has (the others are then not computed where that saves time)."""
        actions = np.asarray(actions)
        if actions.shape != (len(self.envs), 4):
            raise ValueError(f"actions of shape {actions.shape}, expected ({len(self.envs)}, 4)")
        ended = np.flatnonzero(self.path_length >= self.max_path_length)
        if len(ended):
            raise ValueError(f"env(s) {ended.tolist()} reached max_path_length: reset them first (Meta-World's "
                             "'You must reset the env manually once truncate==True')")
        self.synced[:] = False
        # set_xyz_action: float32 deltas onto the float64 mocap position, clipped to the mocap box.
        delta = np.clip(actions[:, :3], -1, 1) * self.action_scale
        mocap = self.state["mocap_pos"]
        position = mocap[:, 0] + delta
        np.clip(position, self.mocap_low, self.mocap_high, out=position)
        mocap[:, 0] = position
        self.state["mocap_quat"][:, 0] = _MOCAP_QUAT
        grip = actions[:, 3]
        controls = self.state["ctrl"]
        controls[:, 0], controls[:, 1] = grip, -grip
        # mj_step x frame_skip, then Meta-World's mj_forward at the new state (mj_rnePostConstraint's
        # outputs are not read by the observation or the reward).
        self.batch.step(None, nstep=self.frame_skip, stage=mujoco.mjtStage.mjSTAGE_ACC)
        self.path_length += 1
        if self.target_site is not None:  # the env's _target_pos is a view of the site's xpos
            self.target = self.site_xpos[:, self.target_site].copy()
        current = self._current_observations()
        goal = np.where(self.goal_visible[:, None], self.target, 0.0)
        observations = np.concatenate((current, self.prev_obs, goal), axis=1)
        self.prev_obs = current
        np.clip(observations, self.obs_low, self.obs_high, out=observations)
        self.info_keys = info_keys
        self.own_infos, self.retyped = {}, []
        rewards, infos = self.spec.outputs(self, observations, actions)
        if info_keys is not None:  # a key not read may hold placeholders (wants)
            infos = {key: infos[key] for key in info_keys if key in infos}
        return observations, rewards, self.path_length == self.max_path_length, infos

    def _current_observations(self) -> np.ndarray:
        """``_get_curr_obs_combined_no_goal`` of every env: hand, gripper opening, objects' positions and
        quaternions, zeros."""
        n = len(self.envs)
        current = np.zeros((n, 4 + self.obs_obj_max_len))
        current[:, 0:3] = self.xpos[:, self.hand]
        gripper = norms(self.xpos[:, self.right_claw] - self.xpos[:, self.left_claw]) / 0.1
        current[:, 3] = np.clip(gripper, 0.0, 1.0)
        column = 4
        for where, index, offset, kind, source, position_of in self.objects:
            if position_of is not None:
                position = position_of(self)
            else:
                position = self.bound[_POSITION_FIELDS[where]][:, index]
            current[:, column:column + 3] = position if offset is None else position + offset
            if kind in ("geom", "site", "body_xmat"):
                current[:, column + 3:column + 7] = self._quats(column, self.bound[_QUAT_FIELDS[kind]][:, source])
            elif kind == "body":
                current[:, column + 3:column + 7] = self.bound["xquat"][:, source]
            elif kind == "unit":
                current[:, column + 3] = 1.0
            column += 7
        return current

    def _quats(self, column: int, matrices: np.ndarray) -> np.ndarray:
        """``quats_from_matrices(matrices)``, recomputed only for the rows whose matrix bits changed since the
        last step (an object at rest keeps its orientation's bits; a row costs ~7 us)."""
        memo = self.quat_memo.get(column)
        if memo is None:
            memo = self.quat_memo[column] = (np.full_like(matrices, np.nan), np.zeros((len(matrices), 4)))
        previous, quats = memo
        changed = np.flatnonzero((matrices.view(np.uint64) != previous.view(np.uint64)).any(axis=1))
        if len(changed) == len(matrices):  # all moved: no gathers
            quats[:] = quats_from_matrices(matrices)
            previous[:] = matrices
        elif len(changed):
            quats[changed] = quats_from_matrices(matrices[changed])
            previous[changed] = matrices[changed]
        return quats
