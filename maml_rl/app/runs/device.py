"""The device a run computes on, checked before any work starts."""

from __future__ import annotations

import torch

from maml_rl.app.config_files import ConfigError

__all__ = ["resolve_device"]


def resolve_device(name: str) -> torch.device:
    """``torch.device(name)``, refusing CUDA devices that are not available.

    :raises ConfigError: for an unknown device name or an unavailable CUDA device.
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"--device {name!r} is not a device: {exc}; use cpu or cuda") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            reason = (
                "this torch build has no CUDA support" if torch.version.cuda is None else "no CUDA device is visible"
            )
            raise ConfigError(f"--device {name!r} was requested but CUDA is not available ({reason}); use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"--device {name!r}: there are only {torch.cuda.device_count()} CUDA device(s) "
                f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})"
            )
    elif device.type != "cpu":
        raise ConfigError(f"--device {name!r} is not supported; use cpu or cuda")
    return device
