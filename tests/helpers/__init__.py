"""What the tests share besides fixtures: test envs, naive references and small utilities.

The tests import these as ``helpers.<module>``: ``tests/`` is on ``sys.path`` because
``tests/conftest.py`` lives there (pytest's default "prepend" import mode puts a conftest's
folder on the path). Worker processes import them too: spawn and forkserver workers unpickle an
env factory by module reference with the parent's ``sys.path``; a script run in a subprocess puts
:data:`TESTS` on its own path first; Ray's actors get them by value (``cloudpickle.register_pickle_by_value``).

* ``sampler_envs``, ``bad_envs``, ``contract_envs``, ``differential_envs``, ``property_envs``: meta-envs
  for the sampler tests; ``samplers``: the samplers of ``sampler_envs`` and ``differential_envs`` that
  several files build (the ``probe_sampler`` and ``drift_sampler`` fixtures);
* ``naive_sampler``, ``naive_trials``: plain-loop references for rollouts and trials;
  ``differential``, ``differential_trials``: the shapes and checks of the differential tests against them;
* ``vector_envs``: plain gymnasium envs of every space for the ``MultiTaskVectorEnv`` tests;
* ``episodes``: ``BatchEpisodes`` built by hand;
* ``learners``: ``RandomSearch``, a meta-learner of the tests' own, registered for a test by one line;
* ``scripts`` (train.py, test.py and tools/ as modules), ``runs`` (training runs and their files, the small
  run of each algorithm behind the ``reference_runs`` fixture), ``process_utils`` (watching real processes).

This file imports nothing heavy: a worker that unpickles ``helpers.sampler_envs.make_probe_env`` imports it
first, and some tests check that the workers never load torch.
"""

from pathlib import Path

#: The ``tests/`` folder: a subprocess puts it on ``sys.path`` to import ``helpers``.
TESTS = Path(__file__).resolve().parent.parent
#: The repository.
ROOT = TESTS.parent
