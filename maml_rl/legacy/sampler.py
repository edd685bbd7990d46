"""pytorch-maml-rl's sampler calls: the ``env=`` argument, ``sample_async`` and ``sample_wait``.

The reference ran the sampling in background threads and returned asyncio
futures, so that its ``MAMLTRPO.step`` could start on the first tasks while
others were still being sampled. Here ``sample`` is already parallel over the
workers and returns finished episodes; ``sample_async`` returns those
finished episodes in the futures' place, which is all its callers did with them
(``step(*futures)``, then ``sample_wait(futures)``).
"""

from __future__ import annotations

from typing import Any

from maml_rl.legacy.warn import warn_once

__all__ = ["LegacySamplerMethods", "check_env_argument"]


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


class LegacySamplerMethods:
    """``sample_async`` and ``sample_wait`` for :class:`~maml_rl.samplers.MultiTaskSampler`."""

    def sample_async(self, tasks: Any, **kwargs: Any) -> tuple:
        """pytorch-maml-rl's name for :meth:`sample`; returns its finished ``(train_episodes, valid_episodes)``."""
        warn_once("MultiTaskSampler.sample_async",
                  "use sampler.sample(tasks, ...), which returns (train_episodes, valid_episodes) when they are "
                  "sampled; sample_async returns those finished episodes too, not futures")
        return self.sample(tasks, **kwargs)

    def sample_wait(self, episodes_futures: Any) -> tuple:
        """The ``(train_episodes, valid_episodes)`` that :meth:`sample_async` returned, as they are."""
        warn_once("MultiTaskSampler.sample_wait",
                  "drop it: sampler.sample(tasks, ...) returns (train_episodes, valid_episodes) directly")
        if not (isinstance(episodes_futures, tuple) and len(episodes_futures) == 2):
            raise TypeError("sample_wait() takes what sample_async() returned, a (train_episodes, valid_episodes) "
                            f"pair; got {type(episodes_futures).__name__}")
        return episodes_futures
