"""Meta-World envs of one task class stepped together, with Meta-World's bits (ML1's reach, push and pick-place).

The fast classes (``classes.py``) still pay Python once per env per step. Here the envs of one class pay
it once per *class*: ``BatchedSawyer(envs)`` advances ``n`` envs of one class in one ``mujoco.batch``
call per step (the physics, with the ``mj_forward`` Meta-World runs after it) and computes their
observations, rewards and infos as array arithmetic over the ``n`` envs. Each env's results equal
Meta-World's own ``env.step``, bit for bit (``tests/envs/test_metaworld_batched.py``), because every
expression keeps Meta-World's elementwise operations, operand types and order. Kept per env, where no
batched form gives the same bits:

* the rows whose reward or info a class's array form cannot give exactly (push, pick-place: where the gripper grips
  the object, Meta-World's arithmetic turns float32 with the action; where ``grasp_success`` needs the
  contacts): there the env's own ``evaluate_state`` runs, on its state synced from the batch;
* nothing else. Two expressions needed care: ``np.linalg.norm`` of a 3-vector is BLAS's ``ddot`` (a
  chain of fused multiply-adds, not ``(x * x).sum()``), which ``np.vecdot`` computes row by row with the
  same kernel (an import-time check falls back to one ``dot`` per row if the installed NumPy differs);
  and the scalar ``(d * scale) ** 2`` is C's ``pow``, which ``np.float_power`` computes, where an
  array's ``** 2`` is ``x * x``.

Resets stay each env's own: before one, the env's ``MjData`` and step counters are given its
simulation's state (so ``env.reset()`` runs exactly as after Meta-World's own steps); after it,
:meth:`BatchedSawyer.load` copies the whole integration state (warm start and mocap included) back.

Only the classes in :data:`SPECS` are batched; the others keep the per-env fast path. Not yet used by
the sampler: this is the stepping core, measured by ``benchmarks/metaworld_throughput.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Sequence, Tuple

import mujoco
import numpy as np

from maml_rl.envs.metaworld_fast.rotation import quats_from_matrices

try:
    from mujoco import batch as mujoco_batch
except ImportError:  # MuJoCo < 4.0
    mujoco_batch = None

__all__ = ["BatchedSawyer", "SPECS", "batched_spec", "norms"]

# MjData's integration state (mjSTATE_INTEGRATION): what a simulation continues from.
_STATE = ("time", "qpos", "qvel", "act", "history", "qacc_warmstart", "ctrl", "qfrc_applied", "xfrc_applied",
          "eq_active", "mocap_pos", "mocap_quat", "userdata", "plugin_state", "plastic")
_MOCAP_QUAT = np.array([1, 0, 1, 0])
_XZ = np.array([0, 2])


def _vecdot_is_ddot() -> bool:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 3)) * rng.uniform(1e-6, 1e3, size=(4096, 1))
    return np.vecdot(x, x).tobytes() == np.array([row.dot(row) for row in x]).tobytes()


_VECDOT_EXACT = hasattr(np, "vecdot") and _vecdot_is_ddot()


def norms(x: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(row)`` of each float64 row of ``x`` (n, k), bit for bit: ``sqrt(row.dot(row))``."""
    squares = np.vecdot(x, x) if _VECDOT_EXACT else np.array([row.dot(row) for row in x])
    return np.sqrt(squares)


def long_tail(x: np.ndarray, lower: float, upper: float, margin: np.ndarray) -> np.ndarray:
    """``reward_utils.tolerance(x_i, bounds=(lower, upper), margin=margin_i, sigmoid="long_tail")`` of each
    float64 ``x_i``, as the scalar ``reward_utils.tolerance`` computes it (value_at_margin 0.1)."""
    inside = (lower <= x) & (x <= upper)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(x < lower, lower - x, x - upper) / margin
        # float_power: C's pow, as the scalar's np.float64 ** 2 (an array's ** 2 is x * x, which differs
        # from pow in the last bit about once in a thousand).
        value = 1 / (np.float_power(d * _LONG_TAIL_SCALE, 2) + 1)
    return np.where(inside, 1.0, np.where(margin == 0, 0.0, value))


_LONG_TAIL_SCALE = np.sqrt(1 / 0.1 - 1)  # reward_utils._sigmoids' scale for long_tail at value_at_1 = 0.1


@dataclass(frozen=True)
class ClassSpec:
    """What a batched class reads: its objects' bodies (positions) and geoms (quaternions), and its reward."""

    objects: Tuple[str, ...]  # bodies whose xpos are the object positions, in order
    quats: Tuple[str, ...]  # geoms whose xmat give the object quaternions, in order
    outputs: Callable[["BatchedSawyer", np.ndarray, np.ndarray], Tuple[np.ndarray, Dict[str, np.ndarray]]]


def _reach_outputs(batch: "BatchedSawyer", observations: np.ndarray, actions: np.ndarray):
    """``SawyerReachEnvV3.evaluate_state`` (reward_function_version "v2") of every env."""
    tcp = batch.tcp_center()
    target = batch.target
    tcp_to_target = norms(tcp - target)
    in_place_margin = norms(batch.hand_init - target)
    in_place = long_tail(tcp_to_target, 0, 0.05, in_place_margin)
    reward = 10 * in_place
    success = (tcp_to_target <= 0.05).astype(np.float64)
    infos = {"success": success, "near_object": tcp_to_target, "grasp_success": np.ones(len(target)),
             "grasp_reward": tcp_to_target, "in_place_reward": in_place, "obj_to_target": tcp_to_target,
             "unscaled_reward": reward}
    return reward, infos


def hamacher(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``reward_utils.hamacher_product(a_i, b_i)`` of float64 values in [0, 1] (its 0 where the denominator is 0)."""
    product = a * b
    denominator = a + b - product
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, product / denominator, 0.0)


def caging_reward(batch: "BatchedSawyer", actions: np.ndarray, obj: np.ndarray, obj_radius: float,
                  pad_success_thresh: float, xz_thresh: float, high_density: bool) -> Tuple[np.ndarray, np.ndarray]:
    """``_gripper_caging_reward`` of every env (without medium density), and the rows it cannot give exactly:
    where the gripper grips (``caging > 0.97`` and ``0 < action[3] <= 1``), Meta-World mixes the action's
    float32 into the rest, which then runs in float32; and where a margin is negative (its ValueError)."""
    left_y = batch.xpos[:, batch.left_pad, 1]
    right_y = batch.xpos[:, batch.right_pad, 1]
    obj_y, init_y = obj[:, 1], batch.obj_init[:, 1]
    margin_left = np.abs(np.abs(left_y - init_y) - pad_success_thresh)
    margin_right = np.abs(np.abs(right_y - init_y) - pad_success_thresh)
    caging_y = hamacher(long_tail(np.abs(left_y - obj_y), obj_radius, pad_success_thresh, margin_left),
                        long_tail(np.abs(right_y - obj_y), obj_radius, pad_success_thresh, margin_right))
    tcp = batch.tcp_center()
    caging_xz_margin = norms(batch.obj_init[:, _XZ] - batch.init_tcp[:, _XZ]) - xz_thresh
    caging_xz = long_tail(norms(tcp[:, _XZ] - obj[:, _XZ]), 0, xz_thresh, caging_xz_margin)
    caging = hamacher(caging_y, caging_xz)
    grip = actions[:, -1]
    gripping = (caging > 0.97) & (grip > 0)
    rare = (gripping & (grip <= 1)) | (caging_xz_margin < 0)
    # Elsewhere the gripper effort is 1.0 (an action above 1) or nothing: float64 throughout.
    caging_and_gripping = hamacher(caging, np.where(gripping, 1.0, 0.0))
    if high_density:
        caging_and_gripping = (caging_and_gripping + caging) / 2
    return caging_and_gripping, rare


def _grasp_infos(success: np.ndarray, tcp_to_obj: np.ndarray, grasp_reward: np.ndarray, in_place: np.ndarray,
                 obj_to_target: np.ndarray, reward: np.ndarray) -> Dict[str, np.ndarray]:
    """A grasping class's infos in Meta-World's order. ``grasp_success`` (touching_main_object and the gripper
    open and the object lifted) is False here: the rows where the object is lifted are evaluated by the env."""
    return {"success": success.astype(np.float64), "near_object": (tcp_to_obj <= 0.03).astype(np.float64),
            "grasp_success": np.zeros(len(reward)), "grasp_reward": grasp_reward, "in_place_reward": in_place,
            "obj_to_target": obj_to_target, "unscaled_reward": reward}


def _push_outputs(batch: "BatchedSawyer", observations: np.ndarray, actions: np.ndarray):
    """``SawyerPushEnvV3.evaluate_state`` (v2 rewards) of every env; the rows :func:`caging_reward` cannot give,
    and those whose ``grasp_success`` needs the contacts (the gripper open and the object lifted), by the
    env's own ``evaluate_state`` on its synced state."""
    radius = batch.envs[0].TARGET_RADIUS
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    tcp_to_obj = norms(obj - batch.tcp_center())
    target_to_obj = norms(obj - batch.target)
    target_to_obj_init = norms(batch.obj_init - batch.target)
    in_place = long_tail(target_to_obj, 0, radius, target_to_obj_init)
    object_grasped, rare = caging_reward(batch, actions, obj, obj_radius=0.015, pad_success_thresh=0.05,
                                         xz_thresh=0.005, high_density=True)
    reward = 2 * object_grasped
    reward = np.where((tcp_to_obj < 0.02) & (tcp_opened > 0), reward + (1.0 + reward + 5.0 * in_place), reward)
    reward = np.where(target_to_obj < radius, 10.0, reward)
    lifted = (tcp_opened > 0) & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(target_to_obj <= radius, tcp_to_obj, object_grasped, in_place, target_to_obj, reward)
    batch.evaluate_rows(np.flatnonzero(rare | lifted), observations, actions, reward, infos)
    return reward, infos


def _xz(v: np.ndarray) -> np.ndarray:
    """``v + np.array([0.0, -v[1], 0.0])`` of each row: its y set to ``v[1] + -v[1]``."""
    out = v.copy()
    out[:, 1] = v[:, 1] + -v[:, 1]
    return out


def _pick_place_outputs(batch: "BatchedSawyer", observations: np.ndarray, actions: np.ndarray):
    """``SawyerPickPlaceEnvV3.evaluate_state`` (v2 rewards, its own ``_gripper_caging_reward``) of every env;
    the rows where the gripper grips (float32 from the action, as for push) or the object is lifted (the
    contacts, for ``grasp_success``) by the env's own ``evaluate_state`` on its synced state."""
    obj, tcp_opened = observations[:, 4:7], observations[:, 3]
    tcp = batch.tcp_center()
    obj_to_target = norms(obj - batch.target)
    tcp_to_obj = norms(obj - tcp)
    in_place = long_tail(obj_to_target, 0, 0.05, norms(batch.obj_init - batch.target))
    # _gripper_caging_reward of SawyerPickPlaceEnvV3.
    pad_margin, xz_margin, obj_radius = 0.05, 0.005, 0.015
    left_pad, right_pad = batch.xpos[:, batch.left_pad], batch.xpos[:, batch.right_pad]
    # init_left_pad and init_right_pad are get_body_com's views of data.xpos: the pads where they are now.
    right_caging_margin = np.abs(np.abs(obj[:, 1] - right_pad[:, 1]) - pad_margin)
    left_caging_margin = np.abs(np.abs(obj[:, 1] - left_pad[:, 1]) - pad_margin)
    right_caging = long_tail(obj[:, 1] - right_pad[:, 1], obj_radius, pad_margin, right_caging_margin)
    left_caging = long_tail(left_pad[:, 1] - obj[:, 1], obj_radius, pad_margin, left_caging_margin)
    y_caging = hamacher(left_caging, right_caging)
    tcp_obj_norm_x_z = norms(_xz(tcp) - _xz(obj))
    tcp_obj_x_z_margin = norms(_xz(batch.obj_init) - _xz(batch.init_tcp)) - xz_margin
    x_z_caging = long_tail(tcp_obj_norm_x_z, 0, xz_margin, tcp_obj_x_z_margin)
    caging = hamacher(y_caging, x_z_caging)
    grip = actions[:, -1]
    gripping = (caging > 0.97) & (grip > 0)
    rare = (gripping & (grip <= 1)) | (tcp_obj_x_z_margin < 0)
    # Elsewhere min(max(0, grip), 1) is the int 1 or 0: float64 throughout.
    object_grasped = (hamacher(caging, np.where(gripping, 1.0, 0.0)) + caging) / 2
    reward = hamacher(object_grasped, in_place)
    lifted = tcp_opened > 0
    reward = np.where((tcp_to_obj < 0.02) & lifted & (obj[:, 2] - 0.01 > batch.obj_init[:, 2]),
                      reward + (1.0 + 5.0 * in_place), reward)
    reward = np.where(obj_to_target < 0.05, 10.0, reward)
    grasped = lifted & (obj[:, 2] - 0.02 > batch.obj_init[:, 2])
    infos = _grasp_infos(obj_to_target <= 0.07, tcp_to_obj, object_grasped, in_place, obj_to_target, reward)
    batch.evaluate_rows(np.flatnonzero(rare | grasped), observations, actions, reward, infos)
    return reward, infos


#: Meta-World class name -> how to batch it.
SPECS: Dict[str, ClassSpec] = {
    "SawyerReachEnvV3": ClassSpec(objects=("obj",), quats=("objGeom",), outputs=_reach_outputs),
    "SawyerPushEnvV3": ClassSpec(objects=("obj",), quats=("objGeom",), outputs=_push_outputs),
    "SawyerPickPlaceEnvV3": ClassSpec(objects=("obj",), quats=("objGeom",), outputs=_pick_place_outputs),
}


def batched_spec(env: Any) -> ClassSpec | None:
    """The spec of ``env``'s Meta-World class (a fast subclass counts as its class), or ``None``."""
    for cls in type(env).__mro__:
        spec = SPECS.get(cls.__name__)
        if spec is not None and cls.__module__.startswith("metaworld."):
            return spec
    return None


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
        self.batch = mujoco_batch.Batch(model, n, nthread=nthread)
        self.state = {}
        for name in _STATE:
            rows = self.batch.bind(name)
            if rows[0].size:
                self.state[name] = rows
        self.xpos, self.site_xpos = self.batch.bind("xpos"), self.batch.bind("site_xpos")
        self.geom_xmat = self.batch.bind("geom_xmat")
        body, site, geom = (lambda k: model.body(k).id), (lambda k: model.site(k).id), (lambda k: model.geom(k).id)
        self.hand, self.right_claw, self.left_claw = body("hand"), body("rightclaw"), body("leftclaw")
        self.right_effector, self.left_effector = site("rightEndEffector"), site("leftEndEffector")
        self.left_pad, self.right_pad = body("leftpad"), body("rightpad")
        self.objects = [body(k) for k in self.spec.objects]
        self.quats = [geom(k) for k in self.spec.quats]
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

    def load(self, i: int) -> None:
        """Env ``i`` was just reset: copy its state into simulation ``i``."""
        env = self.envs[i]
        data = env.data
        for name, rows in self.state.items():
            rows[i] = getattr(data, name)
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
            rewards[i] = reward
            for key, value in info.items():
                infos[key][i] = value

    def tcp_center(self) -> np.ndarray:
        """``SawyerXYZEnv.tcp_center`` of every env."""
        return (self.site_xpos[:, self.right_effector] + self.site_xpos[:, self.left_effector]) / 2.0

    def step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Dict[str, np.ndarray]]:
        """``env.step(actions[i])`` of every env: observations (n, 39), rewards (n,), truncations (n,) and
        the infos, each key an (n,) float64 array."""
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
        current = self._current_observations()
        goal = np.where(self.goal_visible[:, None], self.target, 0.0)
        observations = np.concatenate((current, self.prev_obs, goal), axis=1)
        self.prev_obs = current
        np.clip(observations, self.obs_low, self.obs_high, out=observations)
        rewards, infos = self.spec.outputs(self, observations, actions)
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
        for body, geom in zip(self.objects, self.quats):
            current[:, column:column + 3] = self.xpos[:, body]
            current[:, column + 3:column + 7] = quats_from_matrices(self.geom_xmat[:, geom])
            column += 7
        return current
