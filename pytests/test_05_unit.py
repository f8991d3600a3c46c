# SPDX-License-Identifier: MIT
"""The C unit tests of sim/, run from pytest too (under ASan when build-asan/ exists)."""
import glob
import os
import subprocess

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT


def _built(build):
    found = glob.glob(os.path.join(ROOT, build, "test", "test_*"))
    return {os.path.basename(f): f for f in found if os.access(f, os.X_OK) and
            not f.endswith(".d")}


def unit_binaries():
    """Every unit test `make` built (build/test), each run under ASan where its build-asan twin is
    at least as new: `make pytest` does not rebuild ASan, and a stale twin would test old code
    (or miss a new test altogether)."""
    plain, asan = _built("build"), _built("build-asan")
    out = []
    for name in sorted(set(plain) | set(asan)):
        p, a = plain.get(name), asan.get(name)
        if a and (not p or os.path.getmtime(a) >= os.path.getmtime(p)):
            out.append(a)
        elif p:
            out.append(p)
    return out


@pytest.mark.parametrize("binary", unit_binaries() or ["(none built)"],
                         ids=lambda p: os.path.basename(p) + ("-asan" if "build-asan" in p else ""))
def test_05_01_unit(binary):
    if not os.path.exists(binary):
        pytest.fail("no C unit tests built: run `make`", pytrace=False)
    p = subprocess.run([binary], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "%s failed:\n%s\n%s" % (binary, p.stdout, p.stderr)
