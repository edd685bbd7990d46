"""maml_rl: MAML for reinforcement learning on gymnasium 1.x and MuJoCo."""

__version__ = "0.1.0"
