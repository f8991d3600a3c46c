# SPDX-License-Identifier: MIT
# The project's own suite uses the reusable plugin (simfabric_pytest.py), as users would.
pytest_plugins = ["simfabric_pytest"]


import os  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

# pytest loads an installed plugin (its entry point) before any conftest.py.
_loaded = getattr(sys.modules.get("simfabric_pytest"), "__file__", None)
if _loaded and os.path.dirname(os.path.realpath(_loaded)) != os.path.dirname(
        os.path.realpath(__file__)):
    raise pytest.UsageError(
        "this suite tests its own pytests/simfabric_pytest.py, but pytest loaded %s: run it with "
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1" % _loaded)


def pytest_addoption(parser):
    """The suite's own spellings of the plugin's options (--build-dir, --keep-logs, --no-timing),
    kept here: a plugin loaded into any project takes only --simfabric-* names."""
    g = parser.getgroup("simfabric")
    g.addoption("--build-dir", dest="simfabric_build_dir", metavar="DIR", default=None,
                help="as --simfabric-build-dir")
    g.addoption("--keep-logs", dest="simfabric_keep_logs", action="store_true",
                help="as --simfabric-keep-logs")
    g.addoption("--no-timing", dest="simfabric_no_timing", action="store_true",
                help="as --simfabric-no-timing")


@pytest.fixture(scope="session", autouse=True)
def _runs_under_pytest_tmp(tmp_path_factory):
    """Run directories of launches without --run-dir go under pytest's temporary tree, which
    pytest prunes, never straight into /tmp (test_10 left simfabric-sleep-* there)."""
    os.environ["SIMFABRIC_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    yield
