"""pytorch-maml-rl's MAMLTRPO calls: its positional order, and TRPO settings given to ``step``.

:func:`adapt` wraps ``MAMLTRPO.__init__`` and ``MAMLTRPO.step`` when
``maml_rl.metalearners`` is imported (:mod:`maml_rl.legacy.moved`): the
learner itself takes ``(policy, fast_lr, num_steps, first_order, device, ...)``
and ``step(train_episodes, valid_episodes)`` only.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import torch

from maml_rl.legacy.warn import warn_once

__all__ = ["TRPO_SETTINGS", "StepOverride", "adapt", "reference_positional_order"]

#: ``step``'s keyword arguments in the reference, and their types here.
TRPO_SETTINGS = {"max_kl": float, "cg_iters": int, "cg_damping": float, "ls_max_steps": int,
                 "ls_backtrack_ratio": float}


def reference_positional_order(first_order: bool, fourth: Any, device: Any, defaults: Any) -> tuple[int, bool, Any]:
    """``MAMLTRPO(policy, fast_lr, first_order, device)`` read as the reference did.

    Called when the third positional argument, ``num_steps`` here, is a bool:
    the reference's ``first_order``. Its fourth was ``device``, ``first_order``
    here. Returns ``(num_steps, first_order, device)``.
    """
    warn_once("MAMLTRPO(policy, fast_lr, first_order, device)",
              "the third positional argument of MAMLTRPO is num_steps here (first_order in pytorch-maml-rl): "
              "write MAMLTRPO(policy, fast_lr=..., num_steps=..., first_order=..., device=...)", stacklevel=4)
    if isinstance(fourth, (str, torch.device)):
        if str(device) != "cpu":
            raise TypeError(f"MAMLTRPO got two devices ({fourth!r} by position, {device!r} by keyword)")
        device = fourth
    elif fourth is not defaults.first_order:
        raise TypeError(f"MAMLTRPO got first_order twice ({first_order!r} third, in pytorch-maml-rl's order, and "
                        f"{fourth!r}): write MAMLTRPO(policy, fast_lr=..., first_order=..., device=...)")
    return defaults.num_steps, first_order, device


class StepOverride:
    """The reference's ``step(..., max_kl=..., cg_iters=...)``: these settings for one call, then restored."""

    def __init__(self, learner: Any, settings: dict[str, Any]) -> None:
        unknown = sorted(set(settings) - set(TRPO_SETTINGS))
        if unknown:
            raise TypeError(f"MAMLTRPO.step() got unexpected keyword arguments {unknown}; it takes "
                            f"train_episodes, valid_episodes (and, deprecated, {', '.join(TRPO_SETTINGS)})")
        warn_once("MAMLTRPO.step(..., max_kl=..., cg_iters=..., cg_damping=..., ls_max_steps=..., "
                  "ls_backtrack_ratio=...)",
                  "give them to MAMLTRPO(policy, max_kl=..., ...) or the config's keys (max-kl, ...); "
                  "given to step() they override that one call", stacklevel=4)
        self.learner = learner
        self.new = {name: TRPO_SETTINGS[name](value) for name, value in settings.items()}
        self.old = {name: getattr(learner, name) for name in settings}

    def __enter__(self) -> None:
        for name, value in self.new.items():
            setattr(self.learner, name, value)

    def __exit__(self, *exc_info: Any) -> None:
        for name, value in self.old.items():
            setattr(self.learner, name, value)


def _reading_reference_order(init: Callable[..., None]) -> Callable[..., None]:
    """``MAMLTRPO.__init__`` that reads a bool third argument as the reference's ``first_order``."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            bound = None  # the learner itself says what is wrong
        if bound is None or not isinstance(bound.arguments.get("num_steps"), bool):
            init(self, *args, **kwargs)
            return
        from maml_rl.metalearners.gradient.keys import DEFAULTS

        bound.apply_defaults()
        arguments = bound.arguments
        arguments["num_steps"], arguments["first_order"], arguments["device"] = reference_positional_order(
            arguments["num_steps"], arguments["first_order"], arguments["device"], DEFAULTS)
        init(*bound.args, **bound.kwargs)

    __init__.__legacy_order__ = True
    return __init__


def _overriding_settings(step: Callable[..., Any]) -> Callable[..., Any]:
    """``MAMLTRPO.step`` that also takes the reference's TRPO keywords, for that one call."""

    @functools.wraps(step)
    def wrapper(self, train_episodes: Any, valid_episodes: Any, **trpo_settings: Any) -> Any:
        if not trpo_settings:
            return step(self, train_episodes, valid_episodes)
        with StepOverride(self, trpo_settings):
            return step(self, train_episodes, valid_episodes)

    wrapper.__legacy_settings__ = True
    return wrapper


def adapt(metalearners: Any) -> None:
    """Give ``metalearners.MAMLTRPO`` pytorch-maml-rl's positional order and ``step`` keywords."""
    cls = metalearners.MAMLTRPO
    if not getattr(cls.__init__, "__legacy_order__", False):
        cls.__init__ = _reading_reference_order(cls.__init__)
    if not getattr(cls.step, "__legacy_settings__", False):
        cls.step = _overriding_settings(cls.step)
