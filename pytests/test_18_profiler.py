# SPDX-License-Identifier: MIT
"""NCCL's profiler sees simfabric's network events: build/libnccl-profiler-simfabric-check.so
(tools/profcheck/profcheck.c), a minimal NCCL profiler plugin that counts and checks them and writes a JSON
summary per process to SIMFABRIC_PROFCHECK_OUT.

Without a GPU: the profiler driven as NCCL drives it (profdrv.py, a child process per case): its
counts, its checks, what it does with bad input, its environment, and the real plugin's events
through NCCL's forwarding played in Python. With a GPU (marked gpu; skipped with the reason
elsewhere): the NCCL job program over simfabric, 2 ranks, NCCL_PROFILER_PLUGIN set to it; every
rank's summary must show simfabric's events, each Start with one Stop, sends and receives."""
import json
import os
import subprocess
import sys

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import sflaunch  # noqa: E402

SF_TYPE = "0x5346"


@pytest.fixture
def profcheck(sf_env):
    path = os.path.join(sf_env.build, "libnccl-profiler-simfabric-check.so")
    sf_env.require(path)
    return path


def drive(profcheck, case, tmp_path, env=None, out="prof-%p.json", plugin=None):
    """profdrv.py CASE in a child process, in tmp_path: (its result, the summary or None)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("SIMFABRIC_PROFCHECK_")}
    if out:
        e["SIMFABRIC_PROFCHECK_OUT"] = out
    e.update(env or {})
    argv = [sys.executable, os.path.join(HERE, "profdrv.py"), profcheck, case] + (
        [plugin] if plugin else [])
    p = subprocess.run(argv, env=e, cwd=str(tmp_path), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, "profdrv %s failed (%s):\n%s\n%s" % (case, p.returncode, p.stdout,
                                                                  p.stderr)
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, "something besides the driver wrote to stdout:\n" + p.stdout
    res = json.loads(lines[0])
    files = sorted(tmp_path.glob("prof-*.json"))
    assert len(files) <= 1 and not list(tmp_path.glob("*.tmp.*")), files
    summary = json.loads(files[0].read_text()) if files else None
    if summary:
        assert files[0].name == "prof-%d.json" % summary["pid"], files
    return res, summary


def net_types(s):
    return {t["name"]: t for t in s["net"]["types"]}


def test_18_01_exports_only_ncclProfiler_v5(profcheck):
    nm = subprocess.run(["nm", "-D", "--defined-only", profcheck], capture_output=True,
                        text=True, check=True).stdout.split()
    assert nm[1:] in (["D", "ncclProfiler_v5"], ["R", "ncclProfiler_v5"]), nm
    ldd = subprocess.run(["ldd", profcheck], capture_output=True, text=True).stdout
    assert "libcuda" not in ldd and "libnccl" not in ldd, ldd


def test_18_02_events_are_counted_per_type_and_paired(profcheck, tmp_path):
    r, s = drive(profcheck, "events", tmp_path)
    assert r["name"] == "simfabric-check" and r["mask"] == 0x80, r  # ncclProfileNetPlugin
    assert r["group"] is None and r["coll"] is None and r["step"] and r["handles"] == 6, r
    assert s["ok"] and s["first_error"] is None, s
    assert s["inits"] == s["finalizes"] == 2 and [c["id"] for c in s["comms"]] == [
        "0x1111", "0x2222"], s
    ev = s["events"]
    assert ev["Group"]["starts"] == ev["Coll"]["starts"] == 1, ev
    assert ev["ProxyStep"] == {"starts": 1, "stops": 1} and ev["NetPlugin"] == {
        "starts": 6, "stops": 6}, ev
    n = s["net"]
    assert n["starts"] == n["taken"] == n["stops"] == 6 and n["live"] == 0, n
    assert n["parent"] == {"proxy_step": 5, "none": 1, "other": 0} and n["updates"] == 1, n
    t = net_types(s)
    assert t["simfabric"]["type"] == SF_TYPE and t["simfabric"]["versions"] == [1], t
    assert [t[k]["starts"] for k in ("simfabric", "ib", "socket", "other")] == [3, 1, 1, 1], t
    assert t["other"]["type"] == "0x77" and t["other"]["versions"] == [3], t
    sf = s["simfabric"]
    assert sf["starts"] == sf["stops"] == 3 and sf["bad"] == 0, sf
    assert sf["send"] == {"events": 1, "bytes": 4096, "min": 4096, "max": 4096, "zero": 0}, sf
    assert sf["recv"] == {"events": 2, "bytes": 8192, "min": 0, "max": 8192, "zero": 1}, sf
    assert sf["chans"] == 1 and sf["nodes"] == [1, 2] and sf["max_buf"] == 1, sf
    assert [lv for lv, _ in r["logs"]] == [3] * 4, r["logs"]  # INFO, through NCCL's logger


def test_18_03_bad_input_is_counted_never_a_crash(profcheck, tmp_path):
    r, s = drive(profcheck, "misuse", tmp_path)
    assert r["null_descr_h"] is None and r["unknown"] == [None] * 3 and r["no_context"] is None
    assert not s["ok"], s
    assert s["null_args"] == 2 and s["unknown_types"] == 3 and s["bad_context"] == 2, s
    sf = s["simfabric"]
    assert sf["bad"] == 8 and sf["first_bad"] == "descriptor version 2, not 1", sf
    assert sf["starts"] == 10 and sf["stops"] == 9, sf  # the one never stopped
    assert sf["send"]["events"] == 1 and sf["recv"]["events"] == 1, sf  # only the sane ones
    n = s["net"]
    assert n["bad_stops"] == 2 and n["null_stops"] == 1 and n["live"] == 1, n
    assert s["first_error"].startswith("second Stop of handle"), s
    # pluginId bits past 31 are not simfabric's type (NCCL's type mask is 32 bits)
    assert net_types(s)["other"]["type"] == "0x15346", s["net"]


@pytest.mark.parametrize("env,out,mask,file", [
    ({}, None, 0x80, False),
    ({"SIMFABRIC_PROFCHECK_MASK": "0x90"}, "prof-%p.json", 0x90, True),
    ({"SIMFABRIC_PROFCHECK_MASK": "lots"}, "prof-%p.json", 0x80, True),
    ({}, "pc%%-%p.json", 0x80, False),
])
def test_18_04_environment(profcheck, tmp_path, env, out, mask, file):
    r, s = drive(profcheck, "env", tmp_path, env=env, out=out)
    assert r["mask"] == mask, r
    assert (s is not None) == file, s
    if s:
        assert s["mask"] == mask and s["ok"] and s["inits"] == s["finalizes"] == 1, s
    made = [f.name for f in tmp_path.iterdir()]
    if out and "%%" in out:  # %% is one %, and a relative path is the process's cwd's
        assert len(made) == 1 and made[0].startswith("pc%-") and "%p" not in made[0], made
    else:
        assert len(made) == (1 if file else 0), made
    warns = [m for lv, m in r["logs"] if lv == 2]
    assert bool(warns) == (env.get("SIMFABRIC_PROFCHECK_MASK") == "lots"), r["logs"]


def test_18_05_the_plugins_events_through_nccls_forwarding(sf_env, profcheck, fabric, tmp_path):
    """The real plugin over a fabric, NCCL's ncclProfilerCallback played in Python: a Start per
    send and per receive buffer that had a pHandle, each under the proxy step, one Stop each."""
    r, s = drive(profcheck, "plugin", tmp_path, plugin=sf_env.plugin,
                 env=dict(fabric.env_vars(), SIMFABRIC_NODE="prof"))
    assert r["close"] == [0, 0] and r["net_finalize"] == 0, r
    assert r["seen"] == {"starts": 12, "stops": 12, "null_phandle": 0, "other": 0}, r
    assert s["ok"], s
    sf = s["simfabric"]
    assert sf["starts"] == sf["stops"] == r["sends"] + r["recv_bufs"] and sf["bad"] == 0, sf
    assert sf["send"]["events"] == r["sends"] and sf["send"]["bytes"] == r["send_bytes"], sf
    assert sf["recv"]["events"] == r["recv_bufs"] and sf["recv"]["bytes"] == r["recv_bytes"], sf
    assert sf["send"]["min"] == 8 and sf["send"]["max"] == 1 << 20 and sf["max_buf"] == 1, sf
    assert sf["chans"] == 1 and len(sf["nodes"]) == 1, sf  # one connection, one node
    assert s["net"]["parent"]["proxy_step"] == sf["starts"], s["net"]


# ---- real NCCL (GPU) ----------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.slow
def test_18_10_real_nccl_hands_simfabrics_events_to_a_profiler(nccl_gpu, profcheck, tmp_path):
    paths = nccl_gpu
    out = tmp_path / "prof-%p.json"
    cmd = [paths.nccljob, "--coll", "allreduce,allgather,sendrecv", "--sizes", "8,64K,4M",
           "--warmup", "2", "--iters", "5", "--timeout-s", "180", "--json",
           str(tmp_path / "job-%r.json")]
    env = {"NCCL_PROFILER_PLUGIN": profcheck, "SIMFABRIC_PROFCHECK_OUT": str(out),
           "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}
    r = sflaunch.launch(cmd, 2, run_dir=str(tmp_path / "run"), echo=False, timeout=240,
                        paths=paths, env=env)
    report = "%s\n%s" % (r.summary(), r.logs())
    r.check_ok()
    files = sorted(tmp_path.glob("prof-*.json"))
    assert len(files) == 2, (files, report)
    nodes = []
    for f in files:
        s = json.loads(f.read_text())
        why = "%s: %s\n%s" % (f, json.dumps(s, indent=1), report[-6000:])
        assert s["ok"] and s["first_error"] is None, why
        assert s["mask"] == 0x80 and s["inits"] >= 1 and s["finalizes"] == s["inits"], why
        sf, n = s["simfabric"], s["net"]
        assert sf["starts"] > 0 and sf["starts"] == sf["stops"] and sf["bad"] == 0, why
        assert net_types(s)["simfabric"]["versions"] == [1], why
        assert n["starts"] == sf["starts"] and n["live"] == 0 and n["dropped"] == 0, why
        assert n["parent"]["proxy_step"] == n["starts"], why  # each under its proxy step
        assert sf["send"]["events"] > 0 and sf["recv"]["events"] > 0, why
        assert sf["send"]["bytes"] > 0 and sf["recv"]["bytes"] > 0 and sf["send"]["max"] > 0, why
        assert sf["chans"] >= 2 and len(sf["nodes"]) == 1, why  # a send and a receive channel
        nodes += sf["nodes"]
    assert len(set(nodes)) == 2, nodes  # each rank is its own node


def test_18_06_an_output_path_too_long_is_named_in_a_warning(profcheck, tmp_path):
    """SIMFABRIC_PROFCHECK_OUT set, but longer than a path can be once expanded: no file, and
    a warning through NCCL's logger that names the variable and its value (the driver sees
    only the format: the value is its %s)."""
    out = "x" * 5000 + "-%p.json"
    r, s = drive(profcheck, "env", tmp_path, out=out)
    assert s is None and not list(tmp_path.iterdir()), list(tmp_path.iterdir())
    warns = [m for lv, m in r["logs"] if lv == 2]
    assert any(m.startswith("PROFILER/simfabric-check: SIMFABRIC_PROFCHECK_OUT='%") and
               "no summary is written" in m for m in warns), r["logs"]
