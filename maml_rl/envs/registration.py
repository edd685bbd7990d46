"""Gymnasium registration of the maml_rl environments."""

from __future__ import annotations

import gymnasium

__all__ = ["ENV_IDS", "register_envs"]

_MUJOCO = "maml_rl.envs.mujoco"

# (id, entry point, default kwargs, max_episode_steps)
_ENV_SPECS: tuple[tuple[str, str, dict, int], ...] = (
    ("2DNavigation-v0", "maml_rl.envs.navigation:Navigation2DEnv", {}, 100),
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

#: Ids of all the environments registered by :mod:`maml_rl.envs`.
ENV_IDS: tuple[str, ...] = tuple(spec[0] for spec in _ENV_SPECS)


def register_envs() -> None:
    """Register every maml_rl environment with gymnasium (idempotent)."""
    for env_id, entry_point, kwargs, max_episode_steps in _ENV_SPECS:
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point=entry_point,
            kwargs=dict(kwargs),
            max_episode_steps=max_episode_steps,
        )
