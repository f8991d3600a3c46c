# SPDX-License-Identifier: MIT
"""The message trace: SIMFABRIC_TRACE=FILE makes every process write each message it sent or
received as Chrome trace / Perfetto JSON (plugin/trace.c), SIMFABRIC_TRACE_MAX bounds it, and
`simfabric trace merge` puts the processes' files on one timeline (tools/sf/trace.py). Checked
against the harness over HDR (counts against the daemon's per-connection counters, the order of
each message's events, the tracks) and under a fault that fails messages; the daemon's own
trace of its fault windows (simfabricd --trace) on the same clock. CPU only."""
import collections
import glob
import json
import os
import subprocess
import sys

import sfctl
import sftrace
import simfabric_pytest

ROOT = simfabric_pytest.ROOT
CLI = os.path.join(ROOT, "tools", "simfabric")
HDR = os.path.join(ROOT, "scenarios", "hdr-2node.yaml")
LINK_DOWN = os.path.join(ROOT, "scenarios", "fault-link-down.yaml")
EPS = 0.0015  # us: the files' timestamps have ns resolution


def traces(d, pattern="trace-*.json"):
    out = {}
    for p in sorted(glob.glob(os.path.join(str(d), pattern))):
        with open(p) as f:
            out[p] = json.load(f)
    return out


def traced_run(harness, fabric_factory, tmp_path, scenario, tests, extra=(), env=None):
    f = fabric_factory(args=["--scenario", scenario])
    e = {"SIMFABRIC_TRACE": str(tmp_path / "trace-%n-%p.json")}
    e.update(env or {})
    r = harness(nranks=2, tests=tests, fabric=f, extra=list(extra), env=e)
    return f, r, traces(tmp_path)


def messages(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") == "msg"]


def check_order(doc, what):
    """Per track, events by time; slices on a track nest (Perfetto shows no other kind)."""
    tracks = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] != "M":
            tracks[(e["pid"], e["tid"])].append(e)
    named = {(e["pid"], e["tid"]) for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for key, evs in tracks.items():
        assert key in named, (what, key)
        ts = [e["ts"] for e in evs]
        assert ts == sorted(ts), (what, key)
        end = None
        for x in (e for e in evs if e["ph"] == "X"):
            assert end is None or x["ts"] >= end - EPS, (what, key, x)
            end = x["ts"] + x["dur"]


def check_message(x):
    """posted <= first byte <= delivered <= completed, as far as the message got."""
    a = x["args"]
    seq = [a["posted_us"], a.get("first_byte_us"), a.get("delivered_us"), a["completed_us"]]
    if a["status"] == "ok":
        assert None not in seq, x
    seq = [t for t in seq if t is not None]
    assert all(u <= v + EPS for u, v in zip(seq, seq[1:])), x
    assert abs(x["ts"] - a["posted_us"]) < EPS and abs(x["dur"] - (seq[-1] - seq[0])) < 2 * EPS, x
    for k in ("chan", "msg", "tag", "bytes", "peer"):
        assert k in a, (k, x)


def test_16_01_every_message_in_order_and_counted(harness, fabric_factory, tmp_path):
    f, r, docs = traced_run(harness, fabric_factory, tmp_path, HDR, "sizes,allreduce",
                            extra=["--max-bytes", "4194304"])
    r.check_ok()
    assert len(docs) == 2, (list(docs), r.report())
    nodes = set()
    sends, recvs = collections.Counter(), collections.Counter()
    flows = collections.defaultdict(set)
    for path, doc in docs.items():
        md = doc["metadata"]
        assert md["simfabric_trace"] == 1 and md["dropped"] == 0 and md["open_connections"] == 0
        assert doc["displayTimeUnit"] == "ns"
        assert os.path.basename(path) == "trace-%s-%d.json" % (md["node"], md["pid"])
        assert md["events"] == len(doc["traceEvents"]), path
        procs = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
        assert [p["args"]["name"] for p in procs] == [md["node"]]
        nodes.add(md["node"])
        check_order(doc, path)
        xs = messages(doc)
        assert len(xs) == md["messages"] > 0
        for x in xs:
            check_message(x)
            assert x["args"]["status"] == "ok", x
            (sends if x["name"] == "send" else recvs)[x["args"]["chan"]] += 1
        inst = collections.Counter(e["name"] for e in doc["traceEvents"] if e["ph"] == "i")
        assert inst["first byte"] == inst["delivered"] == len(xs)
        for e in doc["traceEvents"]:
            if e["ph"] in "sf":
                flows[e["id"]].add(e["ph"])
        # the NIC's track: every connection's open and close
        nic = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["tid"] == 1]
        assert sum(e["name"].startswith("open ") for e in nic) == md["connections"]
    assert nodes == {"node0", "node1"}
    # what the daemon counted per connection is what both ends traced
    chans = {c["id"]: c["msgs"] for c in f.show()["chans"]}
    assert chans and dict(sends) == chans and dict(recvs) == chans, (sends, recvs, chans)
    sent = sum(t["metrics"].get("msgs_sent", 0) for t in r.tests("sizes"))
    assert sent and sum(sends.values()) >= sent
    # each send's flow ends at its receive, in the other process
    assert flows and all(v == {"s", "f"} for v in flows.values())

    # merged: one file, both processes, every event by time
    out = tmp_path / "merged.json"
    p = subprocess.run([sys.executable, CLI, "trace", "merge", str(out)] + sorted(docs),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "2 file(s)" in p.stdout, p.stdout
    m = json.load(open(str(out)))
    ev = m["traceEvents"]
    first = next(i for i, e in enumerate(ev) if e["ph"] != "M")
    assert all(e["ph"] == "M" for e in ev[:first]) and all(e["ph"] != "M" for e in ev[first:])
    ts = [e["ts"] for e in ev[first:]]
    assert ts == sorted(ts)
    assert len(messages(m)) == sum(len(messages(d)) for d in docs.values())
    assert m["metadata"]["messages"] == len(messages(m)) and m["metadata"]["dropped"] == 0
    assert {e["pid"] for e in ev} == {d["metadata"]["pid"] for d in docs.values()}
    check_order(m, "merged")
    s = subprocess.run([sys.executable, CLI, "trace", "summary", str(out)], capture_output=True,
                       text=True)
    assert s.returncode == 0 and "node0" in s.stdout and "node1" in s.stdout, s.stderr


def test_16_02_the_bound_stops_recording_and_says_so(harness, fabric_factory, tmp_path):
    f, r, docs = traced_run(harness, fabric_factory, tmp_path, HDR, "sizes",
                            extra=["--max-bytes", "1048576"],
                            env={"SIMFABRIC_TRACE_MAX": "40", "NCCL_DEBUG": "INFO"})
    r.check_ok()
    assert len(docs) == 2, r.report()
    for path, doc in docs.items():
        md = doc["metadata"]
        assert md["max_events"] == 40 and md["dropped"] > 0 and md["dropped_messages"] > 0, md
        xs = messages(doc)
        assert 0 < len(xs) == md["messages"]
        per_msg = [e for e in doc["traceEvents"] if e.get("cat") in ("msg", "flow")]
        assert len(per_msg) <= 40, len(per_msg)
        for x in xs:
            check_message(x)
        check_order(doc, path)
    said = [ln for ln in r.stderr.splitlines() if "SIMFABRIC_TRACE_MAX (40 events) reached" in ln]
    assert sorted(ln.split("]")[0] for ln in said) == ["[rank 0", "[rank 1"], r.stderr[-4000:]


def test_16_03_a_fault_shows_as_named_failures(harness, fabric_factory, tmp_path):
    f, r, docs = traced_run(harness, fabric_factory, tmp_path, LINK_DOWN, "faults",
                            extra=["--fault-msgs", "100", "--fault-gap-us", "200",
                                   "--fault-expect", "error", "--bound", "5"])
    r.check_ok()
    assert len(docs) == 2, r.report()
    ok_sends = {}
    for path, doc in docs.items():
        check_order(doc, path)
        xs = messages(doc)
        for x in xs:
            check_message(x)
        failed = [x for x in xs if x["args"]["status"] == "failed"]
        # both directions' connections fail on each node: its send and its receive
        assert {x["name"] for x in failed} == {"send (failed)", "recv (failed)"}, path
        for x in failed:
            a = x["args"]
            assert a["fault"] == "node0-cable" and a["fault_id"] == 0, x
            assert a["nccl"] == "ncclRemoteError" and a["error"].startswith("ETIMEDOUT"), x
            assert "delivered_us" not in a, x
        ok_sends[path] = sum(x["args"]["status"] == "ok" and x["name"] == "send" for x in xs)
        faults = [e for e in doc["traceEvents"] if e["ph"] == "i" and e.get("cat") == "fault"]
        named = [e for e in faults if e["name"] == "fault 'node0-cable' (link_down)"]
        assert {e["tid"] for e in named} >= {1}, faults  # on the NIC's track too
        for e in named:
            assert e["args"]["kind"] == "link_down" and e["args"]["nccl"] == "ncclRemoteError"
        assert sum(e["name"] == "failed: fault 'node0-cable' (link_down)" for e in faults) == 2
    # The 20 messages on node0's link before the trigger went through, whichever rank sent them:
    # both ranks' sends cross it, and how they interleave is the scheduler's (a loaded machine
    # let one rank send 13 of them). Each of those was reserved before the link went down.
    assert sum(ok_sends.values()) >= 20, ok_sends
    out = tmp_path / "merged.json"
    sftrace.merge(str(out), [str(tmp_path)])
    s = sftrace.summary(sftrace.load(str(out)))
    assert "fault 'node0-cable' (link_down)" in s, s


def test_16_04_unset_writes_nothing_and_a_bad_path_only_warns(harness, fabric_factory, tmp_path):
    f = fabric_factory()
    r = harness(nranks=2, tests="sizes", fabric=f, extra=["--max-bytes", "65536"],
                env={"SIMFABRIC_TRACE_MAX": "10"})
    r.check_ok()
    assert not glob.glob(str(tmp_path / "**" / "*trace*"), recursive=True)
    r = harness(nranks=2, tests="sizes", fabric=f, extra=["--max-bytes", "65536"],
                env={"SIMFABRIC_TRACE": str(tmp_path / "no-such-dir" / "t-%p.json")})
    r.check_ok()
    assert "SIMFABRIC_TRACE: cannot write" in r.stderr and "not tracing" in r.stderr, r.stderr


def test_16_05_a_reloaded_plugin_writes_a_second_file(harness, fabric_factory, tmp_path):
    f = fabric_factory()
    r = harness(nranks=2, tests="reload", fabric=f,
                env={"SIMFABRIC_TRACE": str(tmp_path / "trace-%n.json")})
    r.check_ok()
    names = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "trace-*.json")))
    assert names == ["trace-node0.1.json", "trace-node0.json", "trace-node1.1.json",
                     "trace-node1.json"], names
    docs = traces(tmp_path)
    m = sftrace.merge_docs(sorted(docs.items()))
    check_order(m, "merged reload")
    assert len(messages(m)) >= 4
    assert sum(d["metadata"]["instance"] for d in docs.values()) == 2


def test_16_06_merge_moves_a_reused_pid_out_of_the_way(tmp_path):
    def doc(node, ts):
        return {"metadata": {"simfabric_trace": 1, "pid": 7, "node": node, "messages": 1,
                             "dropped": 2},
                "traceEvents": [
                    {"ph": "M", "pid": 7, "tid": 0, "name": "process_name",
                     "args": {"name": node}},
                    {"ph": "X", "cat": "msg", "pid": 7, "tid": 1000, "ts": ts, "dur": 1.0,
                     "name": "send", "args": {}}]}
    for node, ts in (("a", 5.0), ("b", 1.0)):
        with open(str(tmp_path / ("t-%s.json" % node)), "w") as fh:
            json.dump(doc(node, ts), fh)
    (tmp_path / "other.json").write_text('{"not": "a trace"}')
    out = str(tmp_path / "m.json")
    m, files = sftrace.merge(out, [str(tmp_path)])
    assert len(files) == 2
    xs = messages(json.load(open(out)))
    assert [x["ts"] for x in xs] == [1.0, 5.0] and len({x["pid"] for x in xs}) == 2
    assert m["metadata"]["dropped"] == 4 and m["metadata"]["messages"] == 2


def test_16_07_the_daemon_traces_its_fault_windows(harness, fabric_factory, tmp_path):
    dpath = str(tmp_path / "daemon.json")
    f = fabric_factory(args=["--scenario", os.path.join(ROOT, "scenarios", "fault-flap.yaml"),
                             "--trace", dpath])
    r = harness(nranks=2, tests="faults", fabric=f,
                extra=["--fault-msgs", "300", "--fault-gap-us", "300", "--fault-expect", "ok"],
                env={"SIMFABRIC_TRACE": str(tmp_path / "trace-%n-%p.json")})
    r.check_ok()
    listed = sfctl.faults(f.socket)
    assert f.stop() == 0  # the file is written whole at shutdown
    d = json.load(open(dpath))
    assert d["metadata"]["node"] == "simfabricd" and d["metadata"]["dropped"] == 0
    wins = [e for e in d["traceEvents"] if e["ph"] == "X"]
    assert len(wins) == listed["faults"][0]["windows"] == 4, (wins, listed)
    for w in wins:
        assert w["name"] == "node0-flap" and w["args"]["kind"] == "flap", w
        assert abs(w["dur"] - 5000.0) < EPS and not w["args"]["open"], w
    trig = [e for e in d["traceEvents"] if e["ph"] == "i" and e["name"] == "triggered"]
    assert len(trig) == 1 and trig[0]["ts"] < wins[0]["ts"]
    out = str(tmp_path / "all.json")
    m, files = sftrace.merge(out, [str(tmp_path)])
    assert len(files) == 3
    procs = {e["args"]["name"] for e in m["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {"node0", "node1", "simfabricd (faults)"}
    # the windows lie within the messages' span: one clock for every process
    xs = messages(m)
    assert min(x["ts"] for x in xs) < wins[0]["ts"] < max(x["ts"] + x["dur"] for x in xs)
