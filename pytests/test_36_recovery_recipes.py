# SPDX-License-Identifier: MIT
"""Recovery recipes (issue 14): lose a node and carry on (the NCCL job program's --on-peer-loss
shrink, and torch), a watchdog on a hang, the cost of a straggler, long queues after a fatal
fault; and a GPU test for each process and setup fault (node_freeze, straggle, regmr_fail,
connect_fail, accept_fail, comm_hang, node_kill + shrink).

The CPU tests run the NCCL job program's --dry-run (the same bootstrap, recovery protocol and
checks, with the host standing in for NCCL) and the scenario compiler; the GPU tests (marked
gpu) run real NCCL and skip with the reason elsewhere.
"""
import datetime
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

import simfabric_pytest
from test_12_nccljob import Job, nccljob  # noqa: F401 (nccljob: the fixture)
from test_13_faults import scenario

ROOT = simfabric_pytest.ROOT
SCN = os.path.join(ROOT, "scenarios")

# what every lose-a-node run of the job program does: 4 ranks, 3 collectives whose counts
# depend on the number of ranks (allgather) or its neighbours (sendrecv), 3 sizes
SWEEP = ["--dry-run", "--coll", "allreduce,allgather,sendrecv", "--sizes", "8,4K,64K",
         "--iters", "2", "--warmup", "1", "--timeout-s", "60"]
NSTEPS = 8  # allgather 8 B has less than one float per rank: skipped


# ---- lose a node and carry on: the job program, on the CPU -----------------------------------

def test_36_01_shrink_survivors_finish_every_step_exact_on_three_ranks(nccljob, tmp_path):
    j = Job(nccljob, 4, SWEEP + ["--on-peer-loss", "shrink", "--inject", "2:exit:1"], tmp_path)
    assert j.rc[2] == -9 and [j.rc[r] for r in (0, 1, 3)] == [0, 0, 0], j.report()
    d = j.json(0)
    assert d["status"] == "ok" and d["exit_code"] == 0, j.report()
    assert [(s["step"], s["lost"], s["nranks"]) for s in d["shrinks"]] == [(1, [2], 3)], d
    assert d["shrinks"][0]["cause"]["code"] == "peer_lost", d["shrinks"][0]
    # by default a new communicator of the survivors: NCCL 2.28 cannot shrink one in error
    assert d["shrinks"][0]["by"] == "reinit", d["shrinks"][0]
    res = d["results"]
    assert len(res) == NSTEPS and all(r["wrong"] == 0 and r["checked"] for r in res), res
    # the step before the loss ran on 4 ranks, the one it hit and every later one on 3
    assert [r["nranks"] for r in res] == [4] + [3] * (NSTEPS - 1), res
    # allgather's count is a multiple of the ranks that ran it: 4092 = 3 x 1364 B
    assert [r["bytes"] for r in res if r["coll"] == "allgather"] == [4092, 65532], res
    ranks = {r["rank"]: r for r in d["ranks"]}
    assert ranks[2]["lost"] and ranks[2]["status"] == "peer_lost", ranks
    assert not any(ranks[r]["lost"] for r in (0, 1, 3)), ranks
    # each survivor says so itself, with its new place
    for r, new in ((0, 0), (1, 1), (3, 2)):
        assert "lost rank(s) 2 during allreduce 4096 B" in j.err[r], j.report()
        assert "now rank %d of 3; running step 1 again (a new communicator of the " \
            "survivors)" % new in j.err[r], j.report()
        assert "survivor: 1 shrink(s), rank %d of 3 at the end; 7 step(s) from step 1" % new \
            in j.err[r] and "0 wrong element(s) here" in j.err[r], j.report()
    assert "# shrink 1: at step 1, without rank(s) 2 (peer_lost), 3 rank(s)" in j.out[0]
    assert "(the survivors carried on)" in j.out[0], j.out[0]


class Wrapped(Job):
    """Job with one rank's --inject replaced (--inject is not among the options every rank
    must share): rank 2 dies while rank 1 changes an element, in one run."""

    def __init__(self, prog, args, tmp, per_rank):
        wrapper = tmp / "wrap.sh"
        wrapper.write_text('#!/bin/sh\ncase "$RANK" in\n%s\nesac\nexec "$@"\n' % "\n".join(
            '%d) set -- "$@" --inject %s ;;' % kv for kv in per_rank.items()))
        wrapper.chmod(0o755)
        self.prog = prog
        super().__init__(str(wrapper), 4, [prog] + args, tmp)


def test_36_02_after_a_shrink_a_wrong_element_is_still_caught(nccljob, tmp_path):
    """The checks on the smaller communicator are real: one element changed on rank 1 at the
    step after the shrink is a data error (exit 2), with everything else exact."""
    j = Wrapped(nccljob, SWEEP + ["--on-peer-loss", "shrink"], tmp_path,
                {1: "1:data:3", 2: "2:exit:1"})
    assert [j.rc[r] for r in (0, 1, 3)] == [2, 2, 2], j.report()
    d = j.json(0)
    assert d["status"] == "data_error" and d["shrinks"], d
    wrong = [i for i, r in enumerate(d["results"]) if r["wrong"]]
    assert wrong == [3], d["results"]


@pytest.mark.parametrize("inject,why", [
    ("1:nccl:1", "no rank to exclude: an error with every rank alive is fatal"),
    ("0:exit:1", "rank 0 is the coordinator: losing it is fatal"),
])
def test_36_03_shrink_mode_still_fails_what_no_shrink_can_mend(nccljob, tmp_path, inject, why):
    j = Job(nccljob, 4, SWEEP + ["--on-peer-loss", "shrink", "--inject", inject], tmp_path,
            timeout=90)
    killed = int(inject[0]) if ":exit:" in inject else None
    rcs = [j.rc[r] for r in range(4) if r != killed]
    assert rcs == [3] * len(rcs), (why, j.report())
    # rank 0 waits NJ_LOSS_GRACE_S (10 s) for a lost rank before it gives up: bounded
    assert max(j.t.values()) < 10 + 20, (why, j.report())
    if killed is None:
        d = j.json(0)
        assert d["status"] == "nccl_error" and d["shrinks"] == [], d


def test_36_04_without_shrink_a_lost_rank_stops_the_job_as_before(nccljob, tmp_path):
    j = Job(nccljob, 4, SWEEP + ["--inject", "2:exit:1"], tmp_path)
    assert [j.rc[r] for r in (0, 1, 3)] == [3, 3, 3], j.report()
    d = j.json(0)
    assert d["on_peer_loss"] == "fail" and d["shrinks"] == [], d
    assert d["error"]["code"] == "peer_lost" and d["error"]["rank"] == 2, d


def test_36_01b_shrink_by_nccl_is_what_rank_0_tells_every_survivor(nccljob, tmp_path):
    """--shrink-by nccl: the method travels in rank 0's SHRINK message, so every survivor
    takes the same way (ncclCommShrink) and the JSON says which."""
    j = Job(nccljob, 4, SWEEP + ["--on-peer-loss", "shrink", "--shrink-by", "nccl",
                                 "--inject", "2:exit:1"], tmp_path)
    assert [j.rc[r] for r in (0, 1, 3)] == [0, 0, 0], j.report()
    d = j.json(0)
    assert [s["by"] for s in d["shrinks"]] == ["ncclCommShrink"], d["shrinks"]
    for r in (0, 1, 3):
        assert "running step 1 again (ncclCommShrink)" in j.err[r], j.report()


@pytest.mark.parametrize("args,says", [
    (["--on-peer-loss", "heal"], "--on-peer-loss: 'heal' is neither fail nor shrink"),
    (["--shrink-by", "magic"], "--shrink-by: 'magic' is neither reinit nor nccl"),
    (["--on-peer-loss", "shrink", "--register", "1"],
     "--on-peer-loss shrink with --register 1: the registrations would have to be made again"),
])
def test_36_05_on_peer_loss_usage_errors(nccljob, args, says):
    p = subprocess.run([nccljob, "--dry-run"] + args, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and says in p.stderr, p.stderr
    h = subprocess.run([nccljob, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "--on-peer-loss fail|shrink" in h and "NCCL_SHRINK_ABORT" in h, h
    assert "--shrink-by reinit|nccl" in h, h


# ---- lose a node and carry on: the torch recipe's loss round, on the CPU --------------------

class FakeStore:
    """torch.distributed.TCPStore's calls that the loss round makes, in memory (bytes out)."""

    def __init__(self):
        self.d, self.cv = {}, threading.Condition()

    def set(self, k, v):
        with self.cv:
            self.d[k] = v.encode() if isinstance(v, str) else v
            self.cv.notify_all()

    def check(self, keys):
        with self.cv:
            return all(k in self.d for k in keys)

    def get(self, k):
        with self.cv:
            return self.d[k]

    def wait(self, keys, timeout):
        with self.cv:
            if not self.cv.wait_for(lambda: all(k in self.d for k in keys),
                                    timeout.total_seconds()):
                raise RuntimeError("wait timed out")


def loss_round(arrivals, members=(0, 1, 2, 3), grace=0.5, meanwhile=None):
    """The survivors in arrivals ({rank: (delay_s, failed_step)}) run the round together;
    meanwhile: {rank: seconds its meanwhile() (the old group's abort) takes}."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import torch_recipes
    st, out = FakeStore(), {}

    def one(r, delay, step):
        if delay == "late":  # after rank 0's verdict, whatever the machine's load
            st.wait(["loss0/verdict"], datetime.timedelta(seconds=30))
        else:
            time.sleep(delay)
        slow = (meanwhile or {}).get(r)
        out[r] = torch_recipes.agree(
            st, r, list(members), 0, step, grace, poll_s=0.01,
            meanwhile=None if slow is None else lambda: time.sleep(slow))

    ts = [threading.Thread(target=one, args=(r,) + a) for r, a in arrivals.items()]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out, st


def test_36_17_torch_loss_round_agrees_on_the_lost_rank_and_the_earliest_step():
    # rank 3 noticed late (it was still in a collective): inside rank 0's grace it counts
    out, st = loss_round({0: (0.0, 7), 1: (0.05, 6), 3: (0.2, 7)}, grace=3.0)
    assert set(out) == {0, 1, 3}, out
    for r, (v, lost) in out.items():
        assert v == {"members": [0, 1, 3], "step": 6} and lost == [2], (r, v, lost)
    assert st.check(["loss0/open"])


def test_36_18_torch_loss_round_with_nobody_lost_is_fatal_and_a_late_rank_is_left_out():
    out, _ = loss_round({0: (0.0, 3), 1: (0.0, 3), 2: (0.0, 3), 3: (0.0, 4)})
    assert all(v == (None, []) for v in out.values()), out
    # a survivor that checks in after rank 0's grace is not among the members: it finds
    # itself left out (the script then stops) rather than hang
    out, _ = loss_round({0: (0.0, 5), 1: (0.0, 5), 3: ("late", 5)}, grace=0.5)
    v, lost = out[3]
    assert v["members"] == [0, 1] and 3 not in v["members"] and lost == [2, 3], out


# ---- expect: failure: survivors -------------------------------------------------------------

def check(sf_env, tmp_path, text):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return subprocess.run([sf_env.daemon, "--check", "--scenario", str(path)],
                          capture_output=True, text=True, timeout=60)


JOB4 = """name: t
fabric: {kind: ideal}
job: {program: nccl, nodes: 4, args: [--dry-run]}
expect:
  failure: %s
"""


@pytest.mark.parametrize("failure,says", [
    ("{survivors: exact}", "t.yaml:5:24: survivors: needs ranks: [...], the ranks that are lost "
     "(the others must exit 0 with exact results)"),
    ("{ranks: any, survivors: exact}", "t.yaml:5:36: survivors: needs ranks: [...]"),
    ("{ranks: [2], survivors: most}", "t.yaml:5:36: survivors: 'most' is not one of exact"),
    ("{hang: 5s, survivors: exact}", "t.yaml:5:34: survivors: not with hang"),
])
def test_36_06_survivors_parse_errors(sf_env, tmp_path, failure, says):
    p = check(sf_env, tmp_path, JOB4 % failure)
    assert p.returncode == 2 and says in p.stderr, p.stderr


def test_36_07_survivors_resolves_into_the_dump(sf_env, tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(JOB4 % "{signal: KILL, ranks: [2], survivors: exact}")
    p = subprocess.run([sf_env.daemon, "--dump-fabric", "--scenario", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    f = json.loads(p.stdout)["expect"]["failure"]
    assert f["survivors"] == "exact" and f["ranks"] == [2] and f["signal"] == "SIGKILL", f


def test_36_08_run_passes_the_cpu_recipe(sf_run):
    r = sf_run(os.path.join(SCN, "job-nccl-dryrun-lose-node-shrink.yaml")).check_ok()
    c = {x["name"]: x for x in r.json["checks"]}
    assert "rank(s) 2 lost as expected; 3 survivor(s) exited 0: 8 result(s), every one exact" \
        in c["failure"]["detail"], r.explain()
    assert "shrank 1 time(s): at step 1 without [2]" in c["failure"]["detail"], r.explain()


def test_36_09_survivors_check_fails_when_the_survivors_stop(sf_run, tmp_path):
    """The same recipe without --on-peer-loss shrink: rank 2 dies as expected, but the others
    stop with exit 3, and failure: survivors: exact must say so."""
    text = open(os.path.join(SCN, "job-nccl-dryrun-lose-node-shrink.yaml")).read()
    text = text.replace("--on-peer-loss, shrink, ", "")
    assert "shrink" not in text.split("args:")[1].split("\n")[0]
    path = tmp_path / "noshrink.yaml"
    path.write_text(text)
    r = sf_run(str(path))
    assert r.rc == 1 and not r.passed, r.explain()
    c = {x["name"]: x for x in r.json["checks"]}
    d = c["failure"]["detail"]
    assert not c["failure"]["ok"] and "expected rank(s) 2 lost and the survivors exact" in d, d
    assert "r0 (node0) exit 3" in d and "the program reported peer_lost" in d, d


# ---- the watchdog recipe's flight recorder check (expect: flight_recorder) --------------------

def fr_dump(nseq, stuck_state="scheduled", coll="nccl:all_reduce", ranks="[0, 1, 2]"):
    """A dump as PyTorch's flight recorder writes it (version 2): nseq collectives of group
    0, all completed but the last."""
    return {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                  "ranks": ranks}},
            "entries": [{"record_id": i, "pg_id": 0, "process_group": ["0", "default_pg"],
                         "collective_seq_id": i + 1, "p2p_seq_id": 0, "op_id": i + 1,
                         "profiling_name": coll, "input_sizes": [[262144]],
                         "state": "completed" if i + 1 < nseq else stuck_state,
                         "is_p2p": False, "retired": i + 1 < nseq, "timeout_ms": 10000}
                        for i in range(nseq)]}


class FakeRun:
    def __init__(self, run_dir):
        self.run_dir = str(run_dir)


def fr_check(tmp_path, dumps, want=None, raw=None):
    import pickle

    from sf import recipe as sfrecipe
    for r, d in dumps.items():
        (tmp_path / ("nccl_trace_rank_%d" % r)).write_bytes(
            raw[r] if raw and r in raw else pickle.dumps(d))
    want = want or {"collective": "all_reduce", "missing": [1], "prefix": "nccl_trace_rank_"}
    return sfrecipe.check_flight_recorder(want, FakeRun(tmp_path), {"ranks": 3})


def test_36_10_flight_recorder_names_the_hung_collective_and_the_frozen_rank(tmp_path):
    ok, detail = fr_check(tmp_path, {0: fr_dump(42), 2: fr_dump(42)})
    assert ok, detail
    assert "nccl:all_reduce (#42 of group 0) never completed; rank(s) 1 never joined it; " \
           "dumps from rank(s) 0, 2" == detail, detail


@pytest.mark.parametrize("dumps,want,says", [
    # the frozen rank did reach #42 (its dump has it): nobody is missing
    ({0: fr_dump(42), 1: fr_dump(42), 2: fr_dump(42)}, None,
     "rank(s) none never joined it; dumps from rank(s) 0, 1, 2: expected rank(s) 1 missing"),
    # rank 1 stopped one earlier, but rank 2 is not in the dumps at all: both are missing
    ({0: fr_dump(42), 1: fr_dump(41, stuck_state="completed")}, None,
     "rank(s) 1, 2 never joined it"),
    ({0: fr_dump(42, coll="nccl:broadcast"), 2: fr_dump(42)}, None,
     "nccl:broadcast (#42 of group 0) never completed"),
    ({0: fr_dump(42, stuck_state="completed")}, None, "every collective in them completed"),
    ({}, None, "no flight recorder dump nccl_trace_rank_<rank> in"),
])
def test_36_11_flight_recorder_check_fails_what_does_not_match(tmp_path, dumps, want, says):
    ok, detail = fr_check(tmp_path, dumps, want)
    assert not ok and says in detail, detail


def test_36_12_flight_recorder_dumps_are_data_never_code(tmp_path):
    import pickle
    d = fr_dump(7)
    # PyTorch's pickler may wrap a dict in its type tag: read, as the dict itself
    tagged = b"ctorch.jit._pickle\nrestore_type_tag\n(" + pickle.dumps(d, 0)[:-1] + \
        b"S'Dict[str, Any]'\ntR."
    # anything else that would run on load is refused, not run
    marker = tmp_path / "ran"
    evil = b"cos\nsystem\n(S'touch %s'\ntR." % str(marker).encode()
    ok, detail = fr_check(tmp_path, {0: d, 2: d}, raw={0: tagged, 2: evil})
    assert not marker.exists()
    assert not ok and "nccl_trace_rank_2: not a flight recorder dump (os.system is not in a " \
        "flight recorder dump)" in detail and "dumps from rank(s) 0" in detail, detail
    # the JSON format reads too
    (tmp_path / "nccl_trace_rank_2").write_text(json.dumps(d))
    ok, detail = fr_check(tmp_path, {}, None)
    assert ok and "dumps from rank(s) 0, 2" in detail, detail


@pytest.mark.parametrize("prog,fr,says", [
    ("{program: nccl, nodes: 3}", "{collective: all_reduce, missing: [1]}",
     "t.yaml:5:20: flight_recorder: PyTorch writes flight recorder dumps: program torch or "
     "command, not nccl"),
    ("{program: torch, nodes: 3}", "{missing: [1]}",
     "t.yaml:5:20: collective: missing: flight_recorder needs collective: (the one that hung"),
    ("{program: torch, nodes: 3}", "{collective: all_reduce, missing: [3]}",
     "t.yaml:5:55: missing: '3' is not an integer in 0..2 (the job's ranks)"),
    ("{program: torch, nodes: 3}", "{collective: all_reduce, missing: [1], prefix: a/b}",
     "t.yaml:5:67: prefix: a file name in the run directory (no '/'"),
])
def test_36_13_flight_recorder_parse_errors(sf_env, tmp_path, prog, fr, says):
    p = check(sf_env, tmp_path, "name: t\nfabric: {kind: ideal}\njob: %s\nexpect:\n"
              "  flight_recorder: %s\n" % (prog, fr))
    assert p.returncode == 2 and says in p.stderr, p.stderr


# ---- straggler cost --------------------------------------------------------------------------

def harness_seconds(run_dir):
    """The faults test's span over both ranks: first post to last completion."""
    with open(os.path.join(run_dir, "harness.json")) as f:
        m = [t["metrics"] for t in json.load(f)["tests"] if t["name"] == "faults"]
    assert len(m) == 2 and all(x["received"] == x["msgs"] and not x["wrong"] for x in m), m
    return max(x["t_end"] for x in m) - min(x["t_start"] for x in m)


def straggle_bounds(t0, period, duty, drain):
    """What a straggle of duty x period costs a job that takes t0 without it, by the model:
    at least t0 x P / (P - D + drain) (the stopped node's NIC drains what it had posted, drain
    seconds of link time, every stop), at most t0 / (1 - duty) + P (no drain, a period's
    rounding: the run may end just after a stop)."""
    d = duty * period
    return t0 * period / (period - d + drain), t0 / (1 - duty) + period


@pytest.mark.timing
def test_36_14_straggler_costs_what_the_duty_cycle_predicts(sf_run, sf_env, tmp_path):
    path = os.path.join(SCN, "job-harness-straggle.yaml")
    text = open(path).read()
    base = tmp_path / "base.yaml"
    base.write_text(re.sub(r"(?ms)^faults:\n.*?^job:", "job:", text))
    assert "action: straggle" not in open(str(base)).read(), "the fault is gone"
    r0 = sf_run(str(base)).check_ok()
    r1 = sf_run(path).check_ok()
    t0, t1 = harness_seconds(r0.run_dir), harness_seconds(r1.run_dir)
    # 4 messages of 64 KiB in flight each way, at 0.25 Gb/s less the packets' headers
    drain = 4 * 65536 * 8 / 0.25e9
    lo, hi = straggle_bounds(t0, 0.2, 0.5, drain)
    # 10 % on each side for what the model leaves out (SIGSTOP/SIGCONT's latency, the refill)
    assert 0.9 * lo <= t1 <= 1.1 * hi, (
        "straggled %.3f s, %.3f s without: %.2fx; the model says %.3f..%.3f s" % (
            t1, t0, t1 / t0, lo, hi), r1.explain())
    # the slow node, as simfabric report shows it: named, its stops counted, their time
    rep = subprocess.run([sf_env.cli, "report", r1.run_dir], capture_output=True, text=True,
                         timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert "straggle   on       straggle of node node1" in rep.stdout, rep.stdout
    m = re.search(r"delayed (\d+) \(([\d.]+) ms in all\)", rep.stdout)
    assert m, rep.stdout
    stops, stopped = int(m.group(1)), float(m.group(2)) / 1e3
    # stopped about half the straggled run: duty x its length, within a period
    assert abs(stopped - 0.5 * t1) <= 0.2 + 0.1 * t1, (stopped, t1, rep.stdout)
    assert abs(stops - t1 / 0.2) <= 2, (stops, t1, rep.stdout)


# ---- on the GPU: a test for each process and setup fault, and the recipes ---------------------
# Real NCCL through the plugin, one emulated node per rank (ranks may share one GPU under MPS).
# Skipped with the reason where there is no GPU or the job program is not built (sf_nccl_gpu).

def gpu_job(paths, tmp_path, name, faults, args, nodes=2, timeout=180):
    """The job program on test_13's fabric (25 Gb/s, the RC budget of 29.4 ms) with faults."""
    text = open(scenario(tmp_path, faults, name, nodes)).read()
    return simfabric_pytest.nccljob(
        paths, tmp_path, name, ["--coll", "allreduce", "--sizes", "1M", "--warmup", "5",
                                "--op-timeout-s", "30", "--timeout-s", str(timeout)] + list(args),
        nodes=nodes, scenario_text=text, env={"NCCL_DEBUG": "WARN"}, timeout=timeout)


def explain(r):
    return "%s\n%s" % (r.summary(), r.logs(limit=20000))


def run_ok(sf_run, path):
    r = sf_run(path)
    if r.skipped:
        pytest.skip(r.skipped)
    return r.check_ok()


@pytest.mark.gpu
def test_36_20_gpu_node_freeze_hangs_nccl_with_the_frozen_rank_stopped(sf_nccl_gpu, sf_run):
    r = run_ok(sf_run, os.path.join(SCN, "job-nccl-freeze-hang.yaml"))
    c = {x["name"]: x for x in r.json["checks"]}
    assert "T (stopped)" in c["failure"]["detail"], r.explain()


@pytest.mark.gpu
@pytest.mark.timing
def test_36_21_gpu_straggle_costs_what_the_duty_cycle_predicts(sf_nccl_gpu, sf_run, sf_env,
                                                              tmp_path):
    path = os.path.join(SCN, "job-nccl-straggle.yaml")
    base = tmp_path / "base.yaml"
    base.write_text(re.sub(r"(?ms)^faults:\n.*?^job:", "job:", open(path).read()))
    times = []
    for p in (str(base), path):
        r = run_ok(sf_run, p)
        with open(os.path.join(r.run_dir, "nccljob.json")) as f:
            res = json.load(f)["results"]
        assert len(res) == 1 and res[0]["wrong"] == 0, res
        times.append(res[0]["time_us"] * res[0]["iters"] / 1e6)
    t0, t1 = times
    # NCCL's buffers in flight: at most 8 MiB at 25 Gb/s, drained in each stop
    lo, hi = straggle_bounds(t0, 0.2, 0.5, 8 * 2 ** 20 * 8 / 25e9)
    assert 0.8 * lo <= t1 <= 1.2 * hi, ("straggled %.3f s, %.3f s without; the model says "
                                         "%.3f..%.3f s" % (t1, t0, lo, hi), r.explain())
    rep = subprocess.run([sf_env.cli, "report", r.run_dir], capture_output=True, text=True,
                         timeout=120)
    assert "straggle of node node1" in rep.stdout, rep.stdout


@pytest.mark.gpu
def test_36_22_gpu_regmr_fail_fails_init_with_system_error_and_no_hang(sf_nccl_gpu, sf_run):
    run_ok(sf_run, os.path.join(SCN, "job-nccl-regmr-fail.yaml"))


@pytest.mark.gpu
@pytest.mark.parametrize("action,who", [("connect_fail", "node0"), ("accept_fail", "node1")])
def test_36_23_gpu_a_failing_connect_or_accept_ends_every_rank_without_a_hang(
        sf_nccl_gpu, tmp_path, action, who):
    r, res = gpu_job(sf_nccl_gpu, tmp_path, action, """
- {name: nope, action: %s, node: %s, nth: 1}
""" % (action, who), ["--iters", "20"], timeout=120)
    logs = r.logs(limit=200000)
    assert res is not None and res["status"] in ("nccl_error", "timeout"), explain(r)
    assert all(p.rc not in (0, None) for p in r.procs), explain(r)
    assert "fault #0 'nope' (%s of node %s" % (action, who) in logs, explain(r)
    fl = r.faults["faults"][0]
    assert fl["failed"] >= 1, (fl, explain(r))
    assert r.seconds < 120, explain(r)


@pytest.mark.gpu
def test_36_24_gpu_comm_hang_for_a_while_stalls_nccl_then_it_goes_on_exact(sf_nccl_gpu,
                                                                          tmp_path):
    r, res = gpu_job(sf_nccl_gpu, tmp_path, "wedge", """
- {name: wedge, action: comm_hang, conn: {from: node0, to: node1}, for: 2s,
   after: {messages: 400, conn: {from: node0, to: node1}}}
""", ["--iters", "3000", "--timing", "each"], timeout=180)
    assert res is not None and res["status"] == "ok", explain(r)
    x = res["results"][0]
    assert x["wrong"] == 0, x
    # one iteration waited out the hang: a stall of about 2 s, no error
    assert x["max_us"] >= 1.5e6 and x["stalls"] >= 1, x
    assert r.faults["faults"][0]["hit"] >= 1, r.faults


@pytest.mark.gpu
def test_36_25_gpu_node_kill_then_shrink_the_survivors_finish_exact(sf_nccl_gpu, sf_run):
    r = run_ok(sf_run, os.path.join(SCN, "job-nccl-lose-node-shrink.yaml"))
    with open(os.path.join(r.run_dir, "nccljob.json")) as f:
        d = json.load(f)
    assert d["status"] == "ok" and [s["lost"] for s in d["shrinks"]] == [[2]], d["shrinks"]
    assert all(x["wrong"] == 0 for x in d["results"]) and len(d["results"]) == 9, d["results"]
    assert d["results"][-1]["nranks"] == 3, d["results"]
    logs = r.logs(200000)
    for rank in (0, 1, 3):
        assert "nccljob[rank %d]: survivor: 1 shrink(s)" % rank in logs, r.explain()


# test_36_26 ran the torch recipes (job-torch-lose-node-shrink.yaml, job-torch-watchdog-hang.yaml)
# and checked their expectations, as test_10_00 does for every shipped job: the GPU suite ran
# them twice (270 s of an H100's time, the most of any test); test_10_00 runs them now.


# ---- long queues after a fatal fault ----------------------------------------------------------

def test_36_15_job_program_with_20000_iterations_stops_within_its_op_timeout(sf_run):
    r = sf_run(os.path.join(SCN, "job-nccl-dryrun-long-queue.yaml")).check_ok()
    # op_timeout_s 3 s, then the abort: nothing waits for the 20000 iterations
    assert r.seconds < 3 + 20, r.explain()


BLOCKED = """name: blocked
fabric: {kind: ideal}
job:
  program: command
  nodes: 2
  command: ["{python}", -c, "%s"]
  timeout_s: %d
expect:
  failure: %s
"""
# rank 1 blocks for good, as nccl-tests' enqueue behind a dead proxy does; rank 0 does what
# nccl-tests' short cycles do (exit 3 at once), or blocks too
ONE_FAILS = ("import os, time; r = int(os.environ['RANK']); os._exit(3) if r == 0 else "
             "time.sleep(3600)")
ALL_BLOCK = "import time; time.sleep(3600)"


@pytest.mark.parametrize("code,timeout,failure,bound", [
    # one rank fails, one blocks: torn down within_s + 2 s after the failure
    (ONE_FAILS, 120, "{exit: 3, ranks: [0], within_s: 5}", 5 + 2 + 15),
    # every rank blocks: failure: {error: timeout} passes at the job's timeout_s, stacks dumped
    (ALL_BLOCK, 8, "{error: timeout}", 8 + 20),
])
def test_36_16_run_catches_a_blocked_rank_within_the_failure_bound(sf_run, tmp_path, code,
                                                                   timeout, failure, bound):
    path = tmp_path / "blocked.yaml"
    path.write_text(BLOCKED % (code, timeout, failure))
    r = sf_run(str(path)).check_ok()
    assert r.seconds < bound, r.explain()


@pytest.mark.gpu
def test_36_27_gpu_twenty_thousand_queued_allreduces_end_within_the_bound(sf_nccl_gpu, sf_run):
    r = run_ok(sf_run, os.path.join(SCN, "job-nccl-long-queue.yaml"))
    assert r.seconds < 60 + 40 + 30, r.explain()  # within_s, the job program's end, start-up


def test_36_28_a_slow_abort_does_not_leave_its_survivor_out():
    # rank 1's abort of the old group takes twice rank 0's grace: it checked in first, so it
    # is in; the verdict waits for nobody's abort
    out, _ = loss_round({0: (0.0, 4), 1: (0.0, 4), 3: (0.0, 5)}, grace=0.5,
                        meanwhile={1: 1.0, 3: 0.0})
    for r in (0, 1, 3):
        v, lost = out[r]
        assert v == {"members": [0, 1, 3], "step": 4} and lost == [2], (r, out[r])


class _Proc:
    """A finished rank, as the launcher's Proc reports it (what check_failure reads)."""
    def __init__(self, rank, rc, pid):
        self.rank, self.rc, self.pid, self.killed, self.t_exit = rank, rc, pid, None, 7.5
        self.label, self.node = "r%d" % rank, "node%d" % rank

    def log_text(self, limit=0):
        return ""

    def outcome(self):
        return "exit 0" if self.rc == 0 else "killed by signal %d" % -self.rc


@pytest.mark.parametrize("log_pid,ok", [(4242, True), (None, False), (4343, False)])
def test_36_29_a_node_kill_victim_that_mps_let_run_may_die_of_its_abort(tmp_path, log_pid, ok):
    """expect.failure signal: SIGKILL under MPS: the daemon stops the victim at the fault, has
    MPS end its GPU work, then kills it; when MPS does not end it while the victim is stopped,
    the daemon lets it run (its log says so for that pid), and PyTorch's abort may beat the
    SIGKILL. Only then is SIGABRT the kill's, and the verdict says why; without that line, or
    with it for another pid, SIGABRT fails the expectation as before."""
    from sf import recipe
    if log_pid:
        (tmp_path / "simfabricd.log").write_text(
            "simfabricd: mps: pid %d: MPS has not ended its work with the client stopped: "
            "letting it run (SIGCONT) until MPS answers or the bound\n" % log_pid)
    procs = [_Proc(0, 0, 100), _Proc(1, 0, 101), _Proc(2, -6, 4242)]
    lr = type("LR", (), {"procs": procs, "timed_out": False, "run_dir": str(tmp_path),
                         "stacks": None})()
    f = {"ranks": [2], "signal": "SIGKILL", "survivors": "exact"}
    raw = {"results": [{"ok": True, "wrong": 0}], "shrinks": [{"step": 25, "lost": [2]}]}
    good, what = recipe.check_failure(f, {"program": "torch", "ranks": 3}, lr, raw, {}, "ok")
    assert good == ok, what
    if ok:
        assert "rank 2 died of SIGABRT, not SIGKILL: the node_kill stopped it" in what, what
    else:
        assert "rank 2: killed by SIGABRT, not killed by SIGKILL" in what, what
