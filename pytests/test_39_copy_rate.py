# SPDX-License-Identifier: MIT
"""simfabric-copy-rate (tools/bench/copy_rate.c): how many small copies a second the GPU runs,
from one process or several (docs/gpu-path.md, "Why LL is slow at 4 ranks"). Its options fail
with the option and value named; without CUDA's driver it says so; on a GPU every mode runs and
reports a rate per process."""
import ctypes
import os
import re
import subprocess

import pytest



def _prog(sf_env):
    p = os.path.join(sf_env.build, "simfabric-copy-rate")
    if not os.path.exists(p):
        pytest.skip("%s is not built (needs cuda.h at build time)" % p)
    return p


def _run(argv, timeout=60):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def _has_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


BAD = [
    (["--procs", "0"], "--procs: bad value '0'"),
    (["--procs", "65"], "--procs: bad value '65'"),
    (["--bytes", "17"], "--bytes: bad value '17'"),
    (["--bytes", "2097152"], "--bytes: bad value '2097152'"),
    (["--count", "-1"], "--count: bad value '-1'"),
    (["--count", "1x"], "--count: bad value '1x'"),
    (["--mode", "fast"], "--mode: bad value 'fast'"),
    (["--mode"], "--mode needs a value"),
    (["--speed", "1"], "unknown option '--speed'"),
]


@pytest.mark.parametrize("args,says", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_39_01_a_bad_option_is_named(sf_env, args, says):
    p = _run([_prog(sf_env)] + args)
    assert p.returncode == 1 and says in p.stderr and "usage:" in p.stderr, (p.returncode,
                                                                             p.stderr)


def test_39_02_help_and_no_driver(sf_env):
    prog = _prog(sf_env)
    p = _run([prog, "--help"])
    assert p.returncode == 0 and "usage:" in p.stderr, p.stderr
    if _has_driver():
        pytest.skip("CUDA's driver is here: test_39_03 runs it")
    p = _run([prog, "--procs", "2"])
    assert p.returncode == 2 and "no CUDA driver here" in p.stderr, (p.returncode, p.stderr)


LINE = re.compile(r"^pid \d+\s+(\S+)\s+(\d+) B(?: x 8)? x (\d+): issue [\d.]+ us, done [\d.]+ us "
                  r"each \((\d+) copies/s, [\d.]+ GB/s\); one alone, post to done: ([\d.]+) us$")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["h2d", "d2d", "sep", "gather", "pageable"])
def test_39_03_every_mode_runs_on_a_gpu(sf_nccl_gpu, sf_env, mode):
    p = _run([_prog(sf_env), "--procs", "2", "--mode", mode, "--bytes", "8192", "--count",
              "200"], timeout=150)
    lines = [m for m in (LINE.match(x) for x in p.stdout.splitlines()) if m]
    assert p.returncode == 0 and len(lines) == 2, (p.returncode, p.stdout, p.stderr)
    for m in lines:
        assert m.group(1) == mode and m.group(2) == "8192" and m.group(3) == "200"
        assert int(m.group(4)) > 0 and float(m.group(5)) > 0, m.group(0)
