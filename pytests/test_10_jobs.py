# SPDX-License-Identifier: MIT
"""Jobs: `simfabric launch` (any program as N emulated nodes), `simfabric run` (a scenario's job:
checked against its expect:), the model they are held to, and every shipped job scenario as a
test of its own (test_10_00_shipped_jobs::job-*.yaml; GPU ones skip with the reason here)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import sflaunch
from sf import paths as sfpaths
from sf import procs as sfprocs
from sf import ranks as sfranks
from sf import recipe as sfrecipe
import sfmodel
import simfabric_pytest

ROOT = simfabric_pytest.ROOT
SCEN = os.path.join(ROOT, "scenarios")
CLI = os.path.join(ROOT, "tools", "simfabric")
PY = sys.executable

# Every scenarios/job-*.yaml is a test, run by `simfabric run` in a fresh process.
test_10_00_shipped_jobs = simfabric_pytest.scenario_tests(os.path.join(SCEN, "job-*.yaml"))

ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "MASTER_PORT", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_HOSTID", "SIMFABRIC_NODE",
            "SIMFABRIC_SOCKET", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
            "NVSHMEM_DISABLE_NVLS", "SIMFABRIC_RUN_DIR", "SIMFABRIC_COPY_THREADS",
            "NCCL_NET_PLUGIN_REF_COUNT")
PRINT_ENV = ("import json, os; print('ENV ' + json.dumps({k: os.environ.get(k) for k in %r}))"
             % (ENV_KEYS,))


def envs(result):
    out = {}
    for p in result.procs:
        line = [ln for ln in result.output(p.rank).splitlines() if ln.startswith("ENV ")]
        assert line, result.logs()
        out[p.rank] = json.loads(line[-1][4:])
    return out


def cli(*args, timeout=120, **kw):
    return subprocess.run([PY, CLI] + list(args), capture_output=True, text=True,
                          timeout=timeout, **kw)


def test_10_01_every_rank_gets_torchruns_env_and_its_node(sf_env, sf_launch):
    r = sf_launch([PY, "-c", PRINT_ENV], nodes=2, gpus_per_node=2,
                  env={"NCCL_NVLS_ENABLE": "1"}).check_ok()
    e = envs(r)
    assert sorted(e) == [0, 1, 2, 3]
    ports = {v["MASTER_PORT"] for v in e.values()}
    socks = {v["SIMFABRIC_SOCKET"] for v in e.values()}
    assert len(ports) == 1 and int(ports.pop()) > 0 and len(socks) == 1
    for rank, v in e.items():
        node = "node%d" % (rank // 2)
        assert v["RANK"] == str(rank) and v["LOCAL_RANK"] == str(rank % 2), v
        assert v["WORLD_SIZE"] == "4" and v["LOCAL_WORLD_SIZE"] == "2", v
        assert v["GROUP_RANK"] == str(rank // 2) and v["MASTER_ADDR"] == "127.0.0.1", v
        assert v["NCCL_HOSTID"] == v["SIMFABRIC_NODE"] == node, v
        assert v["NCCL_NET"] == "simfabric", v
        assert v["NCCL_NET_PLUGIN"] == sf_env.plugin and os.path.isabs(v["NCCL_NET_PLUGIN"])
        assert v["SIMFABRIC_RUN_DIR"] == r.run_dir
        # the user's setting wins; the others get their defaults
        assert v["NCCL_NVLS_ENABLE"] == "1", v
        assert v["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and v["NVSHMEM_DISABLE_NVLS"] == "1"
        # NCCL 2.28 must not unload the plugin between communicators (sf.ranks.FIXED_NCCL_ENV)
        assert v["NCCL_NET_PLUGIN_REF_COUNT"] == "1", v
        # copy threads: the CPUs shared out over the 4 ranks (none on a small machine)
        assert v["SIMFABRIC_COPY_THREADS"] == str(sfranks.copy_threads(4)), v
    # the socket is the run's own daemon's, in the run directory (unless that path is too long)
    assert socks.pop().startswith(r.run_dir) or len(r.run_dir) > 90


def test_10_02_node_names_come_from_the_fabric(sf_launch, tmp_path):
    sc = tmp_path / "named.yaml"
    sc.write_text("fabric: {nodes: {names: [alpha, beta, gamma]}}\n")
    r = sf_launch([PY, "-c", PRINT_ENV], nodes=2, scenario=str(sc)).check_ok()
    e = envs(r)
    assert [e[i]["NCCL_HOSTID"] for i in (0, 1)] == ["alpha", "beta"]
    assert [e[i]["SIMFABRIC_NODE"] for i in (0, 1)] == ["alpha", "beta"]
    with pytest.raises(sfpaths.LaunchError, match="4 nodes asked for, but the fabric has 3"):
        sf_launch([PY, "-c", "pass"], nodes=4, scenario=str(sc))


def test_10_03_output_is_prefixed_by_rank_and_kept_per_rank(sf_env, tmp_path):
    d = tmp_path / "run"
    p = cli("launch", "--nodes", "3", "--run-dir", str(d), "--",
            PY, "-c", "import os, sys; print('out', os.environ['RANK']); "
            "print('err', os.environ['RANK'], file=sys.stderr)")
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(3):
        assert "[r%d] out %d" % (r, r) in p.stdout.splitlines(), p.stdout
        assert "[r%d] err %d" % (r, r) in p.stdout.splitlines(), p.stdout
        log = (d / ("rank-%d.log" % r)).read_text()
        assert "out %d\n" % r in log and "err %d\n" % r in log and "[r" not in log
    assert (d / "simfabricd.log").exists() and (d / "launch.json").exists()
    assert "logs in %s" % d in p.stderr and "all 3 rank(s) exited 0" in p.stderr, p.stderr
    assert not (d / "ctl.sock").exists()  # the daemon is gone and took its socket along


def test_10_04_a_failing_rank_ends_the_job_with_its_status(tmp_path):
    d = tmp_path / "run"
    t0 = time.monotonic()
    p = cli("launch", "--nodes", "3", "--run-dir", str(d), "--fail-grace", "1", "--grace", "1",
            "-q", "--", PY, "-c", "import os, sys, time; r = os.environ['RANK']; "
            "sys.exit(3) if r == '1' else time.sleep(60)")
    took = time.monotonic() - t0
    assert p.returncode == 3, p.stderr
    assert "r1 (node1) exit 3" in p.stderr, p.stderr
    assert took < 20, took
    rep = json.loads((d / "launch.json").read_text())
    by = {x["rank"]: x for x in rep["ranks"]}
    assert by[1]["rc"] == 3 and not by[1]["torn_down"]
    assert by[0]["torn_down"] and by[2]["torn_down"] and by[0]["signal"] in ("SIGTERM", "SIGKILL")


def _wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s" % what)


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_10_05_a_signal_tears_down_ranks_their_children_and_the_daemon(tmp_path, sig):
    d = tmp_path / "run"
    # each rank leaves a child behind in its process group, and ignores SIGTERM itself: the
    # launcher has to get to SIGKILL
    rank = ("import os, signal, subprocess, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "subprocess.Popen(['sleep', '600']); print('ready', flush=True); time.sleep(600)")
    p = subprocess.Popen([PY, CLI, "launch", "--nodes", "2", "--run-dir", str(d), "--grace", "1",
                          "--", PY, "-c", rank], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        _wait_for(lambda: all(os.path.exists(d / ("rank-%d.log" % r)) and "ready" in
                              (d / ("rank-%d.log" % r)).read_text() for r in range(2)), 30,
                  "both ranks")
        tree = sfprocs.process_tree(p.pid)
        assert len(tree) >= 1 + 1 + 2 * 2, tree  # launcher, daemon, 2 x (rank + its sleep)
        t0 = time.monotonic()
        p.send_signal(sig)
        out, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + sig, (p.returncode, err)
    assert took < 8, took
    assert "interrupted (%s)" % signal.Signals(sig).name in err, err
    left = [q for q in tree if _alive(q)]
    assert not left, "still running after the launcher left: %s" % left


def test_10_06_a_timeout_dumps_every_ranks_stack(tmp_path):
    d = tmp_path / "run"
    p = cli("launch", "--nodes", "2", "--run-dir", str(d), "--timeout", "1.5", "--grace", "1",
            "-q", "--", PY, "-c", "import time\ndef stuck():\n    time.sleep(600)\nstuck()",
            timeout=120)
    assert p.returncode == 124, p.stderr
    assert "timed out" in p.stderr and "stacks in" in p.stderr, p.stderr
    st = (d / "stacks.txt").read_text()
    assert st.count("=== pid ") >= 2, st
    # faulthandler (tools/sfpyhook) wrote the Python stacks into the ranks' logs
    log = (d / "rank-0.log").read_text()
    assert "in stuck" in log, log


def test_10_07_simfabric_run_passes_a_harness_scenario(sf_run):
    r = sf_run(os.path.join(SCEN, "job-harness-ideal.yaml")).check_ok()
    assert "PASS" in r.report and "ok   data" in r.report, r.report
    assert r.json["launch"]["ranks"][0]["label"] == "harness"
    assert os.path.exists(os.path.join(r.run_dir, "harness.log"))
    assert os.path.exists(os.path.join(r.run_dir, "simfabricd.log"))


def _scenario(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_10_08_an_expectation_not_met_fails_with_a_clear_report(sf_run, tmp_path):
    sc = _scenario(tmp_path, "no-failure.yaml", """\
fabric: {kind: ideal}
job: {program: harness, nodes: 2, tests: [connect]}
expect:
  failure: {error: ncclRemoteError}
""")
    r = sf_run(sc)
    assert r.rc == 1 and not r.passed, r.explain()
    assert "FAIL failure  the job was expected to fail, but every rank exited 0" in r.report, \
        r.report
    # a rank that fails when it should not: its status, in the report
    sc = _scenario(tmp_path, "rank-fails.yaml", """\
fabric: {nodes: {count: 2, name: "node{i}"}}
job:
  program: command
  command: ["{python}", -c, "import os, sys; sys.exit(int(os.environ['RANK']) * 5)"]
""")
    r = sf_run(sc)
    assert r.rc == 1, r.explain()
    assert "FAIL ranks    r1 (node1) exit 5" in r.report, r.report


FAST_RESULTS = """\
import json, os
if os.environ["RANK"] == "0":
    # 1 GiB allreduce in 1 ms: far faster than 2 x 25 Gb/s allows
    json.dump({"results": [{"coll": "allreduce", "bytes": 1 << 30, "time_us": 1000.0,
                            "wrong": 0, "ok": True},
                           {"coll": "allreduce", "bytes": 1 << 20, "time_us": 100000.0,
                            "wrong": 0, "ok": True}], "status": "ok"},
              open(os.environ["SIMFABRIC_RESULT"], "w"))
"""


def test_10_09_timing_is_held_to_the_model_both_ways(sf_run, tmp_path):
    sc = _scenario(tmp_path, "fast.yaml", """\
fabric:
  defaults: {link: {rate_gbps: 25}}
  nodes: {count: 2, name: "node{i}"}
job:
  program: command
  command: ["{python}", -c, %s]
expect:
  timing: {busbw: [0.5, 1.05], min_bytes: 1M}
""" % json.dumps(FAST_RESULTS))
    r = sf_run(sc)
    assert r.rc == 1, r.explain()
    rows = [c for c in r.json["checks"] if c["name"] == "timing"][0]["rows"]
    verdicts = {row["bytes"]: row["verdict"] for row in rows}
    assert verdicts == {1 << 30: "too fast", 1 << 20: "too slow"}, rows
    assert "<- too fast (bounds 0.5..1.05)" in r.report, r.report


@pytest.mark.parametrize("text,err", [
    ("fabric: {kind: ideal}\njob: {program: harness}\n",
     ":2:6: nodes: missing: the ideal fabric makes nodes on demand, so the job says how many "
     "(nodes: N)"),
    ("fabric: {nodes: {count: 2}}\njob: {program: nccl, colectives: all}\n",
     ":2:22: colectives: unknown key in job"),
    ("fabric: {nodes: {count: 2}}\njob: {program: nccl}\nexpect: {timing: {busbw: [0.5, 0.9]}}\n",
     ":3:32: busbw: hi 0.9 is below 1"),
    ("fabric: {nodes: {count: 2}}\njob: {program: nccl}\nexpect: {failure: {ranks: [2]}}\n",
     ":3:28: ranks: '2' is not an integer in 0..1 (the job's ranks)"),
], ids=["ideal-needs-nodes", "unknown-key", "hi-below-1", "rank-out-of-range"])
def test_10_10_bad_job_or_expect_gives_file_line_column(tmp_path, text, err):
    sc = _scenario(tmp_path, "bad.yaml", text)
    p = cli("run", sc)
    assert p.returncode == 2, p.stdout + p.stderr
    assert ("simfabric run: %s%s" % (sc, err)) in p.stderr, p.stderr


def test_10_11_gpu_jobs_say_why_they_cannot_run_here(sf_env):
    if sfranks.gpu_ids() and os.path.exists(sfpaths.Paths(sf_env.build).nccljob):
        pytest.skip("this machine can run it (test_10_00 does)")
    p = cli("run", os.path.join(SCEN, "job-nccl-ideal-2.yaml"))
    assert p.returncode == 77, p.stdout + p.stderr
    assert "SKIP: " in p.stdout and ("needs an NVIDIA GPU" in p.stdout or
                                     "is not built" in p.stdout), p.stdout


def test_10_12_mps_and_gpu_mapping_decisions():
    # no GPU: nothing to share, nothing to say
    assert sfranks.mps_plan(4, 0, False) == (False, None)
    assert sfranks.gpu_map(2, 2, []) == ([None] * 4, False)
    # a GPU each: no MPS
    assert sfranks.mps_plan(2, 2, True) == (False, None)
    assert sfranks.gpu_map(2, 1, ["0", "1"]) == (["0", "1"], False)
    # sharing with MPS: started; without: said plainly, with the cost
    start, msg = sfranks.mps_plan(4, 1, True)
    assert start and "starting MPS" in msg
    start, msg = sfranks.mps_plan(4, 1, False)
    assert not start and "MPS is not available" in msg and "time-sliced" in msg and \
        "18 ms" in msg, msg
    # nodes see their GPUs round-robin; a node wanting more than there are: one per rank
    assert sfranks.gpu_map(2, 2, ["0", "1", "2", "3"]) == (["0,1", "0,1", "2,3", "2,3"], False)
    assert sfranks.gpu_map(3, 1, ["0", "1"]) == (["0", "1", "0"], True)
    assert sfranks.gpu_map(1, 3, ["5", "7"]) == (["5", "7", "5"], True)


def test_10_13_the_model_formulas(sf_env):
    fb = sflaunch.dump_scenario(os.path.join(SCEN, "hdr-2node.yaml"))
    m = sfmodel.FabricModel(fb, ["node0", "node1"])
    nic = fb["nodes"][0]["nics"][0]
    # alpha is what the NIC reports to NCCL (the model's zero-byte time); B the PCIe limit
    assert abs(m.alpha * 1e9 - nic["latency_ns"]) < 1.0, (m.alpha, nic)
    assert m.bw == pytest.approx(192e9 / 8)
    S = 64 << 20
    ring = sfmodel.predict(m, "allreduce", S, 2, "ring")
    assert ring["time_s"] == pytest.approx(2 * m.alpha + S / m.bw)
    assert ring["busbw"] == pytest.approx(S / ring["time_s"])  # factor 2 (n-1)/n = 1
    # on 8 nodes the tree wins small messages, the ring large ones
    fb8 = sflaunch.dump_scenario(os.path.join(SCEN, "leafspine-8node-2to1.yaml"))
    m8 = sfmodel.FabricModel(fb8, [n["name"] for n in fb8["nodes"]])
    assert sfmodel.predict(m8, "allreduce", 8, 8)["algo"] == "tree"
    assert sfmodel.predict(m8, "allreduce", S, 8)["algo"] == "ring"
    assert sfmodel.predict(m8, "allgather", S, 8)["time_s"] == pytest.approx(
        7 * m8.alpha + 7 / 8 * S / m8.bw)
    # multi-rail: both rails' bandwidth
    fbr = sflaunch.dump_scenario(os.path.join(SCEN, "model-multirail.yaml"))
    mr = sfmodel.FabricModel(fbr, [n["name"] for n in fbr["nodes"]])
    one = sfmodel.hop(fbr, fbr["nodes"][0]["name"], fbr["nodes"][1]["name"], 0)
    assert mr.rails == 2 and mr.bw == pytest.approx(2 * one.bw)
    # two ranks per node: only the fabric hops cost alpha
    assert sfmodel.coll_time("allreduce", 0, 4, 2, 1.0, 1e9) == pytest.approx(2 * 3 * 2 / 4)
    ok, rows, _ = sfmodel.check([{"coll": "sendrecv", "bytes": 8, "time_us": 1e-3}], fb,
                                ["node0", "node1"], 2, {"busbw": [0.5, 1.05]})
    assert not ok and rows[0]["verdict"] == "too fast"


def test_10_14_the_sf_launch_fixture_over_a_running_fabric(fabric, sf_launch):
    # what docs/usage.md's example does: ranks over the fabric fixture's daemon
    r = sf_launch([PY, "-c", PRINT_ENV], nodes=2, fabric=fabric).check_ok()
    assert {v["SIMFABRIC_SOCKET"] for v in envs(r).values()} == {fabric.socket}
    r = sf_launch([PY, "-c", "import sys; sys.exit(7)"], nodes=1)
    assert not r.ok and r.status == 7 and r.rank(0).outcome() == "exit 7"
    with pytest.raises(AssertionError, match="exit 7"):
        r.check_ok()


def test_10_15_progress_lines_on_request(tmp_path):
    p = cli("launch", "--nodes", "2", "--run-dir", str(tmp_path / "run"), "--progress", "0.3",
            "-q", "--", "sleep", "1")
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "rank(s) running" in ln]
    assert lines and "2 of 2 rank(s) running, 0 done; fabric: 0 connection(s)" in lines[0], \
        p.stderr


def test_10_16_the_pytest_driver_s_hard_timeout_dumps_stacks_and_kills_everything(sf_env,
                                                                                   tmp_path):
    sc = _scenario(tmp_path, "hang.yaml", """\
fabric: {kind: ideal}
job:
  program: command
  nodes: 2
  command: [sleep, "60"]
  timeout_s: 60
""")
    r = simfabric_pytest.run_scenario_process(sf_env, sc, str(tmp_path / "run"), timeout=1.5)
    assert r.hung and not r.passed, r.explain()
    st = open(os.path.join(r.run_dir, "hard-timeout-stacks.txt")).read()
    assert st.count("=== pid ") >= 4, st  # the launcher, the daemon, 2 ranks
    assert "sleep 60" in st and "simfabricd" in st
    assert "File " in r.stderr and "sf/runner.py" in r.stderr, r.stderr  # the launcher's stack
    assert "HARD TIMEOUT" in r.explain()


FAKE_SMI = """#!/bin/sh
[ "$1" = "-L" ] && echo "GPU 0: Fake GPU (UUID: GPU-0)"
exit 0
"""

# Stands in for build/simfabric-nccljob (its interface: tools/nccljob/nccljob.h): checks what the
# launcher gave it, and rank 0 writes results a little slower than the model (or a failure).
FAKE_NCCLJOB = r'''#!/usr/bin/python3
import argparse, json, os, sys, time
ap = argparse.ArgumentParser()
for o in ("--coll", "--sizes", "--dtype", "--op", "--warmup", "--iters", "--check",
          "--timeout-s", "--json", "--op-timeout-s"):
    ap.add_argument(o)
a = ap.parse_args()
e = os.environ
assert e["NCCL_NET"] == "simfabric" and e["NCCL_HOSTID"] == e["SIMFABRIC_NODE"]
assert e["CUDA_VISIBLE_DEVICES"] == "0" and e["NCCL_NVLS_ENABLE"] == "0", dict(e)
rank, n = int(e["RANK"]), int(e["WORLD_SIZE"])
print("fake nccljob rank %d of %d on %s: --coll %s --check %s" % (rank, n, e["NCCL_HOSTID"],
                                                                  a.coll, a.check))
if e.get("FAKE_FAIL"):
    if rank == 0:
        json.dump({"program": "simfabric-nccljob", "nranks": n, "results": [],
                   "status": "nccl_error", "error": {"code": "ncclRemoteError", "message": "x",
                                                     "rank": 1, "after_ms": 1200.0},
                   "ranks": []}, open(a.json, "w"))
    print("NCCL WARN NET/simfabric : ... ncclRemoteError", file=sys.stderr)
    sys.exit(3)
B = 25e9 / 8 * 4096 / (4096 + 82)      # job-nccl-25g's payload rate
half = {"allgather", "reducescatter", "alltoall"}
res = []
for c in a.coll.split(","):
    for s in map(int, a.sizes.split(",")):
        t = (s / 2 if c in half else s) / B / 0.8 + 30e-6
        res.append({"coll": c, "bytes": s, "count": s // 4, "iters": int(a.iters),
                    "time_us": t * 1e6, "algbw_gbps": s / t / 1e9, "busbw_gbps": 0,
                    "wrong": 0, "ok": True})
if rank == 0:
    json.dump({"program": "simfabric-nccljob", "nranks": n, "results": res, "status": "ok",
               "error": None, "ranks": []}, open(a.json, "w"))
'''


@pytest.fixture
def fake_gpu_build(sf_env, tmp_path, monkeypatch):
    """A build directory whose simfabric-nccljob is FAKE_NCCLJOB, and an nvidia-smi with one
    GPU (and no nvidia-cuda-mps-control) first on PATH."""
    b = tmp_path / "build"
    b.mkdir()
    for f in ("simfabricd", "libnccl-net-simfabric.so", "simfabric-harness"):
        os.symlink(os.path.join(sf_env.build, f), str(b / f))
    (b / "simfabric-nccljob").write_text(FAKE_NCCLJOB)
    (b / "simfabric-nccljob").chmod(0o755)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text(FAKE_SMI)
    (bin_ / "nvidia-smi").chmod(0o755)
    path = ":".join([str(bin_)] + [d for d in os.environ["PATH"].split(":") if d and
                                   not os.path.exists(os.path.join(d, "nvidia-cuda-mps-control"))])
    env = dict(os.environ, SIMFABRIC_BUILD=str(b), PATH=path)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def test_10_17_an_nccl_job_end_to_end_with_a_stand_in_program(fake_gpu_build, tmp_path):
    """The nccl program's plumbing on a CPU: its arguments, the results file, the model check,
    and MPS missing for 2 ranks on 1 GPU said plainly."""
    d = tmp_path / "run"
    p = cli("run", os.path.join(SCEN, "job-nccl-25g.yaml"), "--run-dir", str(d),
            env=fake_gpu_build)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "MPS is not available" in p.stderr and "time-sliced" in p.stderr, p.stderr
    assert "[r1] fake nccljob rank 1 of 2 on node1: --coll allreduce,allgather,reducescatter," \
        "broadcast,reduce,alltoall,sendrecv --check 1" in p.stdout, p.stdout
    assert "ok   timing" in p.stdout and "PASS" in p.stdout, p.stdout
    rep = json.loads((d / "report.json").read_text())
    rows = [c for c in rep["checks"] if c["name"] == "timing"][0]["rows"]
    assert len(rows) == 7 * 24
    big = [r for r in rows if r["bytes"] == 64 << 20]
    assert all(0.75 < r["ratio"] < 0.81 for r in big), big
    # an expected failure: which error, which ranks, how soon
    p = cli("run", os.path.join(SCEN, "job-nccl-retry-exhausted.yaml"), "--run-dir",
            str(tmp_path / "run2"), env=dict(fake_gpu_build, FAKE_FAIL="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok   failure  expected failure (error ncclRemoteError, exit [3], ranks all, " \
        "within_s 90): rank 0 (as expected), rank 1 (as expected)" in p.stdout, p.stdout
    # the same failure where none is expected
    p = cli("run", os.path.join(SCEN, "job-nccl-25g.yaml"), "--run-dir", str(tmp_path / "run3"),
            "-q", env=dict(fake_gpu_build, FAKE_FAIL="1"))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL ranks    r0 (node0) exit 3" in p.stdout, p.stdout


def test_10_40_copy_threads_share_out_the_cpus():
    assert sfranks.copy_threads(2, cpus=2) == 0      # a CI machine: the ranks need the cores
    assert sfranks.copy_threads(2, cpus=16) == 4
    assert sfranks.copy_threads(4, cpus=16) == 4
    assert sfranks.copy_threads(8, cpus=16) == 2
    assert sfranks.copy_threads(32, cpus=16) == 1


class _Proc:
    def __init__(self, rank, rc, t_exit):
        self.rank, self.rc, self.t_exit, self.killed = rank, rc, t_exit, False

    def log_text(self, limit):
        return "ncclRemoteError"


class _Launch:
    def __init__(self, procs):
        self.procs, self.timed_out = procs, False


@pytest.mark.parametrize("after_ms,exit_s,ok", [
    (2000, 3.0, True),     # noticed at 2 s, out at 3 s
    (2000, 49.0, True),    # the NCCL job program may take its own bound (40 s) to end
    (2000, 51.0, False),   # noticed in time but lingered: not "within" (audit F16)
    (11000, 12.0, False),  # noticed too late
    (None, 9.0, True),     # no report of its own: the launcher's clock
    (None, 11.0, False),
])
def test_10_40_within_s_bounds_both_clocks(after_ms, exit_s, ok):
    """expect.failure.within_s holds the program's own report of when it noticed (after_ms)
    and the launcher's observation of when it ended, the latter within the program's own
    bound of its end (40 s for the NCCL job program) after within_s."""
    f = {"error": "ncclRemoteError", "within_s": 10, "ranks": "all"}
    job = {"program": "nccl", "ranks": 1}
    err = {"code": "ncclRemoteError", "rank": 0}
    if after_ms is not None:
        err["after_ms"] = after_ms
    good, detail = sfrecipe.check_failure(f, job, _Launch([_Proc(0, 3, exit_s)]),
                                          {"error": err}, {0: "ncclRemoteError"}, "failed")
    assert good == ok, detail
