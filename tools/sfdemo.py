# SPDX-License-Identifier: MIT
"""sfdemo: the old name of sf.demo (tools/sf/demo.py), the same module, for what imports it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from sf import demo  # noqa: E402

if __name__ == "__main__":
    sys.exit(demo.main())
sys.modules[__name__] = demo
