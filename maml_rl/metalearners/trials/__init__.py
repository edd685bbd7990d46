"""On-policy learning over trials whatever the sequence model (:class:`~.learner.TrialPPO`): RL²'s GRU and
the Transformer are its instances; its keys are in :mod:`.keys`, its evaluation in :mod:`.evaluation`."""

from maml_rl.metalearners.trials.learner import TrialPPO

__all__ = ["TrialPPO"]
