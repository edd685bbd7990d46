"""What multiprocessing's forkserver imports once, when it starts, for every sampler worker it forks.

``processes.preload_worker_modules`` adds this module to the server's preload list: each worker then inherits the
worker's modules (the sampler's and the vector env's, gymnasium, NumPy; no torch) instead of importing them again,
about 0.4 CPU-s a worker on a 2-core machine.

The server ignores Ctrl-C, but only once its preloading is done: a Ctrl-C to the process group while it imported
these printed a KeyboardInterrupt traceback from it. SIGINT is ignored for the imports and put back after them, so
that the server keeps its own handling (and its children theirs). ``processes.start_forkserver`` starts the server
with SIGINT blocked, which covers its interpreter's start before this module; it is unblocked here once ignored,
which drops a Ctrl-C that came meanwhile.
"""

import signal
import threading

_previous = None
if threading.current_thread() is threading.main_thread():
    _previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
try:
    import maml_rl.samplers.workers.entry  # noqa: F401
    import maml_rl.samplers.workers.vector_child_env  # noqa: F401
finally:
    if _previous is not None:
        signal.signal(signal.SIGINT, _previous)
