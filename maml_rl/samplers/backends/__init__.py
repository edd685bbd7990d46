"""The backends: where a rollout's envs run (``local``: this machine; ``ray``: a Ray cluster)."""
