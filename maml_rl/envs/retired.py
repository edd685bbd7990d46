"""pytorch-maml-rl's MuJoCo env ids, refused with what to use instead.

They were built on gym's -v2 MuJoCo models through mujoco-py (MuJoCo 1.5/2.0).
This package's envs of the same tasks are the -v5 ones, on gymnasium's v5
models and MuJoCo >= 3: the dynamics differ, so returns on them cannot be
compared with results reported on the old ids. The old ids are registered with
gymnasium too, so that ``gymnasium.make("HalfCheetahVel-v2")`` in an old script
says the same thing.
"""

from __future__ import annotations

import gymnasium

from maml_rl.envs.errors import RetiredEnvError

__all__ = ["RETIRED_ENV_IDS", "RetiredEnvError", "refuse_retired", "retired_message"]

#: The reference's id -> this package's env of the same task.
RETIRED_ENV_IDS: dict[str, str] = {
    "HalfCheetahVel-v2": "HalfCheetahVel-v5",
    "HalfCheetahDir-v2": "HalfCheetahDir-v5",
    "AntVel-v2": "AntVel-v5",
    "AntDir-v2": "AntDir-v5",
    "AntPos-v1": "AntPos-v5",
}


def retired_message(env_id: str) -> str:
    new = RETIRED_ENV_IDS[env_id]
    return (f"{env_id} is pytorch-maml-rl's env on gym's -v2 MuJoCo models (mujoco-py, MuJoCo 2.0); use {new}, "
            f"the same task on gymnasium's v5 models and MuJoCo >= 3. The dynamics differ, so returns on {new} "
            f"are not comparable with results reported on {env_id}: retrain rather than compare "
            "(docs/migrating.md)")


def refuse_retired(env_id: str, **kwargs: object) -> gymnasium.Env:
    """The entry point registered for every retired id: raises :class:`RetiredEnvError`."""
    raise RetiredEnvError(retired_message(env_id))
