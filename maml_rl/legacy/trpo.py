"""pytorch-maml-rl's MAMLTRPO calls: its positional order, and TRPO settings given to ``step``."""

from __future__ import annotations

from typing import Any

import torch

from maml_rl.legacy.warn import warn_once

__all__ = ["TRPO_SETTINGS", "StepOverride", "reference_positional_order"]

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
