"""Experiment configurations: loading, validation and the environment they name.

A configuration is a flat mapping with the keys of the original
pytorch-maml-rl YAML files (``env-name``, ``fast-lr``, ...), read from YAML
or JSON. :func:`load_config` checks every key before anything runs: an
unknown key, a value of the wrong type or out of range, or an unregistered
environment id raises :class:`ConfigError` naming the key, the value and
what is expected.

Keys marked "default" below may be left out of a file; every default comes
from :data:`maml_rl.hyperparameters.DEFAULTS`::

    algorithm           meta-learner, a key of METALEARNERS   (default "maml-trpo")
    env-name            registered gymnasium id (e.g. 2DNavigation-v0)
    env-kwargs          mapping passed to gymnasium.make      (default {})
    gamma               discount factor in [0, 1]
    gae-lambda          GAE lambda in [0, 1]                  (default 1.0)
    first-order         first-order MAML approximation        (default false)
    hidden-sizes        list of hidden layer widths
    nonlinearity        activation name (tanh, relu, ...)
    fast-batch-size     episodes per task per adaptation step
    num-steps           inner gradient steps                  (default 1)
    fast-lr             inner step size
    num-batches         meta-updates (outer iterations)
    meta-batch-size     tasks per meta-update
    max-kl              TRPO trust-region radius              (default 1e-2)
    cg-iters            conjugate-gradient iterations         (default 10)
    cg-damping          conjugate-gradient damping            (default 1e-5)
    ls-max-steps        line-search steps                     (default 15)
    ls-backtrack-ratio  line-search shrink factor in (0, 1)   (default 0.8)
    loss-averaging      "step" or "episode"                   (default "step")
    seed                seed of the run, or null              (default null)

``loss-averaging`` is not in pytorch-maml-rl's files: it says how a task's
losses and advantage normalisation weigh its steps. ``"step"`` weighs every
valid step the same (the MAML paper's code); ``"episode"`` takes a mean of
per-episode means (pytorch-maml-rl). They differ only for episodes that end
early (2D navigation, Ant).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from maml_rl.hyperparameters import DEFAULTS

__all__ = [
    "CONFIG_KEYS",
    "ConfigError",
    "apply_overrides",
    "build_env",
    "config_diff",
    "load_config",
    "parse_override",
    "read_config_file",
    "validate_config",
]


class ConfigError(ValueError):
    """A configuration (file, key, value or environment) is invalid."""


_REQUIRED = object()


@dataclass(frozen=True)
class _Key:
    """One configuration key: how to check and normalise its value."""

    convert: Callable[[str, Any], Any]  # returns the normalised value or raises _Invalid
    expected: str  # what a valid value is, for error messages
    default: Any = _REQUIRED


class _Invalid(Exception):
    pass


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _integer(minimum: int) -> Callable[[str, Any], int]:
    def convert(key: str, value: Any) -> int:
        if not _is_int(value) or value < minimum:
            raise _Invalid
        return int(value)

    return convert


def _number(low: float | None = None, high: float | None = None, *, open_low: bool = False,
            open_high: bool = False) -> Callable[[str, Any], float]:
    def convert(key: str, value: Any) -> float:
        if not (_is_int(value) or isinstance(value, float)):
            raise _Invalid
        value = float(value)
        if not math.isfinite(value):
            raise _Invalid
        if low is not None and (value < low or (open_low and value == low)):
            raise _Invalid
        if high is not None and (value > high or (open_high and value == high)):
            raise _Invalid
        return value

    return convert


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid
    return value


def _env_name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid
    return value


def _env_kwargs(key: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(name, str) for name in value):
        raise _Invalid
    return dict(value)


def _hidden_sizes(key: str, value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(_is_int(size) and size >= 1 for size in value):
        raise _Invalid
    return [int(size) for size in value]


def _nonlinearity(key: str, value: Any) -> str:
    from maml_rl.policies import get_nonlinearity

    if not isinstance(value, str):
        raise _Invalid
    try:
        get_nonlinearity(value)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None
    return value


def _loss_averaging(key: str, value: Any) -> str:
    from maml_rl.episodes import LOSS_AVERAGING

    if not isinstance(value, str) or value not in LOSS_AVERAGING:
        raise _Invalid
    return value


def _algorithm(key: str, value: Any) -> str:
    from maml_rl.metalearners import METALEARNERS

    if not isinstance(value, str) or value not in METALEARNERS:
        raise _Invalid(f"one of: {', '.join(METALEARNERS)}")
    return value


def _seed(key: str, value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value < 2**63:
        raise _Invalid
    return int(value)


_POSITIVE_INT = "an integer >= 1"

#: Every key a configuration may hold, in the order they are written out.
CONFIG_KEYS: dict[str, _Key] = {
    "algorithm": _Key(_algorithm, "a meta-learner name", DEFAULTS.algorithm),
    "env-name": _Key(_env_name, "a registered environment id (string)"),
    "env-kwargs": _Key(_env_kwargs, "a mapping of keyword arguments for gymnasium.make", {}),
    "gamma": _Key(_number(0.0, 1.0), "a number in [0, 1]"),
    "gae-lambda": _Key(_number(0.0, 1.0), "a number in [0, 1]", DEFAULTS.gae_lambda),
    "first-order": _Key(_boolean, "true or false", DEFAULTS.first_order),
    "hidden-sizes": _Key(_hidden_sizes, "a list of integers >= 1, e.g. [64, 64]"),
    "nonlinearity": _Key(_nonlinearity, "an activation name such as tanh or relu"),
    "fast-batch-size": _Key(_integer(1), _POSITIVE_INT),
    "num-steps": _Key(_integer(1), _POSITIVE_INT, DEFAULTS.num_steps),
    "fast-lr": _Key(_number(0.0, open_low=True), "a number > 0"),
    "num-batches": _Key(_integer(1), _POSITIVE_INT),
    "meta-batch-size": _Key(_integer(1), _POSITIVE_INT),
    "max-kl": _Key(_number(0.0, open_low=True), "a number > 0", DEFAULTS.max_kl),
    "cg-iters": _Key(_integer(1), _POSITIVE_INT, DEFAULTS.cg_iters),
    "cg-damping": _Key(_number(0.0), "a number >= 0", DEFAULTS.cg_damping),
    "ls-max-steps": _Key(_integer(1), _POSITIVE_INT, DEFAULTS.ls_max_steps),
    "ls-backtrack-ratio": _Key(_number(0.0, 1.0, open_low=True, open_high=True), "a number in (0, 1)",
                               DEFAULTS.ls_backtrack_ratio),
    "loss-averaging": _Key(_loss_averaging, '"step" or "episode"', DEFAULTS.loss_averaging),
    "seed": _Key(_seed, "null or an integer in [0, 2**63)", None),
}


class _Loader(yaml.SafeLoader):
    """Safe YAML loader that also reads ``1e-2`` (no dot) as a float, not a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_config_file(path: str | Path) -> dict:
    """The raw mapping in a YAML (or ``.json``) file, not yet validated.

    :raises ConfigError: the file is missing, unparsable or not a mapping.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=_Loader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot parse config file {str(path)!r}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping of keys to values, got {type(data).__name__}")
    return data


def parse_override(text: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` -> ``(KEY, VALUE)``, the value read as YAML (``0.1`` is a float, ``[8, 8]`` a list).

    ``env-kwargs.NAME=VALUE`` sets a single environment argument.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r} must look like KEY=VALUE, e.g. fast-batch-size=10")
    try:
        parsed = yaml.load(value, Loader=_Loader) if value.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot parse the value of override {text!r}: {exc}") from None
    return key, parsed


def apply_overrides(config: Mapping[str, Any], overrides: Iterable[tuple[str, Any]]) -> dict:
    """A copy of ``config`` with ``(key, value)`` pairs set; ``env-kwargs.NAME`` keys set one env argument."""
    config = dict(config)
    for key, value in overrides:
        if key.startswith("env-kwargs."):
            env_kwargs = config.get("env-kwargs") or {}
            if not isinstance(env_kwargs, Mapping):
                raise ConfigError(f"cannot set {key}: env-kwargs is {env_kwargs!r}, not a mapping")
            config["env-kwargs"] = {**env_kwargs, key.split(".", 1)[1]: value}
        else:
            config[key] = value
    return config


def validate_config(raw: Mapping[str, Any], source: str = "config") -> dict:
    """Check every key of ``raw`` and return the resolved configuration.

    The result holds every key of :data:`CONFIG_KEYS`, in that order, with
    defaults filled in and numbers normalised (``fast-lr: 1`` becomes ``1.0``).

    :param raw: the mapping read from a file (and overrides).
    :param source: where ``raw`` comes from, for error messages.
    :raises ConfigError: listing every problem found: unknown keys (with the
        closest valid ones), missing keys, values of the wrong type or range
        (with what is expected) and unregistered environment ids.
    """
    problems = []
    for key in raw:
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(str(key).replace("_", "-"), list(CONFIG_KEYS), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"unknown key {key!r}{hint}")
    config = {}
    for key, spec in CONFIG_KEYS.items():
        if key not in raw:
            if spec.default is _REQUIRED:
                problems.append(f"missing key {key!r}: expected {spec.expected}")
            else:
                config[key] = spec.default.copy() if isinstance(spec.default, dict) else spec.default
            continue
        try:
            config[key] = spec.convert(key, raw[key])
        except _Invalid as exc:
            detail = f" ({exc})" if str(exc) else ""
            problems.append(f"{key}: got {raw[key]!r} ({type(raw[key]).__name__}), expected {spec.expected}{detail}")
    if "env-name" in config:
        problem = _check_env_id(config["env-name"])
        if problem:
            problems.append(problem)
    if problems:
        message = f"invalid configuration in {source}:\n  - " + "\n  - ".join(problems)
        if any(problem.startswith("unknown key") for problem in problems):
            message += f"\nvalid keys are: {', '.join(CONFIG_KEYS)}"
        raise ConfigError(message)
    return config


def _check_env_id(env_id: str) -> str | None:
    import maml_rl.envs

    try:
        maml_rl.envs.make_env(env_id)
    except maml_rl.envs.UnknownEnvError as exc:
        return f"env-name: {exc}"
    return None


def load_config(path: str | Path, overrides: Iterable[tuple[str, Any]] = ()) -> dict:
    """Read, override and validate the configuration in ``path``.

    :param path: a YAML file (or a ``config.json`` written by ``train.py``).
    :param overrides: ``(key, value)`` pairs applied before validation.
    :raises ConfigError: see :func:`validate_config`.
    """
    raw = apply_overrides(read_config_file(path), overrides)
    return validate_config(raw, source=str(path))


def config_diff(a: Mapping[str, Any], b: Mapping[str, Any], ignore: Iterable[str] = ()) -> list[str]:
    """Keys whose values differ between two configurations, as ``"key: a -> b"`` lines."""
    ignore = set(ignore)
    keys = [key for key in dict.fromkeys([*a, *b]) if key not in ignore]
    return [f"{key}: {a.get(key)!r} -> {b.get(key)!r}" for key in keys if a.get(key) != b.get(key)]


def build_env(config: Mapping[str, Any]):
    """The environment of a validated configuration, built once (e.g. for its spaces).

    :raises ConfigError: the environment rejects ``env-kwargs``, or it is not a
        meta-learning environment (no ``sample_tasks``/``reset_task``).
    """
    import maml_rl.envs

    name, kwargs = config["env-name"], config["env-kwargs"]
    try:
        env = maml_rl.envs.make_env(name, **kwargs)()
    except maml_rl.envs.UnknownEnvError as exc:
        raise ConfigError(f"env-name: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env-kwargs: {name} cannot be built with {kwargs!r}: {exc}") from exc
    except ImportError as exc:
        # An optional extra's env (Meta-World): the message says what to install.
        raise ConfigError(f"env-name: {name}: {exc}") from None
    missing = [attr for attr in ("sample_tasks", "reset_task") if not hasattr(env.unwrapped, attr)]
    if missing:
        env.close()
        raise ConfigError(
            f"env-name: {name!r} is not a meta-learning environment (it has no {' or '.join(missing)}); "
            f"maml_rl provides: {', '.join(maml_rl.envs.ENV_IDS)}"
        )
    return env
