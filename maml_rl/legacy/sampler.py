"""pytorch-maml-rl's sampler calls: the ``env=`` and ``baseline`` arguments, ``sample``, ``sample_async`` and
``sample_wait``.

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
    """``sample``, ``sample_async``, ``sample_wait`` and the ``baseline`` fit for
    :class:`~maml_rl.samplers.MultiTaskSampler`."""

    def sample(self, tasks: Any, *args: Any, **kwargs: Any) -> tuple:
        """pytorch-maml-rl's MAML loop on the sampler: roll out, adapt, roll out again.

        Deprecated: the loop is the algorithm's, not the sampler's. Call
        ``maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...)`` (the same
        arguments, the same bits) or a learner's ``learner.sample(sampler, tasks)``.
        """
        warn_once("MultiTaskSampler.sample",
                  "use maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...) with the same arguments (or "
                  "learner.sample(sampler, tasks)): adapting is the meta-learner's work, not the sampler's")
        return self._sample_adapt_sample(tasks, *args, **kwargs)

    def _check_legacy_fit(self, averaging: str) -> None:
        """``rollout(averaging=...)`` is checked before the call counter moves, baseline or not."""
        from maml_rl.data.episodes import check_loss_averaging

        check_loss_averaging(averaging)

    def _fit_legacy_baseline(self, episodes: Any, gae_lambda: float, averaging: str) -> None:
        """pytorch-maml-rl's sampler fitted the baseline it was given and set the advantages; so does
        ``rollout`` with ``baseline=``, from here, so that the sampler itself knows no baseline."""
        from maml_rl.data.baseline import fit_advantages

        fit_advantages(episodes, self.baseline, gae_lambda=gae_lambda, averaging=averaging)

    def _sample_adapt_sample(self, tasks: Any, *args: Any, **kwargs: Any) -> tuple:
        # The one call from the old API into the algorithm layer, made when it is used.
        from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

        return sample_adapt_sample(self, tasks, *args, **kwargs)

    def sample_async(self, tasks: Any, **kwargs: Any) -> tuple:
        """pytorch-maml-rl's asynchronous :meth:`sample`; returns its finished ``(train_episodes, valid_episodes)``."""
        warn_once("MultiTaskSampler.sample_async",
                  "use maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...), which returns (train_episodes, "
                  "valid_episodes) when they are sampled; sample_async returns those finished episodes too, not "
                  "futures")
        return self._sample_adapt_sample(tasks, **kwargs)

    def sample_wait(self, episodes_futures: Any) -> tuple:
        """The ``(train_episodes, valid_episodes)`` that :meth:`sample_async` returned, as they are."""
        warn_once("MultiTaskSampler.sample_wait",
                  "drop it: maml_rl.metalearners.sample_adapt_sample(sampler, tasks, ...) returns (train_episodes, "
                  "valid_episodes) directly")
        if not (isinstance(episodes_futures, tuple) and len(episodes_futures) == 2):
            raise TypeError("sample_wait() takes what sample_async() returned, a (train_episodes, valid_episodes) "
                            f"pair; got {type(episodes_futures).__name__}")
        return episodes_futures
