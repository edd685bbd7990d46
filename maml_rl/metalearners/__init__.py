"""Meta-learners, chosen by name through :data:`METALEARNERS` (the config key ``algorithm``)."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from maml_rl.metalearners.base import MetaLearner, StaleEpisodesError
from maml_rl.metalearners.gradient import MAMLTRPO, AdaptationBatch, GradientMetaLearner, ProMP, sample_adapt_sample
from maml_rl.metalearners.pearl import PEARL
from maml_rl.metalearners.rl2 import RL2PPO
from maml_rl.metalearners.transformer import TransformerPPO
from maml_rl.metalearners.trials import TrialPPO
from maml_rl.policies.policy import Policy

__all__ = ["DEFAULT_ALGORITHM", "METALEARNERS", "AdaptationBatch", "GradientMetaLearner", "MAMLTRPO", "MetaLearner", "PEARL", "ProMP",
           "RL2PPO", "TrialPPO",
           "StaleEpisodesError", "make_metalearner", "make_policy", "sample_adapt_sample"]

#: Every meta-learner by the name config files give as ``algorithm``; a new one is one more line (its
#: configuration keys are its class's ``hyperparameters``, declared beside it).
METALEARNERS: dict[str, type[MetaLearner]] = {
    "maml-trpo": MAMLTRPO,
    "promp": ProMP,
    "rl2-ppo": RL2PPO,
    "pearl": PEARL,
    "transformer-ppo": TransformerPPO,
}

#: The ``algorithm`` of a configuration that names none (pytorch-maml-rl's configs: MAML-TRPO).
DEFAULT_ALGORITHM = "maml-trpo"


def make_policy(config: Mapping[str, Any], env: Any) -> torch.nn.Module:
    """The policy a configuration's algorithm trains (:meth:`MetaLearner.make_policy`)."""
    return METALEARNERS[config["algorithm"]].make_policy(env, config)


def make_metalearner(config: Mapping[str, Any], policy: Policy, device: str | torch.device = "cpu") -> MetaLearner:
    """The meta-learner named by a validated configuration's ``algorithm``, built from its keys."""
    return METALEARNERS[config["algorithm"]].from_config(policy, config, device)
