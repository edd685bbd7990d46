"""RL²: a recurrent policy that adapts in its hidden state over a trial of episodes, trained with PPO
(:mod:`.learner`); its configuration keys are in :mod:`.keys`."""

from maml_rl.metalearners.rl2.learner import RL2PPO

__all__ = ["RL2PPO"]
