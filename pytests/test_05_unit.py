# SPDX-License-Identifier: MIT
"""The C unit tests of sim/, run from pytest too (under ASan when build-asan/ exists)."""
import glob
import os
import subprocess

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT


def unit_binaries():
    for b in ("build-asan", "build"):
        found = sorted(glob.glob(os.path.join(ROOT, b, "test", "test_*")))
        found = [f for f in found if os.access(f, os.X_OK) and not f.endswith(".d")]
        if found:
            return found
    return []


@pytest.mark.parametrize("binary", unit_binaries() or ["(none built)"],
                         ids=lambda p: os.path.basename(p))
def test_05_01_unit(binary):
    if not os.path.exists(binary):
        pytest.fail("no C unit tests built: run `make`", pytrace=False)
    p = subprocess.run([binary], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "%s failed:\n%s\n%s" % (binary, p.stdout, p.stderr)
