"""How train.py and test.py run: errors, Ctrl-C, SIGTERM and SIGHUP end them cleanly.

A ``ConfigError`` prints ``error: ...`` and exits 2; a file that could not be
written (a full disk) or an env step that outlived ``--step-timeout`` prints what happened and how to
continue, and exits 1; so does a policy whose actions are not finite numbers (``PolicyOutputError``:
its parameters diverged), with what to do about it. Ctrl-C, SIGTERM (kill, a
job scheduler) and SIGHUP (the terminal closed) unwind the script like an
exception, so that every ``with`` block (the sampler's workers and shared
memory included) cleans up, then exit with the conventional status 128 + the
signal number. SIGINT is honoured even when the script was started with it
ignored (a background job of a shell script).
"""

from __future__ import annotations

import signal
import sys
import warnings
from typing import Any, Callable

from maml_rl.app.config_files import ConfigError
from maml_rl.app.runs.files import RunWriteError
from maml_rl.app.startup import SignalExit, install_signal_handlers
from maml_rl.samplers.errors import PolicyOutputError, StepTimeoutError

__all__ = ["EVALUATION_DIVERGED", "SignalExit", "TRAINING_DIVERGED", "run_script"]

# Seconds an env worker may take over one step or reset in train.py and test.py (the library's
# default is no limit): far beyond any env shipped here, short of a run that sits silent for hours.
DEFAULT_STEP_TIMEOUT = 600.0

#: What to do when train.py's policy outputs what no env should get (``run_script``'s ``on_policy_error``).
TRAINING_DIVERGED = (
    "The policy's parameters (or those adapted from them) diverged: a step size too large for this env does it. "
    "Lower fast-lr (the inner step) or max-kl (the meta step) and train again, in a new --output-folder or with "
    "--overwrite: --resume would take the same steps again.")

#: The same for test.py, whose policy comes from a file.
EVALUATION_DIVERGED = (
    "The policy evaluated has diverged, before or after its adaptation steps (its run's step sizes, fast-lr or "
    "max-kl, were too large for the env), or its file is damaged. Evaluate an earlier policy of the run, or "
    "train again with smaller steps.")


def _stopping(message: str, on_stop: str | Callable[[], str]) -> None:
    """The run is over and cleaned up: further signals must not interrupt the
    exit (nor the making of ``on_stop``'s text), and the terminal may be gone (SIGHUP)."""
    _ignore_stop_signals()
    try:
        print(message + (on_stop() if callable(on_stop) else on_stop), file=sys.stderr)
    except OSError:
        pass


def run_script(main: Callable[[], Any], on_stop: str | Callable[[], str] = "", on_policy_error: str = "") -> None:
    """Run a script's ``main()`` and exit as described above.

    :param on_stop: appended to the message printed when a signal stops the run
        (e.g. how to continue it), or a function that returns it, called then.
    :param on_policy_error: appended to a ``PolicyOutputError``'s message: what to do about it
        (:data:`TRAINING_DIVERGED`, :data:`EVALUATION_DIVERGED`).
    """
    install_signal_handlers()
    # DeprecationWarnings are hidden outside __main__; the package's own (an old config.json's) should be seen.
    warnings.filterwarnings("default", category=DeprecationWarning, module=r"maml_rl(\.|$)")
    try:
        main()
    except ConfigError as error:
        _stopping(f"error: {error}", "")
        sys.exit(2)
    except (RunWriteError, StepTimeoutError) as error:
        # The run itself is intact (the last finished iteration's checkpoint): say so and how to go on.
        _stopping(f"error: {error}", on_stop)
        sys.exit(1)
    except PolicyOutputError as error:
        # The message names the step, the slot and the task: a traceback into the sampler would add nothing.
        print(f"error: {error}" + (f"\n{on_policy_error}" if on_policy_error else ""), file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        _stopping("interrupted", on_stop)
        sys.exit(130)
    except SignalExit as stop:
        _stopping(f"stopped by {stop.signal_name}", on_stop)
        sys.exit(stop.code)
    # Done: from here on a signal could only meet the interpreter's shutdown, which restores the default
    # actions first, and turn a finished run's exit status into a death by that signal.
    _ignore_stop_signals()


def _ignore_stop_signals() -> None:
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


def add_sampler_arguments(group, cpus: int) -> None:
    """The options of where sampling runs, shared by train.py and test.py."""
    group.add_argument("--num-workers", type=int, default=None,
        help="environment worker processes (per Ray actor with --backend ray); 0 steps the environments in "
             "the sampling process itself (default: for the MuJoCo envs on the fast path, that process with "
             "one mujoco.batch thread per CPU; otherwise one process per CPU, here "
             f"{cpus})")
    group.add_argument("--backend", choices=("local", "ray"), default="local",
        help="local: this machine; ray: sampling actors across a Ray cluster, one per node "
             "(pip install -e \".[ray]\"; see docs/ray.md). The episodes are the same "
             "bit for bit, so a run may resume on either (default: local)")
    group.add_argument("--ray-address", type=str, default=None, metavar="auto|HOST:PORT",
        help="the Ray cluster to join (default: the one RAY_ADDRESS names, else a new one on this machine)")
    group.add_argument("--ray-actors", type=int, default=None,
        help="number of Ray sampling actors (default: one per node, or per --ray-cpus-per-actor CPUs)")
    group.add_argument("--ray-cpus-per-actor", type=int, default=None,
        help="CPUs of each Ray sampling actor (default: all of its node's)")
    group.add_argument("--step-timeout", type=float, default=DEFAULT_STEP_TIMEOUT, metavar="SECONDS",
        help="stop with StepTimeoutError, naming the slot, the task and the worker, when an environment worker "
             "process takes longer than this over one step or reset; 0 waits forever. Steps in the sampling "
             f"process itself (--num-workers 0) cannot be interrupted (default: {DEFAULT_STEP_TIMEOUT:g})")


def sampler_options(parser, args) -> dict:
    """The MultiTaskSampler keyword arguments of :func:`add_sampler_arguments`'s options, checked."""
    if args.num_workers is not None and args.num_workers < 0:
        parser.error(f"--num-workers must be >= 0, got {args.num_workers}")
    if not 0 <= args.step_timeout < float("inf"):  # also refuses nan
        parser.error(f"--step-timeout must be a number of seconds >= 0 (0: wait forever), got {args.step_timeout}")
    step_timeout = args.step_timeout or None
    for name in ("ray_actors", "ray_cpus_per_actor"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    ray_options = {"ray_address": args.ray_address, "ray_actors": args.ray_actors,
                   "ray_cpus_per_actor": args.ray_cpus_per_actor}
    if args.backend != "ray":
        given = [f"--{name.replace('_', '-')}" for name, value in ray_options.items() if value is not None]
        if given:
            parser.error(f"{', '.join(given)} need(s) --backend ray")
        return {"num_workers": args.num_workers, "step_timeout": step_timeout}
    return {"num_workers": args.num_workers, "step_timeout": step_timeout, "backend": "ray", **ray_options}
