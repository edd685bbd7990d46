"""The one place a seed is drawn when none is given (a run, or a sampler built without one)."""

from __future__ import annotations

import numpy as np

__all__ = ["draw_seed"]


def draw_seed() -> int:
    """32 bits of fresh OS entropy; the caller records it (``config.json``, ``sampler.seed``) so that the
    run can be repeated. Everything random afterwards derives from the recorded seed."""
    return int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
