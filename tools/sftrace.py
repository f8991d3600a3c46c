# SPDX-License-Identifier: MIT
"""sftrace: the old name of sf.trace (tools/sf/trace.py), the same module, for what imports it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from sf import trace  # noqa: E402
sys.modules[__name__] = trace
