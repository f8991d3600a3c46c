# SPDX-License-Identifier: MIT
"""sfreport: the old name of sf.report (tools/sf/report.py), the same module, for what imports it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from sf import report  # noqa: E402
sys.modules[__name__] = report
