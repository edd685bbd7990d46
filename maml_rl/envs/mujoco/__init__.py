"""MuJoCo meta-learning environments on gymnasium's v5 models."""

from maml_rl.envs.mujoco.ant import AntDirEnv, AntEnv, AntPosEnv, AntVelEnv
from maml_rl.envs.mujoco.base import MetaMujocoEnv, MujocoWarning
from maml_rl.envs.mujoco.half_cheetah import HalfCheetahDirEnv, HalfCheetahEnv, HalfCheetahVelEnv

__all__ = [
    "AntDirEnv",
    "AntEnv",
    "AntPosEnv",
    "AntVelEnv",
    "HalfCheetahDirEnv",
    "HalfCheetahEnv",
    "HalfCheetahVelEnv",
    "MetaMujocoEnv",
    "MujocoWarning",
]
