"""The environment a validated configuration names, built once (for its spaces, or to check its env-kwargs),
with errors that name the key at fault: an unknown env id, an argument the env does not take (with the
closest one it does), a missing optional extra, an env that is not a meta-learning one."""

from __future__ import annotations

import difflib
import re
from typing import Any, Iterable, Mapping

from maml_rl.app.config_error import ConfigError
from maml_rl.envs.meta_env import check_meta_env
from maml_rl.utils.echo import echo

__all__ = ["build_env"]


def build_env(config: Mapping[str, Any], set_on_command_line: Iterable[str] = ()):
    """The environment of a validated configuration, built once (e.g. for its spaces).

    :param set_on_command_line: names of env-kwargs given with ``--set`` (:func:`overridden_env_kwargs`),
        named as such when the env refuses one.
    :raises ConfigError: the environment rejects ``env-kwargs`` (an unknown one
        named, with the closest it takes), or it is not a meta-learning
        environment (no ``sample_tasks``/``reset_task``).
    """
    import maml_rl.envs

    name, kwargs = config["env-name"], config["env-kwargs"]
    try:
        env = maml_rl.envs.make_env(name, **kwargs)()
    except maml_rl.envs.UnknownEnvError as exc:
        raise ConfigError(f"env-name: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(_env_kwargs_problem(name, kwargs, exc, set(set_on_command_line))) from exc
    except ImportError as exc:
        # An optional extra's env (Meta-World): the message says what to install.
        raise ConfigError(f"env-name: {name}: {exc}") from None
    try:
        check_meta_env(env)
    except TypeError as exc:
        env.close()
        raise ConfigError(f"env-name: {echo(name)}: {exc} maml_rl provides: {', '.join(maml_rl.envs.ENV_IDS)}") from None
    return env


def _env_kwargs_problem(name: str, kwargs: Mapping[str, Any], exc: Exception, set_on_command_line: set[str]) -> str:
    """Why ``name`` cannot be built with ``kwargs``: an argument it does not take, named with the closest it does."""
    # gymnasium repeats the kwargs after the env's own message: keep the env's message only.
    detail = str(exc).split(" was raised from the environment creator")[0]
    unexpected = re.search(r"unexpected keyword argument '(\w+)'", detail)
    if not unexpected:
        return f"env-kwargs: {name} cannot be built with {echo(dict(kwargs))}: {detail}"
    wrong = unexpected.group(1)
    taken = _env_arguments(name)
    close = difflib.get_close_matches(wrong, taken, n=1, cutoff=0.6)
    where = f"--set env-kwargs.{wrong}" if wrong in set_on_command_line else "env-kwargs"
    return (f"{where}: {name} takes no argument {echo(wrong)}" + (f" (did you mean {close[0]!r}?)" if close else "")
            + (f"; it takes: {', '.join(taken)}" if taken else ""))


def _env_arguments(name: str) -> list[str]:
    """The keyword arguments ``gymnasium.make(name, ...)`` passes on to the env, as far as its signature tells,
    and ``max_episode_steps``, which gymnasium.make takes itself."""
    import inspect

    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    creator = gymnasium.spec(name).entry_point
    creator = load_env_creator(creator) if isinstance(creator, str) else creator
    functions = [klass.__init__ for klass in inspect.getmro(creator)] if inspect.isclass(creator) else [creator]
    names = []
    for function in functions:
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):
            continue
        names += [p.name for p in parameters if p.name not in ("self", "task")
                  and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break  # what the classes further up take is not reachable from here
    return list(dict.fromkeys([*names, "max_episode_steps"]))
