"""Policies evaluable at explicit, optionally per-task stacked, parameters."""

from maml_rl.policies.categorical_mlp import CategoricalMLPPolicy
from maml_rl.policies.factory import get_policy_for_env
from maml_rl.policies.normal_mlp import NormalMLPPolicy
from maml_rl.policies.policy import Policy, expand_params, get_nonlinearity, linear, stack_params
from maml_rl.policies.recurrent import GRUPolicy, RecurrentPolicy, rl2_input_size, rl2_inputs
from maml_rl.policies.trial_inputs import InputFormat

__all__ = [
    "CategoricalMLPPolicy",
    "GRUPolicy",
    "InputFormat",
    "RecurrentPolicy",
    "rl2_input_size",
    "rl2_inputs",
    "NormalMLPPolicy",
    "Policy",
    "expand_params",
    "get_nonlinearity",
    "get_policy_for_env",
    "linear",
    "stack_params",
]
