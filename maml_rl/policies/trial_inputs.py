"""What a trial policy sees at each step: the policy's (or its learner's) declaration, which the sampler
and :class:`~maml_rl.data.trials.TrialBatch` only call.

The sampler hands an :class:`InputFormat` the step's observation and the previous step's action, reward,
done flag and the attempt (episode of the trial) it belongs to; the format builds the policy's input row.
A TrialBatch rebuilds every step's input with the same call, so a learner trains on the very inputs the
policy saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from maml_rl.policies.recurrent import rl2_input_size, rl2_inputs

__all__ = ["InputFormat", "input_format"]

_NAMES = {"rl2": (True, False), "rl2-autoreset": (True, True), "observations": (False, False)}


@dataclass(frozen=True)
class InputFormat:
    """A trial policy's input row: the observation, and with ``previous`` RL²'s previous action (one-hot if
    discrete), ``reward_scale`` times the previous reward and the done flag (:func:`rl2_inputs`), then with
    ``attempt`` the index of the step's episode in its trial.

    :param zero_after_done: the three previous values are zero at each episode's first step (Meta-World's
        autoreset shows them so); the attempt index is kept.
    :param attempt: append the attempt index (0 for the trial's first episode) as one more column.
    """

    previous: bool = True
    reward_scale: float = 1.0
    zero_after_done: bool = False
    attempt: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "reward_scale", float(self.reward_scale))
        if self.zero_after_done and not self.previous:
            raise ValueError("InputFormat: zero_after_done applies to the previous values; set previous=True")

    @property
    def name(self) -> str:
        """``"rl2"``, ``"rl2-autoreset"`` or ``"observations"``, with ``"+attempt"`` if it has the column."""
        base = "observations" if not self.previous else "rl2-autoreset" if self.zero_after_done else "rl2"
        return base + ("+attempt" if self.attempt else "")

    def size(self, observation_size: int, action_size: int) -> int:
        """Width of the input row (``action_size``: the number of categories of a discrete space)."""
        width = rl2_input_size(observation_size, action_size) if self.previous else int(observation_size)
        return width + int(self.attempt)

    def __call__(self, observations: torch.Tensor, previous_actions: torch.Tensor, previous_rewards: torch.Tensor,
                 previous_dones: torch.Tensor, attempts: Optional[torch.Tensor],
                 num_categories: Optional[int] = None) -> torch.Tensor:
        """The input rows ``[..., size]`` (leading shape of ``previous_rewards``); ``attempts`` is read only
        with :attr:`attempt`."""
        if self.previous:
            x = rl2_inputs(observations, previous_actions, previous_rewards, previous_dones, num_categories,
                           self.reward_scale, self.zero_after_done)
        else:
            x = observations.reshape(*previous_rewards.shape, -1).to(torch.float32)
        if not self.attempt:
            return x
        if attempts is None:
            raise ValueError(f"the input format {self.name!r} needs each step's attempt index")
        return torch.cat([x, attempts.to(torch.float32).unsqueeze(-1)], dim=-1)


def input_format(inputs: Any, reward_scale: Any = 1.0) -> InputFormat:
    """``inputs`` as an :class:`InputFormat`: one already (``reward_scale`` then ignored), or a format's
    :attr:`~InputFormat.name` (``"rl2"``, ``"rl2-autoreset"``, ``"observations"``, each maybe with
    ``"+attempt"``) with ``reward_scale``: the two say all of a format."""
    if isinstance(inputs, InputFormat):
        return inputs
    try:
        reward_scale = float(reward_scale)
    except (TypeError, ValueError):
        raise ValueError(f"reward_scale must be a number, got {reward_scale!r}") from None
    base = inputs[:-len("+attempt")] if isinstance(inputs, str) and inputs.endswith("+attempt") else inputs
    if not isinstance(base, str) or base not in _NAMES:
        raise ValueError(f"inputs={inputs!r}: use 'rl2' (observation, previous action, reward and done flag), "
                         "'rl2-autoreset' (the same, zero at each episode's first step), 'observations', any of "
                         "them + '+attempt' (the attempt index too), or a maml_rl.policies.trial_inputs.InputFormat")
    previous, zero_after_done = _NAMES[base]
    return InputFormat(previous=previous, reward_scale=reward_scale, zero_after_done=zero_after_done,
                       attempt=base != inputs)
