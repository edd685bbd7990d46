"""A trial rollout (``MultiTaskSampler.rollout_trials``): several episodes per slot, for recurrent
policies (RL²) and feed-forward ones. Its types, the checks of its arguments and the recurrent probe."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import numpy as np
import torch

from maml_rl.policies.recurrent import is_recurrent
from maml_rl.policies.trial_inputs import InputFormat, input_format
from maml_rl.policies.trial_state import records_state

from ..errors import PolicyOutputError
from ..workers.buffers import BufferSpec
from .torch_settings import rollout_torch_settings

__all__ = ["Trial", "TrialStart", "check_recurrent_policy", "make_trial", "refuse_recurrent",
           "trial_request", "trial_start"]


@dataclass(frozen=True)
class TrialStart:
    """Where trials continue from, one row per slot of the whole call: the
    policy's state and the previous action, reward and done flag its first
    input sees (a finished trial's last ones, for Meta-World's evaluation
    protocol). numpy arrays, so that they travel to Ray actors as they are."""

    state: np.ndarray  # [S, *state_shape]
    actions: np.ndarray  # [S, *act]
    rewards: np.ndarray  # [S]
    dones: np.ndarray  # [S]


@dataclass(frozen=True)
class Trial:
    """How the slots of a trial rollout run: ``episodes`` episodes each, back to back.

    :param episodes: episodes per trial (each slot resets its env after each, and
        a recurrent policy keeps its state across those resets).
    :param recurrent: the policy is recurrent (``initial_state`` and ``step``).
    :param inputs: what a recurrent policy sees (the policy's or learner's :class:`InputFormat`).
    :param chunk: record a recurrent policy's state every ``chunk`` steps (BPTT chunk starts).
    :param start: continue from these states instead of the policy's initial state.
    :param reset_each_episode: give a recurrent policy its initial state and a trial's first input at
        every episode's start (its memory of the earlier attempts wiped; an evaluation's ablation).
    """

    episodes: int = 1
    recurrent: bool = False
    inputs: InputFormat = InputFormat()
    chunk: Optional[int] = None
    start: Optional[TrialStart] = None
    reset_each_episode: bool = False

    @property
    def reward_scale(self) -> float:
        """The factor of the previous reward in the policy's input."""
        return self.inputs.reward_scale


RECURRENT_NEEDED = ("a recurrent policy is a torch.nn.Module with is_recurrent = True, state_shape (or "
                    "state_is_inputs = True), initial_state(n, device=None) and step(inputs, state) -> "
                    "(Distribution, next_state) (e.g. maml_rl.policies.GRUPolicy; maml_rl.policies.trial_state)")


def refuse_recurrent(policy, call: str) -> None:
    """``TypeError`` for a recurrent policy given to a feed-forward call."""
    if is_recurrent(policy):
        raise TypeError(
            f"{call}() runs feed-forward policies, but {type(policy).__name__} is recurrent (is_recurrent = True): "
            "sample its trials with sampler.rollout_trials(tasks, episodes_per_trial=N)"
        )


def trial_request(policy, spec: BufferSpec, tasks: Sequence[Any], params: Any, episodes_per_trial: Any, inputs: Any,
                  reward_scale: Any, chunk: Optional[int], start: Any, batch_size: int, checked_inputs: set,
                  reset_each_episode: bool = False) -> Trial:
    """The checked :class:`Trial` of a ``rollout_trials`` call; a recurrent policy is probed once per input
    mode (``checked_inputs`` remembers which)."""
    if not tasks:
        raise ValueError("rollout_trials() needs at least one task")
    trial = make_trial(policy, spec, episodes_per_trial, inputs, reward_scale, chunk, start, len(tasks) * batch_size,
                       reset_each_episode)
    if trial.recurrent and params is not None:
        raise ValueError("params= are per-task parameters of a feed-forward policy; a recurrent policy "
                         "adapts in its state, not its parameters")
    if trial.recurrent and trial.inputs not in checked_inputs:
        check_recurrent_policy(policy, spec, trial.inputs)
        checked_inputs.add(trial.inputs)
    return trial


def make_trial(policy, spec: BufferSpec, episodes_per_trial: Any, inputs: Any, reward_scale: Any,
               chunk: Optional[int], start: Union[None, Mapping[str, Any], Sequence[Any]], num_slots: int,
               reset_each_episode: bool = False) -> Trial:
    """The :class:`Trial` of a ``rollout_trials`` call, every argument checked first."""
    if isinstance(episodes_per_trial, bool) or not isinstance(episodes_per_trial, (int, np.integer)) \
            or episodes_per_trial < 1:
        raise ValueError(f"episodes_per_trial must be an int >= 1, got {episodes_per_trial!r}")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1):
        raise ValueError(f"chunk must be None or an int >= 1 (the BPTT chunk length), got {chunk!r}")
    mode = input_format(inputs, reward_scale)
    recurrent = is_recurrent(policy)
    if start is not None and not recurrent:
        raise ValueError("start= continues a recurrent policy's trials; this policy is feed-forward")
    if start is not None and not records_state(policy):
        raise ValueError(f"start= continues from a recorded state, but {type(policy).__name__}'s state is its "
                         "inputs (state_is_inputs = True) and none is recorded: run the episodes to continue "
                         "with inside one trial (more episodes_per_trial)")
    if reset_each_episode and not recurrent:
        raise ValueError("reset_each_episode= resets a recurrent policy's state; this policy is feed-forward")
    return Trial(episodes=int(episodes_per_trial), recurrent=recurrent, inputs=mode,
                 chunk=None if chunk is None else int(chunk),
                 start=None if start is None else trial_start(policy, spec, start, num_slots),
                 reset_each_episode=bool(reset_each_episode))


def trial_start(policy, spec: BufferSpec, start, num_slots: int) -> TrialStart:
    """``start`` (``TrialBatch.end_points()`` of every slot, as a mapping with
    ``state``, ``actions``, ``rewards``, ``dones`` or a 4-tuple) as numpy rows."""
    if isinstance(start, Mapping):
        missing = [k for k in ("state", "actions", "rewards", "dones") if k not in start]
        if missing:
            raise ValueError(f"start= lacks {missing}: give maml_rl.data.trials.stack_start(batches)")
        values = (start["state"], start["actions"], start["rewards"], start["dones"])
    else:
        values = tuple(start)
        if len(values) != 4:
            raise ValueError("start= needs (state, actions, rewards, dones), one row per slot")
    arrays = [v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v) for v in values]
    state, actions, rewards, dones = arrays
    expected = {"state": (num_slots, *tuple(policy.state_shape)), "actions": (num_slots, *spec.action_shape),
                "rewards": (num_slots,), "dones": (num_slots,)}
    for name, array in zip(expected, arrays):
        if tuple(array.shape) != expected[name]:
            raise ValueError(f"start[{name!r}] has shape {tuple(array.shape)}; this call's {num_slots} slots "
                             f"need {expected[name]}")
    return TrialStart(state.astype(np.float32), actions.astype(spec.action_dtype), rewards.astype(np.float32),
                      dones.astype(np.uint8))


def check_recurrent_policy(policy, spec: BufferSpec, inputs: InputFormat) -> None:
    """Call a recurrent policy once on one zero input and refuse, naming what is
    wrong, one that does not follow the protocol or does not fit the spaces."""
    name = type(policy).__name__
    if not isinstance(policy, torch.nn.Module):
        raise TypeError(f"the recurrent policy {name} is not a torch.nn.Module (the sampler ships and places "
                        f"its parameters): {RECURRENT_NEEDED}")
    tensor_state = records_state(policy)
    for attribute in ("state_shape", "initial_state", "step") if tensor_state else ("initial_state", "step"):
        if not hasattr(policy, attribute):
            raise TypeError(f"the policy {name} says is_recurrent = True but has no {attribute}: {RECURRENT_NEEDED}")
    action_size = spec.num_categories if spec.discrete else int(np.prod(spec.action_shape))
    width = inputs.size(int(np.prod(spec.observation_shape)), action_size)
    device = next((p.device for p in policy.parameters()), torch.device("cpu"))
    with torch.no_grad(), torch.random.fork_rng(devices=[]), rollout_torch_settings():
        try:
            state = policy.initial_state(1, device)
        except Exception as exc:
            raise TypeError(f"the recurrent policy {name}: initial_state(1, {device}) failed: {exc!r}. The sampler "
                            "calls initial_state(n, device) with the device of the policy's parameters; define "
                            "it as initial_state(self, n, device=None)") from exc
        if tensor_state and (not torch.is_tensor(state) or state.dtype != torch.float32):
            raise PolicyOutputError(f"the recurrent policy {name}: initial_state() returned "
                                    f"{getattr(state, 'dtype', type(state).__name__)}; the sampler records and "
                                    "restores states as float32 tensors, so return one (torch.zeros(n, ...)), "
                                    "or declare state_is_inputs = True (maml_rl.policies.trial_state)")
        try:
            distribution, next_state = policy.step(torch.zeros((1, width), device=device), state)
        except Exception as exc:
            raise TypeError(f"the recurrent policy {name} failed on one input of width {width}, the input format "
                            f"{inputs.name!r}: {exc!r}. Build it with input_size={width} (the format's "
                            "size(observation_size, action_size)), or pass the inputs= it was built for") from exc
    if tensor_state and (tuple(state.shape) != (1, *tuple(policy.state_shape))
                         or tuple(next_state.shape) != tuple(state.shape)):
        raise PolicyOutputError(f"the recurrent policy {name}: initial_state(1) has shape {tuple(state.shape)} and "
                                f"step() returns a state of shape {tuple(next_state.shape)}; state_shape says "
                                f"{(1, *tuple(policy.state_shape))}")
