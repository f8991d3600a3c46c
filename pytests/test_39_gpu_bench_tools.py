# SPDX-License-Identifier: MIT
"""The GPU path's measuring tools, where they can be checked without a GPU.

simfabric-copy-rate (tools/bench/copy_rate.c): how many small copies a second the GPU runs,
from one process or several (docs/gpu-path.md, "Why LL is slow at 4 ranks"). Its options fail
with the option and value named; without CUDA's driver it says so; over a stand-in for the
driver (tools/bench/test/fake_libcuda.c: copies on the CPU) every mode runs, a copy that lands
wrong fails it, and a process that cannot start ends the run; on a GPU every mode runs.

bench_nccl.py's floor: a modelled size whose model time is below the same run's ideal-fabric
time for that size is named, with the most it can reach.

ab_gpu.py (GPU path settings side by side over the modelled fabrics): its options fail naming
what is wrong, it reads its variants and the sendComms' close lines, rotates the order from
round to round, and without a GPU says so. Both rate results against the model through one
helper (bench_nccl.model_rows), checked against tools/sf/model.py here."""
import ctypes
import importlib.util
import os
import re
import subprocess
import sys

import pytest

import simfabric_pytest



def _prog(sf_env):
    p = os.path.join(sf_env.build, "simfabric-copy-rate")
    if not os.path.exists(p):
        pytest.skip("%s is not built (needs cuda.h at build time)" % p)
    return p


def _run(argv, timeout=60, env=None):
    e = dict(os.environ)
    e.pop("FAKE_CUDA_FAIL", None)
    e.update(env or {})
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=e)


def _fake(sf_env, fail=None):
    """The environment that loads the stand-in driver (and makes it fail so, if fail)."""
    lib = os.path.join(sf_env.build, "test", "fake-cuda")
    if not os.path.exists(os.path.join(lib, "libcuda.so.1")):
        pytest.skip("%s/libcuda.so.1 is not built (needs cuda.h at build time)" % lib)
    env = {"LD_LIBRARY_PATH": lib + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")}
    if fail:
        env["FAKE_CUDA_FAIL"] = fail
    return env


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


MODES = ["h2d", "d2d", "sep", "gather", "pageable"]


def _lines(p, mode, count):
    """The per-process result lines of a run, each checked against what was asked."""
    lines = [m for m in (LINE.match(x) for x in p.stdout.splitlines()) if m]
    for m in lines:
        assert m.group(1) == mode and m.group(2) == "8192" and m.group(3) == str(count)
        assert int(m.group(4)) > 0 and float(m.group(5)) > 0, m.group(0)
    return lines


@pytest.mark.parametrize("mode", MODES)
def test_39_03_every_mode_runs_over_a_stand_in_driver(sf_env, mode):
    p = _run([_prog(sf_env), "--procs", "2", "--mode", mode, "--bytes", "8192", "--count",
              "40"], env=_fake(sf_env))
    assert p.returncode == 0 and len(_lines(p, mode, 40)) == 2, (p.returncode, p.stdout,
                                                                 p.stderr)


@pytest.mark.parametrize("mode", MODES)
def test_39_04_a_copy_that_lands_wrong_fails_the_run(sf_env, mode):
    p = _run([_prog(sf_env), "--mode", mode, "--count", "20"], env=_fake(sf_env, "corrupt"))
    assert p.returncode == 3 and "not its source's" in p.stderr, (p.returncode, p.stderr)


def test_39_05_a_process_that_cannot_start_ends_the_run(sf_env):
    p = _run([_prog(sf_env), "--procs", "3", "--count", "20"], env=_fake(sf_env, "init"),
             timeout=30)
    assert p.returncode == 2 and "3 of 3 processes did not get ready" in p.stderr and \
        "cuInit" in p.stderr, (p.returncode, p.stderr)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_39_06_every_mode_runs_on_a_gpu(sf_env, mode):
    if not simfabric_pytest._sflaunch().ranks.gpu_ids():
        pytest.skip("needs an NVIDIA GPU (nvidia-smi lists none, or is not here)")
    p = _run([_prog(sf_env), "--procs", "2", "--mode", mode, "--bytes", "8192", "--count",
              "200"], timeout=150)
    assert p.returncode == 0 and len(_lines(p, mode, 200)) == 2, (p.returncode, p.stdout,
                                                                  p.stderr)


def _tool(name):
    """tools/bench/<name>.py as a module."""
    path = os.path.join(simfabric_pytest.ROOT, "tools", "bench", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bench_nccl():
    return _tool("bench_nccl")


def test_39_07_the_bench_names_sizes_below_the_machines_floor():
    b = _bench_nccl()
    ideal = {1 << 20: {"time_us": 77.4}, 4 << 20: {"time_us": 145.1}}
    rows = [{"bytes": 1 << 20, "model_us": 22.6}, {"bytes": 4 << 20, "model_us": 145.1},
            {"bytes": 16 << 20, "model_us": 340.0}]
    note = b.floor_note(rows, ideal)
    assert note == ("; the model's time is below this machine's own over the ideal fabric at "
                    "1 MiB (model 22.6 us, ideal 77.4 us: at most 0.29x)"), note
    assert [x["below_floor"] for x in rows] == [True, False, False]
    assert rows[0]["bound"] == pytest.approx(22.6 / 77.4) and rows[1]["bound"] == 1.0
    assert rows[2]["ideal_us"] is None and rows[2]["bound"] is None  # not in the sweep
    assert b.floor_note([{"bytes": 1 << 20, "model_us": 80.0}], ideal) == ""


# ---- ab_gpu.py: GPU path settings side by side over the modelled fabrics ------------------

def _ab_gpu():
    return _tool("ab_gpu")


AB_BAD = [
    (["--variant", "a"], "two or more, each with a name of its own"),
    (["--variant", "a", "--variant", "a"], "two or more, each with a name of its own"),
    (["--variant", "a b=X=1", "--variant", "c"], "the name before '=' must be"),
    (["--variant", "a=x=1", "--variant", "c"], "'x=1' is not VAR=VALUE"),
    (["--variant", "a=X", "--variant", "c"], "'X' is not VAR=VALUE"),
    (["--variant", "a", "--variant", "c", "--rates", "300g"], "--rates '300g': want some of"),
    (["--variant", "a", "--variant", "c", "--nodes", "1"], "--nodes '1': want numbers"),
    (["--variant", "a", "--variant", "c", "--nodes", "two"], "--nodes 'two': want numbers"),
    (["--variant", "a", "--variant", "c", "--rounds", "0"], "--rounds 0: want 1 to 20"),
]


@pytest.mark.parametrize("args,says", AB_BAD, ids=[" ".join(a) for a, _ in AB_BAD])
def test_39_08_ab_gpu_names_a_bad_option(args, says):
    p = _run([sys.executable, os.path.join(simfabric_pytest.ROOT, "tools", "bench", "ab_gpu.py")]
             + args)
    assert p.returncode == 2 and says in p.stderr, (p.returncode, p.stderr)


def test_39_09_ab_gpu_reads_variants_and_close_lines():
    ab = _ab_gpu()
    assert ab.parse_variant("whole=SIMFABRIC_GPU_ARM=whole,SIMFABRIC_GPU_STREAMS=2") == (
        "whole", {"SIMFABRIC_GPU_ARM": "whole", "SIMFABRIC_GPU_STREAMS": "2"})
    assert ab.parse_variant("base") == ("base", {})
    log = ("x NCCL INFO NET/simfabric: c0: 2600 GPU copies, 392 of them armed ahead of their "
           "arrival\nx NCCL INFO NET/simfabric: c1: 10 GPU copies, 0 of them armed ahead of "
           "their arrival\n")
    assert ab.copies(log) == (2610, 392) and ab.copies("") == (0, 0)
    v = [("a", {}), ("b", {}), ("c", {})]
    assert [n for n, _ in ab.order(v, 0)] == ["a", "b", "c"]
    assert [n for n, _ in ab.order(v, 1)] == ["b", "c", "a"]
    assert [n for n, _ in ab.order(v, 4)] == ["b", "c", "a"]


def test_39_10_ab_gpu_without_a_gpu_says_so():
    if simfabric_pytest._sflaunch().ranks.gpu_ids():
        pytest.skip("there is a GPU here: ab_gpu.py would run")
    p = _run([sys.executable, os.path.join(simfabric_pytest.ROOT, "tools", "bench", "ab_gpu.py"),
              "--variant", "a", "--variant", "b=SIMFABRIC_GPU_ARM=off"])
    assert p.returncode == 0 and "ab_gpu: skipped: no NVIDIA GPU here" in p.stdout, (
        p.returncode, p.stdout, p.stderr)


def test_39_11_the_benches_rate_results_against_the_model(sf_env):
    """bench_nccl.model_rows (the modelled rows of bench_nccl, its cross-host run and ab_gpu):
    a row per size, smallest first, measured busbw over the model's, and the model's time."""
    b = _bench_nccl()  # loads sf.model too
    sfl = simfabric_pytest._sflaunch()
    fb = sfl.launch.dump_scenario(os.path.join(simfabric_pytest.ROOT, "scenarios",
                                               "job-nccl-100g.yaml"))

    class Run:
        fabric = fb

    res = {4 << 20: {"busbw_gbps": 6.0}, 1 << 20: {"busbw_gbps": 3.0}}
    rows = b.model_rows(Run, res, 2)
    model = sfl.model.FabricModel(fb, ["node0", "node1"])
    assert [x["bytes"] for x in rows] == [1 << 20, 4 << 20]
    for x in rows:
        p = sfl.model.predict(model, "allreduce", x["bytes"], 2)
        assert x["model"] == pytest.approx(p["busbw"] / 1e9) and x["model"] > 0
        assert x["ratio"] == pytest.approx(x["busbw"] / x["model"])
        assert x["model_us"] == pytest.approx(p["time_s"] * 1e6)
    assert rows[0]["busbw"] == 3.0 and rows[1]["busbw"] == 6.0
