# SPDX-License-Identifier: MIT
"""sfctl: the old name of sf.ctl (tools/sf/ctl.py), the same module, for what imports it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from sf import ctl  # noqa: E402
sys.modules[__name__] = ctl
