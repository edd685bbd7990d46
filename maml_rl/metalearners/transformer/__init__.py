"""PPO over a causal Transformer trial policy (:mod:`.learner`); its configuration keys are in :mod:`.keys`."""

from maml_rl.metalearners.transformer.learner import TransformerPPO

__all__ = ["TransformerPPO"]
