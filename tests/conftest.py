"""Shared test set-up: the markers, and the fixtures several test files use.

Markers (``pytest -m "not slow"`` is the quick loop), set in the test files themselves:
``pytestmark = [...]`` for a whole module, ``@pytest.mark.slow`` on a test:

* ``processes``: starts ChildEnv worker processes or scripts in subprocesses;
* ``ray``: starts a Ray cluster on this machine;
* ``metaworld``: builds Meta-World envs;
* ``mujoco_version``: its outcome depends on the installed MuJoCo (whether it has ``mujoco.batch``, what it
  warns); CI runs these, and the ``metaworld`` tests, in its MuJoCo 3.3 venv too;
* ``slow``: takes more than a few seconds on 2 cores (all but a few ``ray`` and
  ``metaworld`` tests, and each test marked so, measured with ``--durations``).

Fixtures:

* ``small_config``: ``small_config(folder, name="small.yaml", **changes) -> Path`` writes a 2D navigation
  config shrunk to a fraction of a second per iteration (``small_config.values``) with ``changes``;
  ``small_rl2_config(folder, **changes)`` the same for RL²-PPO;
* ``reference_runs``: ``reference_runs(algorithm) -> Path``, one small uninterrupted train.py run per
  algorithm (``helpers.runs.ReferenceRuns``), trained the first time a test asks for it and kept for the
  session: ``tests/metalearners/test_learner_contract.py`` compares its runs with them, and the algorithms'
  own files read their metrics and checkpoints;
* ``probe_sampler``, ``drift_sampler``: the samplers several files build alike (``helpers.samplers``).

Shared code that is not a fixture is in ``helpers/`` (test envs, naive references, ``BatchEpisodes``
built by hand in ``helpers.episodes``, train.py runs in ``helpers.runs``...): test files import it as
``helpers.<module>``, which works because this file's folder is on ``sys.path``. No test file imports
this file or another test file.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

MARKERS = (("slow", "takes more than a few seconds on 2 cores"),
           ("processes", "starts worker processes or subprocesses"),
           ("ray", "starts a Ray cluster on this machine"),
           ("metaworld", "builds Meta-World envs"),
           ("mujoco_version", "its outcome depends on the installed MuJoCo version"))

# 2D navigation, shrunk to a fraction of a second per iteration: the config of the train/test script tests.
SMALL_CONFIG = MappingProxyType({
    "env-name": "2DNavigation-v0",
    "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10},
    "gamma": 0.99,
    "hidden-sizes": [16, 16],
    "nonlinearity": "tanh",
    "fast-batch-size": 4,
    "fast-lr": 0.1,
    "num-batches": 3,
    "meta-batch-size": 3,
})

# RL²-PPO's keys over SMALL_CONFIG (whose fast-lr, MAML's, is left out).
RL2_CHANGES = MappingProxyType({"algorithm": "rl2-ppo", "episodes-per-trial": 3, "gru-size": 8, "ppo-epochs": 2,
                                "ppo-minibatches": 2, "bptt-chunk": 7, "gae-lambda": 0.95, "num-batches": 2})


def pytest_configure(config):
    for name, meaning in MARKERS:
        config.addinivalue_line("markers", f"{name}: {meaning}")
    # A shell starts a background job (`pytest ... &` in a script, as a CI runner may) with SIGINT ignored, and
    # every process the tests start would inherit that: the tests that send Ctrl-C to a script would then fail
    # by how pytest was launched. A Python handler is not inherited across exec, so the scripts start with
    # SIGINT's default, as from a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _share_the_cores_among_workers()


def _share_the_cores_among_workers():
    """Under pytest-xdist, each worker's torch (and the scripts it starts) uses its share of the cores.

    torch's default is one thread per core in every process. With one xdist worker per core, a worker's second
    thread then waits for a core the other worker holds: a small batched product that takes 7 us on two idle
    cores took 8 ms beside a busy one (a scheduler tick), and tests/policies, tests/metalearners and
    tests/samplers/test_trials.py took 96 s on two workers instead of 41 s.
    A test that varies the thread count on purpose still sets it itself."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2 or "OMP_NUM_THREADS" in os.environ:
        return
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = threads
    import torch

    torch.set_num_threads(int(threads))


class SmallConfig:
    """``small_config(folder, name="small.yaml", **changes) -> Path``: :data:`SMALL_CONFIG` with
    ``changes`` (``**{"num-batches": 1}``), written as YAML into ``folder``; ``.values`` is the config."""

    values = SMALL_CONFIG

    def __call__(self, folder, name: str = "small.yaml", **changes) -> Path:
        from maml_rl.app.config_files import config_keys
        from maml_rl.metalearners import DEFAULT_ALGORITHM, METALEARNERS

        values = {**SMALL_CONFIG, **changes}
        algorithm = values.get("algorithm", DEFAULT_ALGORITHM)
        if algorithm in METALEARNERS:  # SMALL_CONFIG's keys of MAML's inner loop are not every algorithm's
            accepted = config_keys(algorithm)
            values = {key: value for key, value in values.items() if key in accepted or key in changes}
        path = Path(folder) / name
        path.write_text(yaml.safe_dump(values))
        return path

    def rl2(self, folder, **changes) -> Path:
        """The small config for RL²-PPO (:data:`RL2_CHANGES`, then ``changes``), as ``small.yaml``."""
        return self(folder, **{**RL2_CHANGES, **changes})


@pytest.fixture(scope="session")
def small_config():
    """See :class:`SmallConfig` (session-scoped: module fixtures that train a run use it)."""
    return SmallConfig()


@pytest.fixture(scope="session")
def small_rl2_config(small_config):
    """``small_rl2_config(folder, **changes) -> Path``: the small config for RL²-PPO."""
    return small_config.rl2


@pytest.fixture(scope="session")
def reference_runs(tmp_path_factory):
    """``reference_runs(algorithm) -> Path``: the algorithm's small run, trained once per session
    (:class:`helpers.runs.ReferenceRuns`; ``.config(algorithm, folder)`` writes its config)."""
    from helpers.runs import ReferenceRuns

    return ReferenceRuns(tmp_path_factory.mktemp("reference-runs"))


@pytest.fixture
def probe_sampler():
    """``probe_sampler(batch_size=2, policy=None, baseline=None, *, seed=0, **kwargs)``: a MultiTaskSampler of
    ``helpers.sampler_envs.ProbeEnv`` envs (``helpers.samplers.probe_sampler``)."""
    from helpers.samplers import probe_sampler

    return probe_sampler


@pytest.fixture
def drift_sampler():
    """``drift_sampler(discrete, horizon, batch_size, batched=True, *, policy=None, baseline=None, seed=11, **kwargs)``:
    a MultiTaskSampler of the differential tests' envs under the naive reference's policy
    (``helpers.samplers.drift_sampler``)."""
    from helpers.samplers import drift_sampler

    return drift_sampler
