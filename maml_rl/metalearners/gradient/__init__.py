"""Gradient-based meta-learners: adaptation by policy-gradient steps.

:class:`GradientMetaLearner` (:mod:`.learner`) owns the loop every member shares:
sample, adapt by :mod:`.adaptation`'s inner steps, sample again
(:mod:`.sampling_loop`), and evaluate with gradient steps. The members own only their
outer update: :class:`MAMLTRPO` (a trust-region step through :mod:`.meta_graph`),
:class:`ProMP` (clipped Adam steps with the low-variance inner loss). :mod:`.losses`
holds the losses both use; :mod:`.keys` their configuration keys.
"""

from maml_rl.metalearners.gradient.learner import AdaptationBatch, GradientMetaLearner
from maml_rl.metalearners.gradient.maml_trpo import MAMLTRPO
from maml_rl.metalearners.gradient.promp import ProMP
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

__all__ = ["AdaptationBatch", "GradientMetaLearner", "MAMLTRPO", "ProMP", "sample_adapt_sample"]
