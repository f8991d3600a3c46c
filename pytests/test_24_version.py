# SPDX-License-Identifier: MIT
"""One version everywhere (sim/core/version.h): every program's --version and the plugin's init
line say the same, and it is the header's."""
import os
import re
import subprocess
import sys

import simfabric_pytest

ROOT = simfabric_pytest.ROOT


def header_version():
    with open(os.path.join(ROOT, "sim", "core", "version.h")) as f:
        return re.search(r'#define SF_VERSION "([^"]+)"', f.read()).group(1)


def test_24_01_every_program_says_the_headers_version(sf_env):
    v = header_version()
    progs = [[sys.executable, os.path.join(ROOT, "tools", "simfabric"), "--version"],
             [sf_env.daemon, "--version"], [sf_env.harness, "--version"]]
    nccljob = os.path.join(sf_env.build, "simfabric-nccljob")
    if os.path.exists(nccljob):
        progs.append([nccljob, "--version"])
    for argv in progs:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        first = (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr) else ""
        assert p.returncode == 0 and first.split()[1] == v, (argv, p.returncode, p.stdout,
                                                              p.stderr)


def test_24_02_the_plugins_init_line_says_it(harness):
    r = harness(nranks=2, tests="connect", env={"NCCL_DEBUG": "INFO"}, timeout=60)
    r.check_ok()
    assert re.search(r"plugin %s, socket " % re.escape(header_version()), r.stderr), \
        r.stderr[-3000:]
