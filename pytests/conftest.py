# SPDX-License-Identifier: MIT
# The project's own suite uses the reusable plugin (simfabric_pytest.py), as users would.
pytest_plugins = ["simfabric_pytest"]


import os  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _runs_under_pytest_tmp(tmp_path_factory):
    """Run directories of launches without --run-dir go under pytest's temporary tree, which
    pytest prunes, never straight into /tmp (test_10 left simfabric-sleep-* there)."""
    os.environ["SIMFABRIC_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    yield
