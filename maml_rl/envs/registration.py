"""Gymnasium registration of the maml_rl environments."""

from __future__ import annotations

import gymnasium

from maml_rl.envs.retired import RETIRED_ENV_IDS

__all__ = ["ENV_IDS", "METAWORLD_IDS", "METAWORLD_TASK_NAMES", "register_envs"]

_MUJOCO = "maml_rl.envs.mujoco"

# (id, entry point, default kwargs, max_episode_steps)
_ENV_SPECS: tuple[tuple[str, str, dict, int], ...] = (
    ("2DNavigation-v0", "maml_rl.envs.navigation:Navigation2DEnv", {}, 100),
    ("SparsePointRobot-v0", "maml_rl.envs.sparse_point:SparsePointEnv", {}, 20),
    *(
        (f"Bandit-K{k}-v0", "maml_rl.envs.bandit:BernoulliBanditEnv", {"k": k}, 1)
        for k in (5, 10, 50)
    ),
    *(
        (f"GaussianBandit-K{k}-v0", "maml_rl.envs.bandit:GaussianBanditEnv", {"k": k}, 1)
        for k in (5, 10, 50)
    ),
    (
        "TabularMDP-v0",
        "maml_rl.envs.mdp:TabularMDPEnv",
        {"num_states": 10, "num_actions": 5},
        10,
    ),
    ("HalfCheetahVel-v5", f"{_MUJOCO}.half_cheetah:HalfCheetahVelEnv", {}, 200),
    ("HalfCheetahDir-v5", f"{_MUJOCO}.half_cheetah:HalfCheetahDirEnv", {}, 200),
    ("AntVel-v5", f"{_MUJOCO}.ant:AntVelEnv", {}, 200),
    ("AntDir-v5", f"{_MUJOCO}.ant:AntDirEnv", {}, 200),
    ("AntPos-v5", f"{_MUJOCO}.ant:AntPosEnv", {}, 200),
)

#: Ids of all the environments registered by :mod:`maml_rl.envs` (Meta-World's aside).
ENV_IDS: tuple[str, ...] = tuple(spec[0] for spec in _ENV_SPECS)

#: Meta-World's 50 v3 task classes (``metaworld.env_dict.ALL_V3_ENVIRONMENTS``,
#: checked by the tests), listed here so that registering needs no Meta-World.
METAWORLD_TASK_NAMES: tuple[str, ...] = (
    "assembly-v3", "basketball-v3", "bin-picking-v3", "box-close-v3", "button-press-topdown-v3",
    "button-press-topdown-wall-v3", "button-press-v3", "button-press-wall-v3", "coffee-button-v3", "coffee-pull-v3",
    "coffee-push-v3", "dial-turn-v3", "disassemble-v3", "door-close-v3", "door-lock-v3", "door-open-v3",
    "door-unlock-v3", "hand-insert-v3", "drawer-close-v3", "drawer-open-v3", "faucet-open-v3", "faucet-close-v3",
    "hammer-v3", "handle-press-side-v3", "handle-press-v3", "handle-pull-side-v3", "handle-pull-v3",
    "lever-pull-v3", "pick-place-wall-v3", "pick-out-of-hole-v3", "pick-place-v3", "plate-slide-v3",
    "plate-slide-side-v3", "plate-slide-back-v3", "plate-slide-back-side-v3", "peg-insert-side-v3",
    "peg-unplug-side-v3", "soccer-v3", "stick-push-v3", "stick-pull-v3", "push-v3", "push-wall-v3",
    "push-back-v3", "reach-v3", "reach-wall-v3", "shelf-place-v3", "sweep-into-v3", "sweep-v3",
    "window-open-v3", "window-close-v3",
)

_METAWORLD = "maml_rl.envs.metaworld:MetaWorldEnv"
# Meta-World's envs end their episodes at 500 steps themselves (max_path_length).
_METAWORLD_SPECS: tuple[tuple[str, str, dict, int], ...] = (
    *((f"MetaWorld-ML1-{name}", _METAWORLD, {"benchmark": "ML1", "env_name": name}, 500)
      for name in METAWORLD_TASK_NAMES),
    ("MetaWorld-ML10-v3", _METAWORLD, {"benchmark": "ML10"}, 500),
    ("MetaWorld-ML45-v3", _METAWORLD, {"benchmark": "ML45"}, 500),
)

#: Ids of the Meta-World benchmarks (they need the ``metaworld`` extra to be built).
METAWORLD_IDS: tuple[str, ...] = tuple(spec[0] for spec in _METAWORLD_SPECS)


def register_envs() -> None:
    """Register every maml_rl environment with gymnasium (idempotent), and pytorch-maml-rl's retired ids
    (:mod:`maml_rl.envs.retired`: making one raises an error naming the env to use instead)."""
    for env_id in RETIRED_ENV_IDS:
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="maml_rl.envs.retired:refuse_retired",
                               kwargs={"env_id": env_id})
    for env_id, entry_point, kwargs, max_episode_steps in _ENV_SPECS + _METAWORLD_SPECS:
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point=entry_point,
            vector_entry_point=VectorEntryPoint(env_id),
            kwargs=dict(kwargs),
            max_episode_steps=max_episode_steps,
        )


class VectorEntryPoint:
    """The ``vector_entry_point`` of a registered meta-env: ``gymnasium.make_vec(env_id, num_envs=N)``
    (whose default mode is then ``"vector_entry_point"``) builds a ``maml_rl.samplers.MultiTaskVectorEnv``
    of ``gymnasium.make(env_id)`` envs on worker processes. Keyword arguments go to it (``num_workers``,
    ``start_method``, ``autoreset_mode``, ``copy``) or else to the envs. The sampler is a layer above
    the envs, so it is loaded by name when called, as gymnasium loads an ``entry_point`` string."""

    TARGET = "maml_rl.samplers.vector_env:make_vector_env"

    def __init__(self, env_id: str):
        self.env_id = env_id

    def __call__(self, num_envs: int = 1, **kwargs):
        from gymnasium.envs.registration import load_env_creator

        return load_env_creator(self.TARGET)(self.env_id, num_envs=num_envs, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id!r})"
