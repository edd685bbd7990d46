"""The rollout layer: one rollout request run on an env pool, with the policy in this process.

Seeds and noise (``noise``), the request (``request``), the policy on every
slot (``actions``) and the lockstep and partial loops (``loop``).
"""
