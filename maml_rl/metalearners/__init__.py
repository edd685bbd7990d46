"""Meta-learners: MAML with a TRPO outer update."""

from maml_rl.metalearners.maml_trpo import MAMLTRPO

__all__ = ["MAMLTRPO"]
