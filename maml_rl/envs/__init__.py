"""Meta-learning environments for gymnasium.

Importing this package registers the environments listed in :data:`ENV_IDS`
with gymnasium, e.g. ``gymnasium.make("HalfCheetahVel-v5")``, and the
Meta-World benchmarks of :data:`METAWORLD_IDS` (``MetaWorld-ML1-push-v3``,
``MetaWorld-ML10-v3``, ``MetaWorld-ML45-v3``; they need the ``metaworld``
extra, imported on first use as :mod:`maml_rl.envs.metaworld`). The MuJoCo
environments live in :mod:`maml_rl.envs.mujoco` (imported on first use).

A MuJoCo install that pip left broken (Meta-World's MuJoCo 3.3 over MuJoCo 4)
is refused here, with its repair (:mod:`maml_rl.envs.install_check`).
"""

from maml_rl.envs.bandit import BernoulliBanditEnv, GaussianBanditEnv
from maml_rl.envs.factory import EnvFactory, UnknownEnvError, make_env
from maml_rl.envs.install_check import BrokenMuJoCoInstallError, check_mujoco_install
from maml_rl.envs.mdp import TabularMDPEnv
from maml_rl.envs.meta_env import MetaEnv, validate_task
from maml_rl.envs.navigation import Navigation2DEnv
from maml_rl.envs.sparse_point import SparsePointEnv
from maml_rl.envs.registration import ENV_IDS, METAWORLD_IDS, register_envs

check_mujoco_install()
register_envs()

__all__ = [
    "ENV_IDS",
    "METAWORLD_IDS",
    "BernoulliBanditEnv",
    "BrokenMuJoCoInstallError",
    "EnvFactory",
    "GaussianBanditEnv",
    "MetaEnv",
    "Navigation2DEnv",
    "SparsePointEnv",
    "TabularMDPEnv",
    "UnknownEnvError",
    "make_env",
    "register_envs",
    "validate_task",
]
