# SPDX-License-Identifier: MIT
# The project's own suite uses the reusable plugin (simfabric_pytest.py), as users would.
pytest_plugins = ["simfabric_pytest"]
