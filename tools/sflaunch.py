# SPDX-License-Identifier: MIT
"""sflaunch: the old name of sf.launch (tools/sf/launch.py), the same module, for what imports it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from sf import launch  # noqa: E402
sys.modules[__name__] = launch
