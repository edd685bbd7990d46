"""PEARL (Rakelly et al., 2019): off-policy meta-RL with a probabilistic context encoder and SAC."""

from maml_rl.metalearners.pearl.encoder import ContextEncoder, Posterior, kl_to_standard_normal, product_of_gaussians
from maml_rl.metalearners.pearl.learner import PEARL
from maml_rl.metalearners.pearl.networks import Critics, PEARLPolicy

__all__ = ["PEARL", "ContextEncoder", "Critics", "PEARLPolicy", "Posterior", "kl_to_standard_normal",
           "product_of_gaussians"]
