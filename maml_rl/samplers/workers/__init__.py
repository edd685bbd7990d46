"""The worker layer: env pools, the worker process, the steppers, shared memory.

Torch-free (a test enforces it), so spawned workers start fast and forked
ones hold no torch state. Nothing here imports from the layers above.
"""
