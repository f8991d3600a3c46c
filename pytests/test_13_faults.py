# SPDX-License-Identifier: MIT
"""Faults end to end: the harness's `faults` test (a ring of timed, checked messages) over
small fabrics with one fault timeline each, and live control through op=fault.

The fabric: nodes on one switch, 25 Gb/s, an ACK timeout T_o of 4.096 us x 2^10 = 4.19 ms and
retry_count 7, so the retry budget is 7 T_o = 29.4 ms and a message whose first packet is lost
at u fails at u + 8 T_o = u + 33.6 ms. Fault times come from the daemon (op=fault verb=list:
its origin and the fabric's epoch on CLOCK_MONOTONIC, the clock the harness stamps with)."""
import glob
import json
import os
import random
import sys

import pytest

import sfctl

T_O = 4096 * 2 ** 10
RETRY = 7
BUDGET = RETRY * T_O
FAIL_AFTER = (RETRY + 1) * T_O

FABRIC = """name: {name}
seed: {seed}
fabric:
  defaults:
    link: {{rate_gbps: 25, latency_ns: 500}}
    nic: {{timeout_exp: 10, retry_count: {retry}}}
  nodes: {{count: {nodes}, name: "node{{i}}"}}
  switches:
    - {{name: sw0}}
  links:
    - ends: [all, sw0]
faults:
{faults}
"""


def scenario(tmp_path, faults, name="fault-test", nodes=2, seed=1):
    body = "\n".join("  " + l for l in faults.strip("\n").splitlines()) or "  []"
    text = FABRIC.format(name=name, seed=seed, nodes=nodes, retry=RETRY, faults=body)
    p = tmp_path / (name + ".yaml")
    p.write_text(text)
    return str(p)


class Run:
    def __init__(self, r, f, trace_dir=None):
        self.r, self.f = r, f
        self.sends = []  # every send the plugin traced (SIMFABRIC_TRACE): its args
        for p in sorted(glob.glob(os.path.join(str(trace_dir), "trace-*.json"))) if trace_dir else ():
            with open(p) as fo:
                self.sends += [e["args"] for e in json.load(fo)["traceEvents"]
                               if e["ph"] == "X" and e.get("cat") == "msg" and e["name"].startswith("send")]
        self.ranks = {}
        for t in r.tests("faults"):
            self.ranks[t["rank"]] = t
        try:
            self.faults = sfctl.faults(f.socket)
        except sfctl.CtlError as e:
            self.faults = {"error": str(e), "faults": []}

    def m(self, rank):
        return self.ranks[rank]["metrics"]

    def report(self):
        brief = {k: {kk: vv for kk, vv in t["metrics"].items() if "times" not in kk}
                 for k, t in self.ranks.items()}
        return "%s\n--- faults ---\n%s\n--- metrics ---\n%s" % (
            self.r.report(), json.dumps(self.faults, indent=1), json.dumps(brief, indent=1))

    def origin(self, fid=0):
        f = self.faults["faults"][fid]
        assert f["origin_ns"] > 0, self.report()
        return self.faults["epoch_ns"] + f["origin_ns"]


def run(harness, fabric_factory, tmp_path, faults, expect="ok", msgs=100, size=65536, gap_us=0,
        nodes=2, extra=(), tests="faults", name="fault-test", seed=1):
    f = fabric_factory(args=["--scenario", scenario(tmp_path, faults, name, nodes, seed)])
    argv = ["--fault-msgs", str(msgs), "--fault-bytes", str(size), "--fault-gap-us", str(gap_us),
            "--fault-expect", expect, "--bound", "5", "--max-bytes", str(max(size, 4096))]
    traces = tmp_path / ("traces-" + name)
    traces.mkdir(exist_ok=True)
    r = harness(nranks=nodes, tests=tests, fabric=f, extra=argv + list(extra), timeout=120,
                env={"SIMFABRIC_TRACE": str(traces / "trace-%n-%p.json")})
    return Run(r, f, traces)


def latencies(m, key="recv_times"):
    return [(d - p) for p, d in m[key] if d]


def tolerance(request):
    """How late a rank may see its error after the model's time: 1 ms when timing is checked
    strictly (the brief's bound). Otherwise the harness's --bound (5 s): a rank that polls on a
    loaded machine is kept off its CPU for as long as the scheduler likes (272 ms seen beside
    two CPU hogs and two other test suites, where 20 ms was assumed). It cannot hold the retry
    count either way; the model's own failure time in the trace does (check_fail_time)."""
    return 1e-3 if request.config.getoption("-m") == "timing" else 5.0


def check_model_fail_time(run_, origin):
    """The model's failure time of the first send each connection lost, from the plugin's trace
    (model_completed_us: when chan fails it, whenever the rank looks): u + 8 T_o, u = max(origin,
    the model's post). The trace stamps a send's post just after chan posted it to the model, so
    u <= max(origin, posted_us): the failure lies in [origin, max(origin, posted_us)] + 8 T_o,
    to the ns (1 us of slack for the float arithmetic). A retry count off by one adds T_o
    (4.19 ms) and fails this, unless the sender was descheduled inside the post call for that
    long. A loaded machine does not move these times; it only makes ranks see them late."""
    first = {}
    for a in run_.sends:
        if a["status"] == "failed" and "fault_id" in a and "model_completed_us" in a:
            if a["chan"] not in first or a["msg"] < first[a["chan"]]["msg"]:
                first[a["chan"]] = a
    assert first, ("no send failed by a fault in the traces", run_.report())
    for a in first.values():
        t = a["model_completed_us"] * 1e-6 - FAIL_AFTER / 1e9
        assert origin - 1e-6 <= t <= max(origin, a["posted_us"] * 1e-6) + 1e-6, (
            "the model failed message %d of %s at u + 8 T_o + %.3f ms (T_o %.3f ms)" % (
                a["msg"], a["chan"], (t - max(origin, a["posted_us"] * 1e-6)) * 1e3,
                T_O / 1e6), a, run_.report())


def check_fail_time(run_, request, *ranks):
    """Faults fail a message at u + 8 T_o, u = max(origin, its post): the first message each
    connection lost (later ones fail with it: their queue pair is in error). The model's time
    is held exactly (check_model_fail_time). A rank's first error may come from either of its
    connections, so each lies between origin + 8 T_o and the latest first-lost post + 8 T_o
    (never early; late by at most the tolerance)."""
    origin = run_.origin() / 1e9
    check_model_fail_time(run_, origin)
    tol = tolerance(request)
    lo = origin + FAIL_AFTER / 1e9
    hi = lo
    for k in run_.ranks:
        lost = [p for p, d in run_.m(k)["send_times"] if not d]
        if lost:
            hi = max(hi, max(origin, lost[0]) + FAIL_AFTER / 1e9)
    for k in ranks:
        e = run_.m(k)["first_error"]
        assert e and e["rc"].startswith("ncclRemoteError"), run_.report()
        assert e["t"] >= lo - 50e-6, ("rank %d failed %.3f ms before the model's time" %
                                      (k, (lo - e["t"]) * 1e3), run_.report())
        assert e["t"] <= hi + tol, ("rank %d failed %.3f ms after the model's time" %
                                    (k, (e["t"] - hi) * 1e3), run_.report())
        assert "fault #" in e["warn"] and "link" in e["warn"], run_.report()


def test_13_01_link_down_longer_than_the_budget_fails_both_ends_at_the_modelled_time(
        harness, fabric_factory, tmp_path, request):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: cable0, action: link_down, link: [node0, sw0], after: {messages: 20, link: node0},
   for: 200ms}
""", expect="error", gap_us=200)
    rn.r.check_ok()
    check_fail_time(rn, request, 0, 1)
    f = rn.faults["faults"][0]
    assert f["failed"] >= 2 and f["windows"] == 1 and f["action"] == "link_down", rn.report()
    # 20 messages went through before the trigger, exact
    assert rn.m(0)["sent"] >= 20 - 4 and rn.m(0)["wrong"] == 0, rn.report()
    log = rn.f.log()
    assert "window 0 begins at" in log and "fabric time; wall" in log, log
    assert "triggered at" in log, log


@pytest.mark.parametrize("margin_ms,expect", [(-1, "ok"), (1, "error")],
                         ids=["just-shorter", "just-longer"])
def test_13_02_both_sides_of_the_retry_budget(harness, fabric_factory, tmp_path, request,
                                              margin_ms, expect):
    d_ns = BUDGET + margin_ms * 1000000
    rn = run(harness, fabric_factory, tmp_path, """
- {name: edge, action: link_down, link: [node0, sw0], after: {messages: 10, link: node0},
   for: %dns}
""" % d_ns, expect=expect, gap_us=100, msgs=60)
    rn.r.check_ok()
    f = rn.faults["faults"][0]
    if expect == "ok":
        assert f["delayed"] >= 1 and f["failed"] == 0, rn.report()
        # a delayed message resumes at the 7th retry: u + 7 T_o, and u is after its post
        worst = max(latencies(rn.m(1)) + latencies(rn.m(0)))
        assert worst >= BUDGET / 1e9 - 1e-4, (worst, rn.report())
        assert f["delay_ns"] >= BUDGET, rn.report()
        assert rn.m(0)["received"] == 60 and rn.m(1)["received"] == 60, rn.report()
    else:
        check_fail_time(rn, request, 0, 1)


def test_13_03_a_flap_shorter_than_the_budget_only_delays(harness, fabric_factory, tmp_path):
    """fault-flap.yaml: 4 outages of 5 ms, 20 ms apart, from node0's first message; 300
    messages each way, one every 300 us: 90 ms of traffic on an idle machine, so each outage
    meets messages, and each is only delayed. The windows are in fabric time; the traffic runs
    when the ranks get their CPUs. Beside a CPU hog per core and two more (make test-stress on a
    shared host), the ranks were kept off their CPUs through all four windows and the flap met
    nothing (1 run in 25, hit 0: 300 messages took 3.6 s): a run where the windows met fewer
    than two messages tested nothing and runs again, on a fresh daemon, up to three times."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    tries = []
    for attempt in range(3):
        f = fabric_factory(args=["--scenario", os.path.join(root, "scenarios", "fault-flap.yaml")])
        r = harness(nranks=2, tests="faults", fabric=f, timeout=120,
                    extra=["--fault-msgs", "300", "--fault-gap-us", "300", "--fault-expect", "ok"])
        rn = Run(r, f)
        rn.r.check_ok()
        fl = rn.faults["faults"][0]
        # whatever the machine's load: four windows, nothing failed, every message exact
        assert fl["windows"] == 4 and fl["failed"] == 0, rn.report()
        for k in (0, 1):
            assert rn.m(k)["received"] == 300 and rn.m(k)["wrong"] == 0, rn.report()
        assert fl["delayed"] == fl["hit"], rn.report()  # every message it met, only delayed
        tries.append("hit %d in %.2f s of traffic" % (fl["hit"], rn.m(0)["t_end"] -
                                                      rn.m(0)["t_start"]))
        if fl["hit"] >= 2:
            break
    assert fl["delayed"] >= 2, ("the ranks were off their CPUs through every window, %d runs: "
                                "%s" % (len(tries), "; ".join(tries)), rn.report())
    # a message caught by an outage waits for a retry (T_o = 4.19 ms after its loss): at least
    # until the link is up
    assert max(latencies(rn.m(1)) + latencies(rn.m(0))) >= 1e-3, rn.report()


def test_13_04_stall_on_a_link_resumes_at_its_end(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: pause, action: stall, link: [node1, sw0], direction: backward,
   after: {messages: 10, link: node0}, for: 12ms}
""", expect="ok", gap_us=100, msgs=60)
    rn.r.check_ok()
    f = rn.faults["faults"][0]
    assert f["delayed"] >= 1 and f["failed"] == 0 and f["delay_ns"] > 5000000, rn.report()
    assert max(latencies(rn.m(1))) >= 5e-3, rn.report()  # node0 -> node1 crosses sw0 -> node1


def test_13_05_stall_of_one_connection_past_the_budget_fails_it_alone(
        harness, fabric_factory, tmp_path, request):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: wedge, action: stall, conn: {from: node0, to: node1}, after: {messages: 10,
   conn: {from: node0, to: node1}}}
""", expect="either", gap_us=100, msgs=60)
    rn.r.check_ok()
    m0, m1 = rn.m(0), rn.m(1)
    assert m0["first_error"] and m0["first_error"]["op"] == "send", rn.report()
    assert m1["first_error"] and m1["first_error"]["op"] == "recv", rn.report()
    check_fail_time(rn, request, 0, 1)
    assert "no progress" in m0["first_error"]["warn"], rn.report()


def test_13_06_reset_fails_both_ends(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: qp-reset, action: reset, conn: [node0, node1], after: {messages: 10, link: node0}}
""", expect="error", gap_us=100, msgs=60)
    rn.r.check_ok()
    for k in (0, 1):
        e = rn.m(k)["first_error"]
        assert "reset" in e["warn"] and "qp-reset" in e["warn"], rn.report()


def test_13_07_degrade_slows_messages_in_its_window(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: slow, action: degrade, link: [node0, sw0], after: {messages: 10, link: node0},
   for: 40ms, set: {rate_gbps: 0.1, add_latency_ns: 100000}}
""", expect="ok", gap_us=100, msgs=60)
    rn.r.check_ok()
    f = rn.faults["faults"][0]
    assert f["hit"] >= 1, rn.report()
    # 64 KiB at 0.1 Gb/s is 5.2 ms on the wire
    assert max(latencies(rn.m(1))) >= 5.2e-3, rn.report()
    assert rn.m(1)["wrong"] == 0 and rn.m(1)["received"] == 60, rn.report()


def test_13_08_a_corruption_burst_lets_wrong_data_through_counted(harness, fabric_factory,
                                                                   tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: bitrot, action: corrupt, link: [node0, sw0], after: {messages: 10, link: node0},
   p: 0.05}
""", expect="ok", gap_us=50, msgs=60, extra=["--corrupt-ok"])
    rn.r.check_ok()
    assert rn.m(1)["wrong"] > 0, rn.report()          # node0 -> node1 crosses it
    st = sfctl.stats(rn.f.socket)
    assert sum(l["corrupted"] for l in st.values()) > 0, st


def test_13_09_connect_refused(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: no-entry, action: connect_refuse, node: node1}
""", expect="ok", tests="connect")
    assert rn.r.rc != 0, rn.r.report()
    assert "refused by fault #0 'no-entry'" in rn.r.stderr + rn.r.stdout, rn.r.report()
    assert rn.faults["faults"][0]["failed"] >= 1, rn.report()


def test_13_10_connect_delayed(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: slow-start, action: connect_delay, node: node1, delay: 300ms, for: 10s}
""", expect="ok", tests="connect")
    rn.r.check_ok()
    c = [t for t in rn.r.tests("connect")]
    assert c and max(t["seconds"] for t in c) >= 0.3, rn.report()
    assert rn.faults["faults"][0]["delayed"] >= 1, rn.report()
    assert "held for 300ms" in rn.f.log()


def test_13_11_node_kill_kills_the_rank_and_its_peer_fails_within_the_bound(
        harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: crash, action: node_kill, node: node1, after: {messages: 20, link: node0}}
""", expect="either", gap_us=200, msgs=2000)
    log = rn.f.log()
    assert "SIGKILL pid" in log and "crash" in log, log
    assert rn.r.rc != 0, rn.r.report()
    out = rn.r.stdout + rn.r.stderr
    assert "rank=1" in out and "killed by signal 9" in out, rn.r.report()
    # the daemon saw the victim go and marked its channel ends dead, so peers fail at once
    assert "channel end(s) marked dead" in log, log


def test_13_12_live_apply_list_clear(harness, fabric_factory, tmp_path, request):
    f = fabric_factory(args=["--scenario", scenario(tmp_path, "", "live")])
    with pytest.raises(sfctl.CtlError) as ei:
        sfctl.fault_apply(f.socket, "{action: link_down, link: [node0, nowhere]}")
    assert "spec:1:" in str(ei.value) and "nowhere" in str(ei.value), str(ei.value)
    ids, eff = sfctl.fault_apply(
        f.socket, "{name: live, action: link_down, link: node0, after: {messages: 10, "
                  "link: node0}, for: 1s}")
    assert ids == [0] and eff > 0
    fl = sfctl.faults(f.socket)["faults"]
    assert fl[0]["name"] == "live" and fl[0]["state"] == "armed", fl
    argv = ["--fault-msgs", "60", "--fault-gap-us", "100", "--bound", "5"]
    r = harness(nranks=2, tests="faults", fabric=f, extra=argv + ["--fault-expect", "error"],
                env={"SIMFABRIC_TRACE": str(tmp_path / "trace-%n-%p.json")})
    rn = Run(r, f, tmp_path)
    rn.r.check_ok()
    check_fail_time(rn, request, 0, 1)
    assert sfctl.fault_clear(f.socket, "all") == 1
    r2 = harness(nranks=2, tests="faults", fabric=f, extra=argv + ["--fault-expect", "ok"])
    r2.check_ok()
    assert "cleared at" in f.log()


def test_13_13_concurrent_delay_only_faults_keep_data_exact(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: f1, action: flap, link: [node0, sw0], after: {first_traffic: node0}, period: 8ms,
   duty: 0.25, count: 5}
- {name: s1, action: stall, link: [node1, sw0], after: {first_traffic: node1}, at: 3ms, for: 6ms}
- {name: d1, action: degrade, link: [node1, sw0], after: {first_traffic: node1}, for: 20ms,
   set: {rate_gbps: 1}}
""", expect="ok", gap_us=100, msgs=200)
    rn.r.check_ok()
    for k in (0, 1):
        assert rn.m(k)["received"] == 200 and rn.m(k)["wrong"] == 0, rn.report()
    assert all(f["failed"] == 0 for f in rn.faults["faults"]), rn.report()
    assert sum(f["delayed"] for f in rn.faults["faults"]) >= 2, rn.report()


def test_13_14_close_with_requests_stuck_in_a_fault_never_hangs(harness, fabric_factory,
                                                                 tmp_path):
    """Each rank stops at its first error and closes its comms with requests still stuck in
    the stall (abandoned, as NCCL's abort does): close returns, nothing waits for the fault."""
    rn = run(harness, fabric_factory, tmp_path, """
- {name: hold, action: stall, conn: all, after: {messages: 10, link: node0}}
""", expect="error", gap_us=0, msgs=100)
    rn.r.check_ok()
    assert rn.r.seconds < 10, rn.report()
    assert "freed" in rn.f.log(), rn.f.log()   # the daemon saw both ends close


def test_13_15_nic_down_takes_both_directions(harness, fabric_factory, tmp_path, request):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: nic1, action: nic_down, nic: node1, after: {messages: 10, link: node0}}
""", expect="error", gap_us=100, msgs=60)
    rn.r.check_ok()
    assert len(rn.faults["faults"][0]["scope"]) > 0
    check_fail_time(rn, request, 0, 1)
    for k in (0, 1):
        assert "nic1" in rn.m(k)["first_error"]["warn"], rn.report()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_13_16_randomized_soak_of_delay_only_faults(harness, fabric_factory, tmp_path, seed):
    """Random faults, each shorter than half the retry budget and each in its own time slot
    (so the transport makes progress between them, as it must for them to be survivable):
    no message lost, no byte changed, nothing early."""
    rnd = random.Random(seed)
    lines, slot = [], 25000  # us; windows last at most 12 ms, so links are up >= 13 ms between
    for i in range(5):
        kind = rnd.choice(["flap", "stall", "degrade", "link_down", "nic_down"])
        node = rnd.choice(["node0", "node1", "node2"])
        at = "%dus" % (i * slot + rnd.randint(0, 3000))
        trig = "after: {first_traffic: node0}"
        if kind == "flap":  # two short outages, up long enough in between for a retry
            lines.append("- {action: flap, link: %s, %s, at: %s, period: 10ms, duty: %.2f, "
                         "count: 2}" % (node, trig, at, rnd.uniform(0.1, 0.5)))
        elif kind == "degrade":
            lines.append("- {action: degrade, link: %s, %s, at: %s, for: %dus, set: {rate_gbps: "
                         "%d, add_latency_ns: %d}}" % (node, trig, at, rnd.randint(1000, 12000),
                                                      rnd.randint(1, 20), rnd.randint(0, 50000)))
        elif kind == "nic_down":
            lines.append("- {action: nic_down, nic: %s, %s, at: %s, for: %dus}" % (
                node, trig, at, rnd.randint(100, 12000)))
        else:
            lines.append("- {action: %s, link: %s, %s, at: %s, for: %dus}" % (
                kind, node, trig, at, rnd.randint(100, 12000)))
    rn = run(harness, fabric_factory, tmp_path, "\n".join(lines), expect="ok", gap_us=300,
             msgs=400, nodes=3, size=rnd.choice([4096, 65536, 200000]), seed=seed)
    rn.r.check_ok()
    for k in range(3):
        assert rn.m(k)["received"] == 400 and rn.m(k)["wrong"] == 0, rn.report()
    st = sfctl.stats(rn.f.socket)
    assert all(l["early"] == 0 for l in st.values()), st
    assert all(f["failed"] == 0 for f in rn.faults["faults"]), rn.report()
    assert sum(f["hit"] for f in rn.faults["faults"]) > 0, rn.report()


def test_13_17_bad_faults_name_file_line_and_key(sf_env, tmp_path):
    import subprocess
    p = scenario(tmp_path, "- {action: link_down, link: [node0, sw9]}", "bad")
    cp = subprocess.run([sf_env.daemon, "--check", "--scenario", p], capture_output=True,
                        text=True, timeout=10)
    assert cp.returncode != 0
    assert "bad.yaml:13:" in cp.stderr and "link" in cp.stderr and "sw9" in cp.stderr, cp.stderr


def test_13_18_the_cli_applies_lists_and_clears(sf_env, fabric_factory, tmp_path):
    import subprocess
    f = fabric_factory(args=["--scenario", scenario(tmp_path, "", "cli")])
    cli = [sys.executable, sf_env.cli]
    env = dict(os.environ, SIMFABRIC_SOCKET=f.socket)

    def sh(*args):
        return subprocess.run(cli + list(args), capture_output=True, text=True, timeout=20,
                              env=env)
    r = sh("fault", "apply", "--in", "5ms", "{name: cut, action: link_down, link: node1, "
           "for: 20ms}")
    assert r.returncode == 0 and "#0 applied" in r.stdout, r.stdout + r.stderr
    r = sh("fault", "list")
    assert r.returncode == 0 and "cut" in r.stdout and "link_down" in r.stdout, r.stdout
    r = sh("fault", "apply", "{action: link_down, link: node7}")  # a usage error: exit 2
    assert r.returncode == 2 and "node7" in r.stderr and "spec:1:" in r.stderr, r.stderr
    r = sh("status")
    assert r.returncode == 0 and "faults (fabric time" in r.stdout and "cut" in r.stdout, \
        r.stdout + r.stderr
    r = sh("fault", "clear", "all")
    assert r.returncode == 0 and "1 fault(s) cleared" in r.stdout, r.stdout + r.stderr
