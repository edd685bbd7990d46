"""Experiment configurations: loading and validation (the environment they name is built by
:mod:`maml_rl.app.env_builder`; :func:`build_env` and :class:`ConfigError` are re-exported here).

A configuration is a flat mapping with the keys of the original
pytorch-maml-rl YAML files (``env-name``, ``fast-lr``, ...), read from YAML
or JSON. :func:`load_config` checks every key before anything runs: an
unknown key, a key of another algorithm than the configuration's
``algorithm``, a value of the wrong type or out of range, or an unregistered
environment id raises :class:`ConfigError` naming the key, the value and
what is expected.

The shared keys are declared in :mod:`maml_rl.config.hyperparameters`, each
algorithm's beside its code (its learner's ``hyperparameters``), and the
``algorithm`` key's values are the registry's (:data:`maml_rl.metalearners.METALEARNERS`):
this module asks it, and so sits above the algorithms. ``python -m maml_rl.app.config_files --markdown``
prints them as the Markdown table of ``docs/training.md``
(:func:`markdown_reference`).
"""

from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from maml_rl.app.config_error import ConfigError
from maml_rl.app.env_builder import build_env
from maml_rl.config.declaration import Check, _name
from maml_rl.config.hyperparameters import EARLIER_SHARED_KEYS, SHARED_KEYS, Hyperparameter, InvalidValue
from maml_rl.utils.echo import echo
from maml_rl.config.yaml_rules import ConfigLoader, check_nesting
from maml_rl.metalearners import DEFAULT_ALGORITHM, METALEARNERS

__all__ = [
    "ALGORITHM_KEY",
    "ConfigError",
    "all_config_keys",
    "FILE_ADAPTERS",
    "apply_overrides",
    "build_env",
    "config_diff",
    "config_keys",
    "load_config",
    "markdown_reference",
    "overridden_env_kwargs",
    "overridden_keys",
    "parse_override",
    "read_config_file",
    "validate_config",
]


#: The key that chooses the meta-learner: a name in the registry, the first one when left out.
ALGORITHM_KEY = Hyperparameter("algorithm", str, DEFAULT_ALGORITHM, Check(_name, "a meta-learner name"),
                               "The meta-learner; its own keys are listed in its section below.")


def _algorithm_keys() -> dict[str, tuple[Hyperparameter, ...]]:
    """Each registered meta-learner's own keys (its ``hyperparameters``), by algorithm name."""
    return {name: tuple(learner.hyperparameters) for name, learner in METALEARNERS.items()}


def config_keys(algorithm: str) -> dict[str, Hyperparameter]:
    """The keys a configuration of ``algorithm`` may hold, in the order a resolved configuration lists them.

    :raises KeyError: ``algorithm`` is not a key of :data:`maml_rl.metalearners.METALEARNERS`.
    """
    return {h.key: h for h in (ALGORITHM_KEY, *SHARED_KEYS, *_algorithm_keys()[algorithm])}


def all_config_keys() -> dict[str, Hyperparameter]:
    """Every key some registered algorithm accepts: ``algorithm``, the shared keys, then each algorithm's own."""
    return {key: h for name in METALEARNERS for key, h in config_keys(name).items()}


#: A config file is a few KB; one far larger is a mistake (or an attack) that would take minutes to parse.
MAX_CONFIG_BYTES = 1 << 20

#: Functions from a file's raw mapping to the one :func:`load_config` reads, applied in order before the
#: overrides (``maml_rl.legacy`` adds one: it leaves out the command-line arguments that pytorch-maml-rl's
#: train.py wrote into its config.json).
FILE_ADAPTERS: list[Callable[[Mapping[str, Any]], Mapping[str, Any]]] = []


def read_config_file(path: str | Path) -> dict:
    """The raw mapping in a YAML (or ``.json``) file, not yet validated.

    :raises ConfigError: the file is missing, unparsable or not a mapping.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {str(path)!r} is {size / 2**20:.1f} MiB, more than a config holds "
                              f"(at most {MAX_CONFIG_BYTES >> 20} MiB): is it the right file?")
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: it is not UTF-8 text ({exc.reason} at byte "
                          f"{exc.start}), so damaged or not a config file; restore it from a copy") from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
            check_nesting(data)
        else:
            data = yaml.load(text, Loader=ConfigLoader)
    except (ValueError, yaml.YAMLError) as exc:  # json.JSONDecodeError is a ValueError
        raise ConfigError(f"cannot parse config file {str(path)!r}: {exc}") from None
    except RecursionError:  # json's decoder, far deeper than check_nesting allows
        raise ConfigError(f"cannot parse config file {str(path)!r}: nested thousands of levels deep, more than "
                          f"a config holds: is it the right file?") from None
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
        raise ConfigError(f"override {echo(text)} must look like KEY=VALUE, e.g. fast-batch-size=10")
    try:
        parsed = yaml.load(value, Loader=ConfigLoader) if value.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot parse the value of override {echo(text)}: {exc}") from None
    return key, parsed


def apply_overrides(config: Mapping[str, Any], overrides: Iterable[tuple[str, Any]]) -> dict:
    """A copy of ``config`` with ``(key, value)`` pairs set; ``env-kwargs.NAME`` keys set one env argument."""
    config = dict(config)
    for key, value in overrides:
        if key.startswith("env-kwargs."):
            env_kwargs = config.get("env-kwargs") or {}
            if not isinstance(env_kwargs, Mapping):
                raise ConfigError(f"cannot set {key}: env-kwargs is {echo(env_kwargs)}, not a mapping")
            config["env-kwargs"] = {**env_kwargs, key.split(".", 1)[1]: value}
        else:
            config[key] = value
    return config


def validate_config(raw: Mapping[str, Any], source: str = "config", set_keys: Iterable[str] = ()) -> dict:
    """Check every key of ``raw`` and return the resolved configuration.

    The result holds every key of :func:`config_keys` of its ``algorithm``, in
    that order, with defaults filled in and numbers normalised (``fast-lr: 1``
    becomes ``1.0``).

    :param raw: the mapping read from a file (and overrides).
    :param source: where ``raw`` comes from, for error messages.
    :param set_keys: the keys whose value came from the command line (``--set``): a problem with one of
        them is said to come from ``--set``, not from ``source``.
    :raises ConfigError: listing every problem found: unknown keys (with the
        closest valid ones), keys of another algorithm, missing keys, values
        of the wrong type or range (with what is expected) and unregistered
        environment ids.
    """
    problems: list[tuple[str | None, str]] = []  # (the key at fault, if one, what is wrong)
    config = {}
    algorithm = _resolve(ALGORITHM_KEY, raw, config, problems)
    sections = _algorithm_keys()
    if "algorithm" in config and algorithm not in sections:
        del config["algorithm"]
        problems.append(("algorithm", f"algorithm: got {echo(algorithm)} ({type(algorithm).__name__}), expected "
                                      f"{ALGORITHM_KEY.expected} (one of: {', '.join(sections)})"))
    # With no valid algorithm, only the shared keys are checked, and no key is called unknown for it.
    accepted = config_keys(algorithm) if algorithm in sections else None
    foreign = False
    for key in raw:
        if accepted is None or key in accepted:
            continue
        if key in EARLIER_SHARED_KEYS and raw[key] == EARLIER_SHARED_KEYS[key]:
            continue  # written by maml_rl 0.1 for every algorithm; dropped, so that those runs load and resume
        owners = [name for name, keys in sections.items() if any(h.key == key for h in keys)]
        if owners:
            foreign = True
            problems.append((key, f"key {echo(key)} is a setting of algorithm {' and '.join(map(repr, owners))}, "
                                  f"not of this configuration's algorithm {algorithm!r}"))
        else:
            close = difflib.get_close_matches(str(key).replace("_", "-"), list(accepted), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append((key, f"unknown key {echo(key)}{hint}"))
    for hyperparameter in (accepted or {h.key: h for h in SHARED_KEYS}).values():
        if hyperparameter is not ALGORITHM_KEY:
            _resolve(hyperparameter, raw, config, problems)
    if accepted is not None:
        # Shared keys an algorithm has no use for: their default is accepted (resolved
        # configs list every key), another value would be silently ignored.
        unused = METALEARNERS[algorithm].unused_shared_keys
        for key, why in unused.items():
            if key in raw and key in config and config[key] != accepted[key].default_value():
                problems.append((key, f"{key}: {echo(raw[key])} has no effect with algorithm {algorithm!r} ({why}); "
                                      f"remove the key"))
        # Keys that only make sense together: the meta-learner says which (before any work starts).
        if not problems:
            problems.extend((None, problem) for problem in METALEARNERS[algorithm].config_problems(config))
    if "env-name" in config:
        problem = _check_env_id(config["env-name"])
        if problem:
            problems.append(("env-name", problem))
    if problems:
        raise ConfigError(_problems_message(problems, source, set(set_keys), algorithm, accepted, foreign))
    return config


def _problems_message(problems: list[tuple[str | None, str]], source: str, set_keys: set[str], algorithm: Any,
                      accepted: Mapping[str, Hyperparameter] | None, foreign: bool) -> str:
    """The error of :func:`validate_config`: each problem with where it comes from, ``--set`` or ``source``."""
    from_set = [key in set_keys for key, _ in problems]
    if all(from_set):
        header = f"invalid --set option{'s' if len(problems) > 1 else ''} (applied to {source}):"
    elif any(from_set):
        header = f"invalid configuration in {source} and its --set options:"
    else:
        header = f"invalid configuration in {source}:"
    lines = [text if key not in set_keys else f"--set {text}" if text.startswith(f"{key}:")
             else f"--set {key}: {text}" for key, text in problems]
    message = header + "\n  - " + "\n  - ".join(lines)
    if foreign or any(text.startswith("unknown key") for _, text in problems):
        message += f"\nvalid keys for algorithm {algorithm!r} are: {', '.join(accepted)}"
    return message


def _resolve(hyperparameter: Hyperparameter, raw: Mapping[str, Any], config: dict,
             problems: list[tuple[str | None, str]]) -> Any:
    """Check ``raw``'s value of one key into ``config`` (its default when left out); a problem is appended."""
    key = hyperparameter.key
    if key not in raw:
        if hyperparameter.required:
            problems.append((key, f"missing key {key!r}: expected {hyperparameter.expected}"))
        else:
            config[key] = hyperparameter.default_value()
    else:
        try:
            config[key] = hyperparameter.check.convert(raw[key])
        except InvalidValue as exc:
            detail = f" ({exc})" if str(exc) else ""
            got = f"{echo(raw[key])} ({type(raw[key]).__name__})"
            problems.append((key, f"{key}: got {got}, expected {hyperparameter.expected}{detail}"))
    return config.get(key)


def _check_env_id(env_id: str) -> str | None:
    import maml_rl.envs

    try:
        maml_rl.envs.make_env(env_id)
    except maml_rl.envs.UnknownEnvError as exc:
        return f"env-name: {exc}"
    return None


def load_config(path: str | Path, overrides: Iterable[tuple[str, Any]] = ()) -> dict:
    """Read, override and validate the configuration in ``path``.

    :param path: a YAML file (or a ``config.json`` written by ``train.py``, this package's or
        pytorch-maml-rl's: the command-line arguments that one wrote in are left out).
    :param overrides: ``(key, value)`` pairs applied before validation (``--set``: named as such in errors).
    :raises ConfigError: see :func:`validate_config`.
    """
    overrides = list(overrides)
    raw: Mapping[str, Any] = read_config_file(path)
    for adapt in FILE_ADAPTERS:
        raw = adapt(raw)
    raw = apply_overrides(raw, overrides)
    return validate_config(raw, source=str(path), set_keys=overridden_keys(overrides))


def overridden_keys(overrides: Iterable[tuple[str, Any]]) -> set[str]:
    """The configuration keys that ``(key, value)`` overrides set (``env-kwargs.NAME`` sets ``env-kwargs``)."""
    return {key.split(".", 1)[0] for key, _ in overrides}


def overridden_env_kwargs(overrides: Iterable[tuple[str, Any]]) -> set[str]:
    """The names of env-kwargs that ``(key, value)`` overrides set: for errors that name ``--set`` as their source."""
    names = set()
    for key, value in overrides:
        if key.startswith("env-kwargs."):
            names.add(key.split(".", 1)[1])
        elif key == "env-kwargs" and isinstance(value, Mapping):
            names.update(value)
    return names


def config_diff(a: Mapping[str, Any], b: Mapping[str, Any], ignore: Iterable[str] = ()) -> list[str]:
    """Keys whose values differ between two configurations, as ``"key: a -> b"`` lines."""
    ignore = set(ignore)
    keys = [key for key in dict.fromkeys([*a, *b]) if key not in ignore]
    return [f"{key}: {echo(a.get(key))} -> {echo(b.get(key))}" for key in keys if a.get(key) != b.get(key)]


def _markdown_default(hyperparameter: Hyperparameter) -> str:
    if hyperparameter.required:
        return "required"
    return f"`{json.dumps(hyperparameter.default)}`"


def _markdown_text(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*")


def markdown_reference() -> str:
    """Every configuration key as Markdown tables: the shared keys, then each algorithm's own (its learner's
    ``hyperparameters``); a row gives the key, the values it accepts, its default (or "required") and what it does."""
    sections = [("Keys of every algorithm", (ALGORITHM_KEY, *SHARED_KEYS))]
    sections += [(f"Keys of `algorithm: {name}` only", keys) for name, keys in _algorithm_keys().items()]
    lines = []
    for title, keys in sections:
        lines += ["" if lines else None, f"**{title}**", "", "| Key | Type | Default | Description |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| `{h.key}` | {_markdown_text(h.expected)} | {_markdown_default(h)} | {_markdown_text(h.help)} |" for h in keys]
    return "\n".join(line for line in lines if line is not None) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m maml_rl.app.config_files",
                                     description="Reference of the configuration keys of train.py.")
    parser.add_argument("--markdown", action="store_true", help="print it as Markdown tables (docs/training.md)")
    parser.parse_args(argv)
    # Markdown is the only format so far; the flag names it for scripts.
    print(markdown_reference(), end="")


if __name__ == "__main__":
    main()
