"""Shared test set-up: markers by what a test needs, and the small configs.

Markers (``pytest -m "not slow"`` is the quick loop, about two minutes on 2 cores):

* ``processes``: starts ChildEnv worker processes or scripts in subprocesses;
* ``ray``: starts a Ray cluster on this machine;
* ``metaworld``: builds Meta-World envs;
* ``slow``: takes more than a few seconds on 2 cores (every ``ray`` and
  ``metaworld`` test, and the tests named in ``SLOW``).
"""

from __future__ import annotations

from pathlib import Path

import yaml

# Markers by test module.
MODULE_MARKERS = {
    "test_ray_backend.py": ("ray", "slow", "processes"),
    "test_metaworld.py": ("metaworld", "slow"),
    "test_metaworld_fast.py": ("metaworld", "slow"),
    "test_sampler_processes.py": ("processes",),
    "test_sampler_failures.py": ("processes",),
    "test_doc_examples.py": ("processes",),
}
# Test functions (by name, without parameters) of several seconds each on 2 cores, measured with --durations.
SLOW = {
    # subprocess scripts under each start method and signal
    "test_signal_while_sampling_exits_without_orphans",
    "test_hangup_of_a_script_without_handlers_leaves_nothing",
    "test_train_py_ends_cleanly_on_sigterm_and_sighup",
    "test_second_ctrl_c_during_shutdown_does_not_abandon_it",
    "test_quick_double_ctrl_c_in_train_py",
    "test_env_registered_in_the_main_module_makes_workers_import_it",
    "test_missing_main_guard_needed_by_the_envs_is_explained",
    "test_workers_import_no_torch_when_the_main_module_does",
    "test_env_and_tasks_defined_in_the_main_module",
    "test_script_without_main_guard_runs",
    "test_ctrl_c_while_workers_start_ends_them_at_once",
    "test_command_line",
    "test_command_line_config_error",
    "test_ctrl_c_prints_the_command_that_continues_the_run",
    "test_ctrl_c_while_importing_exits_quietly",
    # many rollouts in a row
    "test_partial_mode_survives_many_calls_in_a_row",
    "test_many_calls_leak_no_fds_or_processes",
    # MuJoCo envs over every start method, shape and layout
    "test_fast_path_under_each_start_method",
    "test_fast_path_degenerate_shapes",
    "test_without_mujoco_batch_the_per_env_path_is_used_with_one_log_line",
    "test_fast_path_through_sample_and_per_task_parameters",
    "test_fast_path_keeps_the_envs_time_limit_and_end_reasons",
}

# 2D navigation, shrunk to a fraction of a second per iteration: the config of the train/test script tests.
SMALL_CONFIG = {
    "env-name": "2DNavigation-v0",
    "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10},
    "gamma": 0.99,
    "hidden-sizes": [16, 16],
    "nonlinearity": "tanh",
    "fast-batch-size": 4,
    "fast-lr": 0.1,
    "num-batches": 3,
    "meta-batch-size": 3,
}


def write_small_config(folder, name: str = "small.yaml", **changes) -> Path:
    """``SMALL_CONFIG`` with ``changes`` (``**{"num-batches": 1}``), written as YAML into ``folder``."""
    path = Path(folder) / name
    path.write_text(yaml.safe_dump({**SMALL_CONFIG, **changes}))
    return path


def pytest_configure(config):
    for name, meaning in (("slow", "takes more than a few seconds on 2 cores"),
                          ("processes", "starts worker processes or subprocesses"),
                          ("ray", "starts a Ray cluster on this machine"),
                          ("metaworld", "builds Meta-World envs")):
        config.addinivalue_line("markers", f"{name}: {meaning}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker in MODULE_MARKERS.get(item.fspath.basename, ()):
            item.add_marker(marker)
        if item.originalname in SLOW:
            item.add_marker("slow")
