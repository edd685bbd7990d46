"""The classic algorithms that in-context learners are measured against, computed on the package's own
envs and tasks: Thompson sampling and UCB1 on Bernoulli bandits, PSRL on tabular MDPs, and with each the
oracle (the task known) and random play as bounds.

``python -m maml_rl.references bandit --arms 5 --pulls 100 --tasks 500 --seed 100`` prints them and
writes them as JSON and npz (docs/environments.md, "In-context references"). Numpy only, no torch.
"""

from maml_rl.references.bandits import (
    BANDIT_AGENTS,
    BanditAgent,
    BanditTrial,
    OracleArm,
    RandomArm,
    ThompsonSampling,
    UCB1,
    play_bandit,
)
from maml_rl.references.curves import REFERENCE_NAMES, ReferenceCurves, load_reference_curves, reference_env_id
from maml_rl.references.evaluation import (
    bandit_references,
    mdp_references,
    save,
    summarise_bandits,
    summarise_mdps,
)
from maml_rl.references.mdps import (
    MDP_AGENTS,
    MDPAgent,
    MDPPrior,
    OraclePolicy,
    PSRL,
    RandomPolicy,
    play_mdp,
    value_iteration,
)

__all__ = [
    "BANDIT_AGENTS", "MDP_AGENTS", "REFERENCE_NAMES", "BanditAgent", "BanditTrial", "MDPAgent", "MDPPrior",
    "OracleArm", "OraclePolicy", "PSRL", "RandomArm", "RandomPolicy", "ReferenceCurves", "ThompsonSampling", "UCB1",
    "bandit_references", "load_reference_curves", "mdp_references", "play_bandit", "play_mdp", "reference_env_id",
    "save", "summarise_bandits", "summarise_mdps", "value_iteration",
]
