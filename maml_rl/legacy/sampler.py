"""pytorch-maml-rl's sampler calls: the ``env=`` argument, ``sample``, ``sample_async`` and ``sample_wait``.

:func:`adapt` attaches them to :class:`~maml_rl.samplers.MultiTaskSampler`
when ``maml_rl.samplers.sampler`` is imported (:mod:`maml_rl.legacy.moved`);
the sampler itself knows none of them. Each is an adapter over the new API:

- ``sample`` and ``sample_async`` are
  ``maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...)``, which fits
  the sampler's ``baseline`` (the constructor's fifth argument, kept) as the
  reference's sampler did;
- the reference ran the sampling in background threads and returned asyncio
  futures, so that its ``MAMLTRPO.step`` could start on the first tasks while
  others were still being sampled. Here the sampling is already parallel over
  the workers; ``sample_async`` returns the finished episodes in the futures'
  place, which is all its callers did with them (``step(*futures)``, then
  ``sample_wait(futures)``);
- ``MultiTaskSampler(..., env=env)`` accepts an env built from the same id (the
  sampler builds its own).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from maml_rl.legacy.warn import warn_once

__all__ = ["adapt", "check_env_argument", "sample", "sample_async", "sample_wait"]


def check_env_argument(env: Any, sampler_env: Any) -> None:
    """Accept the reference's ``env=``: an env built from the same id, which the sampler already builds itself."""
    warn_once("MultiTaskSampler(..., env=env)",
              "leave env out: the sampler builds its env from env_name and env_kwargs (or from env_fn=, for an "
              "env of your own)", stacklevel=4)
    given = type(getattr(env, "unwrapped", env))
    built = type(sampler_env.unwrapped)
    if given is not built:
        raise TypeError(
            f"MultiTaskSampler(..., env=...) got a {given.__name__} but env_name builds a {built.__name__}: the "
            "sampler draws its tasks from the env it builds, so env= is only accepted for the same env. Leave "
            "env out, or pass env_fn=<a function returning your env> instead of env_name"
        )


def _accepting_env(init: Callable[..., None]) -> Callable[..., None]:
    """``MultiTaskSampler.__init__`` that also takes the reference's ``env=`` (checked, then unused)."""

    @functools.wraps(init)
    def __init__(self, *args: Any, env: Any = None, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if env is not None:
            try:
                check_env_argument(env, self.env)
            except BaseException:
                self.close()
                raise

    __init__.__legacy_env__ = True
    return __init__


def _sample_adapt_sample(sampler: Any, tasks: Any, *args: Any, **kwargs: Any) -> tuple:
    # The one call from the old API into the algorithm layer, made when it is used.
    from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

    return sample_adapt_sample(sampler, tasks, *args, **kwargs)


def sample(self: Any, tasks: Any, *args: Any, **kwargs: Any) -> tuple:
    """pytorch-maml-rl's MAML loop on the sampler: roll out, adapt, roll out again.

    Deprecated: the loop is the algorithm's, not the sampler's. Call
    ``maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...)`` (the same
    arguments, the same bits) or a learner's ``learner.sample(sampler, tasks)``.
    """
    warn_once("MultiTaskSampler.sample",
              "use maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...) with the same arguments (or "
              "learner.sample(sampler, tasks)): adapting is the meta-learner's work, not the sampler's")
    return _sample_adapt_sample(self, tasks, *args, **kwargs)


def sample_async(self: Any, tasks: Any, **kwargs: Any) -> tuple:
    """pytorch-maml-rl's asynchronous ``sample``; returns its finished ``(train_episodes, valid_episodes)``."""
    warn_once("MultiTaskSampler.sample_async",
              "use maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...), which returns (train_episodes, "
              "valid_episodes) when they are sampled; sample_async returns those finished episodes too, not "
              "futures")
    return _sample_adapt_sample(self, tasks, **kwargs)


def sample_wait(self: Any, episodes_futures: Any) -> tuple:
    """The ``(train_episodes, valid_episodes)`` that ``sample_async`` returned, as they are."""
    warn_once("MultiTaskSampler.sample_wait",
              "drop it: maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...) returns (train_episodes, "
              "valid_episodes) directly")
    if not (isinstance(episodes_futures, tuple) and len(episodes_futures) == 2):
        raise TypeError("sample_wait() takes what sample_async() returned, a (train_episodes, valid_episodes) "
                        f"pair; got {type(episodes_futures).__name__}")
    return episodes_futures


def adapt(module: Any) -> None:
    """Give ``module.MultiTaskSampler`` pytorch-maml-rl's ``env=`` argument and sampling methods."""
    cls = module.MultiTaskSampler
    if not getattr(cls.__init__, "__legacy_env__", False):
        cls.__init__ = _accepting_env(cls.__init__)
    for method in (sample, sample_async, sample_wait):
        setattr(cls, method.__name__, method)
