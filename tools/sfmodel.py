# SPDX-License-Identifier: MIT
"""sfmodel: the old name of sf.model (tools/sf/model.py), the same module, for what imports it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from sf import model  # noqa: E402
sys.modules[__name__] = model
