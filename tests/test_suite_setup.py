"""The test suite's own set-up holds: the xdist groups that share a costly fixture stay on one worker."""

import os

import pytest


@pytest.mark.xdist_group("suite-setup")
def test_an_xdist_group_reaches_the_scheduler(request):
    """Under ``-n`` with ``--dist loadgroup`` (pyproject's addopts), a test marked ``xdist_group`` must carry its
    group in its id, which is what the scheduler reads to keep a group on one worker (one Ray cluster for the Ray
    tests, Meta-World's task lists built once). pytest 9.2 with pytest-xdist 3.8 lost it silently."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("not under pytest-xdist: no groups to schedule")
    assert request.config.option.loadgroup, "the suite runs with --dist loadgroup (pyproject.toml's addopts)"
    assert request.node.nodeid.endswith("@suite-setup"), (
        f"{request.node.nodeid}: the xdist_group mark did not reach the scheduler, so each group's tests are spread "
        "over the workers; use a pytest that this pytest-xdist supports (pyproject.toml's dev extra)")
