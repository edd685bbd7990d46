"""The references' curves attempt by attempt, read back from the JSON that ``python -m maml_rl.references ...
--output OUT`` writes: what ``report.py --attempts --references OUT.json`` draws beside the trial learners.

An attempt is one of the trial's episodes, as in test.py's rows: a pull of a bandit (its reward), an episode of a
tabular MDP (its return). The file is read as JSON only; nothing in it runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["REFERENCE_NAMES", "ReferenceCurves", "load_reference_curves", "reference_env_id"]

# How the figures name each algorithm of the registries (bandits.BANDIT_AGENTS, mdps.MDP_AGENTS).
REFERENCE_NAMES = {"thompson": "Thompson sampling", "ucb1": "UCB1", "random": "random", "psrl": "PSRL",
                   "oracle": "oracle (task known)", "optimal": "optimal (MDP known, expected)"}


@dataclass(frozen=True)
class ReferenceCurves:
    """One references file: the env id its tasks are drawn from, its number of tasks, and per algorithm the
    mean over the tasks of each attempt's return (``[attempts]``)."""

    path: str
    env: str
    tasks: int
    curves: dict[str, np.ndarray]

    @property
    def attempts(self) -> int:
        return len(next(iter(self.curves.values())))


def reference_env_id(benchmark: str, settings: dict[str, Any]) -> str:
    """The registered env whose tasks the references played (``maml_rl.envs.registration``)."""
    if benchmark == "bandit":
        return f"Bandit-K{int(settings['arms'])}-v0"
    if benchmark == "mdp":
        return "TabularMDP-v0"
    raise ValueError(f"unknown benchmark {benchmark!r}")


def _curve(values: Any, what: str) -> np.ndarray:
    curve = np.asarray(values, dtype=np.float64)
    if curve.ndim != 1 or curve.size == 0 or not np.all(np.isfinite(curve)):
        raise ValueError(f"{what} is not a list of finite numbers")
    return curve


def load_reference_curves(path: str | Path) -> ReferenceCurves:
    """The per-attempt curves of a references ``.json``; ``ValueError`` saying what is wrong with any other file."""
    path = Path(path)
    hint = "give the .json that `python -m maml_rl.references {bandit,mdp} ... --output OUT` wrote"
    try:
        header = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file; {hint}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a references file ({type(exc).__name__}: {exc}); {hint}") from None
    try:
        benchmark, algorithms = header["benchmark"], header["algorithms"]
        env = reference_env_id(benchmark, header["settings"])
        curves = {}
        for name, summary in algorithms.items():
            if name == "policy":  # the evaluated policy's own figures (--on): report.py draws it from its run
                continue
            if benchmark == "bandit":
                curves[name] = _curve(summary["mean_reward_per_pull"], f"{name}'s mean_reward_per_pull")
            elif name == "optimal":  # an expected value per episode, the same for every episode
                episodes = int(header["settings"]["episodes"])
                curves[name] = np.full(episodes, float(summary["value_per_episode"]["mean"]))
            else:
                curves[name] = _curve(summary["return_per_episode"], f"{name}'s return_per_episode")
        tasks = int(header["tasks"])
    except (KeyError, TypeError, ValueError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"{path}: not a references file ({what}); {hint}") from None
    if not curves or len({len(c) for c in curves.values()}) != 1:
        raise ValueError(f"{path}: its algorithms' curves are missing or differ in length; {hint}")
    return ReferenceCurves(str(path), env, tasks, curves)
