"""A learned value function of the trial so far, for :class:`~.learner.TrialPPO` (``critic: "gru"``).

The linear baseline refitted on each task's trials sees one step's inputs and the time: it cannot tell a
history that has found the good actions from one that has not, so the value of having explored, which pays
episodes later, is left to GAE's returns alone. This critic reads the whole trial so far (a GRU over the
policy's inputs), is trained across iterations by regression on the GAE returns, as PPO's critics are
(AMAGO, VariBAD, TrMRL). It predicts about the first iteration's mean return, in units of that iteration's
spread, so it starts at the right place and scale whatever the reward's (Adam's steps are of a fixed size: a
return of -250 would take thousands of them to reach from 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import torch
from torch import nn

if TYPE_CHECKING:
    from maml_rl.data.trials import TrialBatch

__all__ = ["TrialCritic", "critic_advantages", "critic_memory", "critic_step"]


class TrialCritic(nn.Module):
    """``V(trial so far)``: a Tanh embedding, a GRU over the trial, a linear output.

    :param input_size: the policy's input size (observation, previous action, scaled reward, flags).
    :param hidden_size: the embedding's and the GRU's width.
    :param seed: seeds the initial weights (its own generator: the run's other random streams are untouched).
    """

    def __init__(self, input_size: int, hidden_size: int = 128, seed: int = 0) -> None:
        super().__init__()
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.embed = nn.Linear(self.input_size, self.hidden_size)
        self.gru = nn.GRU(self.hidden_size, self.hidden_size)
        self.out = nn.Linear(self.hidden_size, 1)
        generator = torch.Generator().manual_seed(int(seed))
        with torch.no_grad():
            for parameter in self.parameters():
                if parameter.dim() > 1:
                    nn.init.orthogonal_(parameter, generator=generator)
                else:
                    parameter.zero_()
            self.out.weight.mul_(0.01)  # start near zero: the first advantages are the returns' own
        #: Values are ``offset + scale * output`` (set from the first iteration's targets, then fixed).
        self.register_buffer("offset", torch.zeros(()))
        self.register_buffer("scale", torch.zeros(()))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """``[T, B, input_size]`` trials from their first step -> ``[T, B]`` values (in reward units)."""
        hidden, _ = self.gru(torch.tanh(self.embed(inputs)))
        return self.offset + self.out(hidden).squeeze(-1) * self.scale.clamp(min=1e-8)

    def set_scale(self, targets: torch.Tensor, mask: torch.Tensor) -> None:
        """Fix the output's origin and unit at the first call: the first iteration's targets' mean and spread
        (1 where they do not spread: one step, or equal returns)."""
        if float(self.scale) > 0:
            return
        valid = targets[mask.bool()].double()
        spread = float(valid.std(unbiased=False)) if valid.numel() > 1 else 0.0
        self.offset.fill_(float(valid.mean()) if valid.numel() else 0.0)
        self.scale.fill_(spread if spread > 1e-6 else 1.0)

    def loss(self, inputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean squared error on the valid steps, in the output's unit."""
        error = (self.forward(inputs) - targets) / self.scale.clamp(min=1e-8)
        return (error.square() * mask).sum() / mask.sum().clamp(min=1)


def critic_advantages(critic: TrialCritic, trials: "Sequence[TrialBatch]", inputs: Sequence[torch.Tensor],
                      gae_lambda: float, normalize: bool) -> list[torch.Tensor]:
    """Set GAE advantages with ``critic``'s values on each task's trials; return the critic's targets, the GAE
    returns (the advantages before normalisation plus the values), ``[T, B]`` a task."""
    device = next(critic.parameters()).device
    # The first iteration's discounted returns fix the critic's origin and unit, before it predicts.
    critic.set_scale(torch.cat([b.returns.reshape(-1) for b in trials]).to(device),
                     torch.cat([b.mask.reshape(-1) for b in trials]).to(device))
    targets = []
    for batch, x in zip(trials, inputs):
        with torch.no_grad():
            values = critic(x.to(device)).to(batch.device) * batch.mask
        raw = batch.compute_advantages(lambda b, v=values: v, gae_lambda=gae_lambda, normalize=False)
        targets.append(raw + values)
        if normalize:  # the advantages just computed, without a second GAE
            batch.advantages = batch.normalize_advantages(raw)
    return targets


def critic_step(critic: TrialCritic, optimizer: torch.optim.Optimizer, minibatch: dict[str, torch.Tensor],
                max_grad_norm: float) -> float:
    """One Adam step of ``critic`` on a minibatch of whole trials (``inputs``, ``targets``, ``mask``); its loss."""
    loss = critic.loss(minibatch["inputs"], minibatch["targets"], minibatch["mask"])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(critic.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def critic_memory(config: Mapping[str, Any], trials: int, trial_steps: int) -> dict[str, int]:
    """What ``critic: "gru"`` adds to a run's memory (for the learners' ``memory_needs``): its update keeps, for
    each step of a minibatch's trials, the embedding, the GRU's gates and state (about 6 widths)."""
    if config.get("critic", "linear") != "gru":
        return {}
    per_minibatch = -(-trials // config["ppo-minibatches"])
    return {"the critic's activations": per_minibatch * trial_steps * 6 * config["critic-size"] * 4}
