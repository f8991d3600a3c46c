# SPDX-License-Identifier: MIT
"""Faults on processes, setup calls and connections (issue 14), through the CPU harness: the
plugin driven through the ABI, one process per rank, each its own node.

node_freeze and straggle stop the node's processes (SIGSTOP/SIGCONT from the daemon, which
knows each session's pid); comm_hang holds a connection; regmr_fail, connect_fail and
accept_fail fail the plugin's calls with the error a real plugin returns. Every test checks
an invariant that the fault, broken or missing, cannot meet: a hang that lets one message by,
a freeze whose process never shows state T, a setup call that succeeds. Times are lower
bounds set by the fault (a message held 400 ms took at least 350 ms) and generous upper
bounds (the run ends within tens of seconds), never a measured absolute: a loaded 2-core
machine only makes things later."""
import os
import random
import re
import signal
import sys
import time

import pytest

import sfctl
from simfabric_pytest import finish
from test_13_faults import Run, latencies, run, scenario


def pid_of(log, node):
    m = re.findall(r"session pid (\d+): node %s " % re.escape(node), log)
    assert m, "no session of %s in the daemon's log:\n%s" % (node, log)
    return int(m[-1])


def proc_state(pid):
    """The process's state letter (/proc/PID/stat): T when stopped; None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def wait_for(cond, timeout=30.0, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def live_harness(harness, fabric_factory, tmp_path, name, msgs=400, gap_us=500, faults=""):
    """A fabric with faults (maybe none) and a harness running the faults test on it, in the
    background: (fabric, Popen)."""
    f = fabric_factory(args=["--scenario", scenario(tmp_path, faults, name)])
    p = harness(nranks=2, tests="faults", fabric=f, timeout=120, popen=True,
                extra=["--fault-msgs", str(msgs), "--fault-bytes", "4096", "--fault-gap-us",
                       str(gap_us), "--fault-expect", "ok", "--bound", "5",
                       "--max-bytes", "4096"])
    return f, p


def flowing(f, n=20):
    """Both channels of the ring have delivered n messages: the faults test's traffic is on."""
    ch = sfctl.show(f.socket)["chans"]
    return len(ch) >= 2 and all(c.get("msgs", 0) >= n for c in ch)


def exact(rn, msgs):
    for k in (0, 1):
        m = rn.m(k)
        assert m["received"] == msgs and m["wrong"] == 0, rn.report()


# ---- comm_hang ---------------------------------------------------------------------------------

def test_32_01_comm_hang_holds_one_direction_without_error_then_lets_go(
        harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: wedge, action: comm_hang, conn: {from: node0, to: node1},
   after: {first_traffic: node0}, at: 20ms, for: 400ms}
""", expect="ok", msgs=200, size=4096, gap_us=500)
    rn.r.check_ok()
    exact(rn, 200)
    f = rn.faults["faults"][0]
    assert f["action"] == "comm_hang" and f["windows"] == 1 and f["hit"] >= 1, rn.report()
    # node0 -> node1 is rank 1's receive: a message posted before the window waited it out
    held = max(latencies(rn.m(1)))
    assert held >= 0.35, ("the longest node0 -> node1 message took %.3f s; the hang is 400 ms"
                          % held, rn.report())
    log = rn.f.log()
    assert "(node0 -> node1) hangs" in log and "(node0 -> node1) released" in log, log
    # the other direction was never held
    assert "(node1 -> node0) hangs" not in log, log


def test_32_02_comm_hang_without_end_holds_until_cleared(harness, fabric_factory, tmp_path):
    f, p = live_harness(harness, fabric_factory, tmp_path, "hang-live", msgs=50, gap_us=0)
    # applied before the ranks connect: channels made during the hang start held
    ids, _ = sfctl.fault_apply(f.socket, "{name: stuck, action: comm_hang, conn: all}")
    time.sleep(1.5)  # unhindered, 50 messages of 4 KiB take milliseconds
    assert p.poll() is None, ("the harness finished during the hang", finish(p, 5).report())
    fl = sfctl.faults(f.socket)["faults"][0]
    assert fl["state"] == "on" and fl["hit"] == 2, fl  # both channels, held as they were made
    assert sfctl.fault_clear(f.socket, ids[0]) == 1
    r = finish(p, 120)
    r.check_ok()
    rn = Run(r, f)
    exact(rn, 50)
    assert "'stuck' (comm_hang of any -> any), window ended at" in f.log(), f.log()
    # the first messages were posted in the hang and waited for the clear: 1.5 s
    for k in (0, 1):
        assert max(latencies(rn.m(k))) >= 1.4, rn.report()


# ---- node_freeze -------------------------------------------------------------------------------

def test_32_03_node_freeze_stops_the_process_and_the_job_resumes_exact(
        harness, fabric_factory, tmp_path):
    f, p = live_harness(harness, fabric_factory, tmp_path, "freeze", msgs=400, gap_us=2000)
    assert wait_for(lambda: flowing(f), 30), f.log()
    pid = pid_of(f.log(), "node1")
    ids, _ = sfctl.fault_apply(f.socket, "{name: ice, action: node_freeze, node: node1}")
    assert wait_for(lambda: proc_state(pid) == "T", 10), proc_state(pid)
    time.sleep(0.8)
    assert proc_state(pid) == "T", "node1 ran again during the freeze"
    assert p.poll() is None, "a rank ended while node1 was frozen"
    fl = sfctl.faults(f.socket)["faults"][0]
    assert fl["state"] == "on" and fl["hit"] == 1, fl  # one process stopped
    assert sfctl.fault_clear(f.socket, ids[0]) == 1
    assert wait_for(lambda: proc_state(pid) not in ("T", "t"), 10), proc_state(pid)
    r = finish(p, 120)
    r.check_ok()
    rn = Run(r, f)
    exact(rn, 400)
    log = f.log()
    assert "SIGSTOP pid %d (node node1)" % pid in log and "SIGCONT pid %d (node node1)" % pid \
        in log, log
    # a message in flight across the freeze took at least most of it
    assert max(max(latencies(rn.m(k))) for k in (0, 1)) >= 0.5, rn.report()


def test_32_04_node_freeze_window_from_the_scenario(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: nap, action: node_freeze, node: node1, after: {messages: 20, link: node0}, for: 500ms}
""", expect="ok", msgs=200, size=4096, gap_us=500)
    rn.r.check_ok()
    exact(rn, 200)
    f = rn.faults["faults"][0]
    assert f["windows"] == 1 and f["hit"] == 1 and f["state"] == "over", rn.report()
    worst = max(max(latencies(rn.m(k))) for k in (0, 1))
    assert worst >= 0.4, ("nothing waited for the 500 ms freeze: %.3f s" % worst, rn.report())
    log = rn.f.log()
    assert log.count("SIGSTOP pid") == 1 and log.count("SIGCONT pid") == 1, log


def test_32_05_a_daemon_that_stops_continues_what_it_froze(harness, fabric_factory, tmp_path):
    f, p = live_harness(harness, fabric_factory, tmp_path, "freeze-stop", msgs=100000, gap_us=500)
    assert wait_for(lambda: flowing(f), 30), f.log()
    pid = pid_of(f.log(), "node1")
    sfctl.fault_apply(f.socket, "{action: node_freeze, node: node1}")
    assert wait_for(lambda: proc_state(pid) == "T", 10), proc_state(pid)
    assert f.stop() == 0, f.log()
    assert "the daemon is stopping: its window ends now" in f.log(), f.log()
    # continued: it runs (and, its daemon gone, fails and exits) instead of staying stopped
    assert wait_for(lambda: proc_state(pid) not in ("T", "t"), 10), proc_state(pid)
    r = finish(p, 60)
    assert r.rc != "timeout", r.report()


def test_32_16_a_process_that_joins_a_frozen_node_stops_with_it(harness, fabric_factory,
                                                                 tmp_path):
    f = fabric_factory(args=["--scenario", scenario(tmp_path, "", "join-frozen")])
    ids, _ = sfctl.fault_apply(f.socket, "{name: cold, action: node_freeze, node: node1}")
    _, p = live_harness(harness, lambda **kw: f, tmp_path, "join-frozen", msgs=50, gap_us=0)
    assert wait_for(lambda: "session pid" in f.log() and " node node1 " in f.log(), 30), f.log()
    pid = pid_of(f.log(), "node1")
    assert wait_for(lambda: proc_state(pid) == "T", 10), (proc_state(pid), f.log())
    assert "joins node node1 while a fault holds it stopped: SIGSTOP" in f.log(), f.log()
    time.sleep(1.0)
    assert p.poll() is None and proc_state(pid) == "T", "node1 ran during its freeze"
    assert sfctl.faults(f.socket)["faults"][0]["hit"] == 1
    assert sfctl.fault_clear(f.socket, ids[0]) == 1
    r = finish(p, 120)
    r.check_ok()
    exact(Run(r, f), 50)


# ---- straggle ----------------------------------------------------------------------------------

def test_32_06_straggle_duty_cycles_the_node_and_says_how(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: slowpoke, action: straggle, node: node1, period: 20ms, duty: 0.5,
   after: {first_traffic: node0}, for: 600ms}
""", expect="ok", msgs=300, size=4096, gap_us=2000)
    rn.r.check_ok()
    exact(rn, 300)
    f = rn.faults["faults"][0]
    # stopped once per period while the job ran: tens of cycles (30 at most in 600 ms)
    assert 5 <= f["delayed"] <= 31 and f["hit"] == 1, rn.report()
    assert f["delay_ns"] >= f["delayed"] * 5e6, rn.report()  # each stop lasted ~10 ms
    log = rn.f.log()
    assert "mechanism: duty-cycled SIGSTOP/SIGCONT of the node's processes, stopped 10ms of " \
        "every 20ms (50%)" in log, log


def test_32_17_a_straggling_process_is_stopped_about_duty_of_the_time(harness, fabric_factory,
                                                                     tmp_path):
    """Sampled from outside (/proc/PID/stat): stopped for a share of the window near its duty
    (generous bounds: the sampler and the daemon share a loaded machine), running before and
    after, and the job exact."""
    f, p = live_harness(harness, fabric_factory, tmp_path, "straggle-live", msgs=3000,
                        gap_us=300)
    assert wait_for(lambda: flowing(f), 30), f.log()
    pid = pid_of(f.log(), "node1")
    sfctl.fault_apply(f.socket, "{name: slow, action: straggle, node: node1, for: 1500ms, "
                      "period: 20ms, duty: 0.6}")
    samples = []
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        samples.append(proc_state(pid) == "T")
        time.sleep(0.002)
    share = sum(samples) / float(len(samples))
    assert 0.25 <= share <= 0.95, ("stopped in %.0f%% of %d samples; duty 60%%" % (
        100 * share, len(samples)), f.log())
    # the cycle: it ran between its stops
    flips = sum(1 for a, b in zip(samples, samples[1:]) if a != b)
    assert flips >= 10, ("%d changes of state in 1 s at a 20 ms period" % flips)
    assert wait_for(lambda: sfctl.faults(f.socket)["faults"][0]["state"] == "over", 10)
    assert proc_state(pid) not in ("T", "t"), "still stopped after the window"
    r = finish(p, 120)
    r.check_ok()
    exact(Run(r, f), 3000)


# ---- failing setup calls -----------------------------------------------------------------------

def test_32_07_regmr_fail_the_first_registration_on_a_node(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: nomem, action: regmr_fail, node: node1, nth: 1}
""", expect="ok", msgs=10, size=4096)
    assert rn.r.rc != 0, rn.r.report()
    out = rn.r.stdout + rn.r.stderr
    assert re.search(r"FAIL test=faults rank=1: regMr\(\w+ comm, rank \d, \d+ B, NCCL_PTR_HOST\) "
                     r"returned ncclSystemError", out), rn.r.report()
    assert "fault #0 'nomem' (regmr_fail of node node1, call 1)" in out, rn.r.report()
    # node0's registrations went through: its rank failed only because its peer did
    assert not re.search(r"FAIL test=faults rank=0: regMr", out), rn.r.report()
    f = rn.faults["faults"][0]
    assert f["failed"] == 1 and f["hit"] == 1, rn.report()


def test_32_08_regmr_fail_error_kind_and_the_nth(harness, fabric_factory, tmp_path):
    # the 3rd registration on node0 fails with ncclInternalError; the first two went through
    rn = run(harness, fabric_factory, tmp_path, """
- {name: third, action: regmr_fail, node: node0, nth: 3, error: internal}
""", expect="ok", msgs=10, size=4096)
    assert rn.r.rc != 0, rn.r.report()
    out = rn.r.stdout + rn.r.stderr
    assert re.search(r"FAIL test=faults rank=0: regMr\(.*returned ncclInternalError", out), \
        rn.r.report()
    assert "call 3)" in out, rn.r.report()


def test_32_09_connect_fail_before_the_daemon_hears_of_it(harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: noqp, action: connect_fail, node: node0}
""", expect="ok", tests="connect")
    assert rn.r.rc != 0, rn.r.report()
    out = rn.r.stdout + rn.r.stderr
    assert "connect node0/" in out and "failed: fault #0 'noqp' (connect_fail of node node0" \
        in out, rn.r.report()
    assert "ncclSystemError" in out, rn.r.report()
    f = rn.faults["faults"][0]
    assert f["failed"] >= 1, rn.report()
    # refused in the plugin: no connect from node0 reached the daemon
    assert not re.search(r"chan 0x[0-9a-f]+: node0/", rn.f.log()), rn.f.log()


def test_32_10_accept_fail_closes_the_channel_so_the_sender_is_told(
        harness, fabric_factory, tmp_path):
    rn = run(harness, fabric_factory, tmp_path, """
- {name: nobind, action: accept_fail, node: node1, error: remote}
""", expect="ok", tests="connect")
    assert rn.r.rc != 0, rn.r.report()
    out = rn.r.stdout + rn.r.stderr
    assert "fault #0 'nobind' (accept_fail of node node1" in out, rn.r.report()
    assert "ncclRemoteError" in out, rn.r.report()
    log = rn.f.log()
    # the daemon made the channel; node1's plugin closed its end at once
    assert re.search(r"chan 0x[0-9a-f]+: recv end closed by pid", log), log


def test_32_11_a_fraction_of_calls_is_seeded(harness, fabric_factory, tmp_path):
    """fraction: the calls that fail are a draw keyed by the seed and the call's number: the
    same seed fails the same call, whatever the timing of the ranks."""
    calls = []
    for i in range(2):
        rn = run(harness, fabric_factory, tmp_path, """
- {name: coin, action: regmr_fail, fraction: 0.3}
""", expect="ok", msgs=20, size=4096, name="coin-%d" % i, seed=11)
        assert rn.r.rc != 0, rn.r.report()
        out = rn.r.stdout + rn.r.stderr
        m = re.findall(r"'coin' \(regmr_fail of node node\d, call (\d+)\)", out)
        assert m, rn.r.report()
        calls.append(min(int(x) for x in m))
    assert calls[0] == calls[1], calls


# ---- live control and errors ---------------------------------------------------------------

def test_32_12_live_specs_of_the_new_actions_and_their_errors(fabric_factory, tmp_path):
    f = fabric_factory(args=["--scenario", scenario(tmp_path, "", "live-new")])
    with pytest.raises(sfctl.CtlError) as ei:
        sfctl.fault_apply(f.socket, "{action: straggle, node: node1, duty: 2}")
    assert "spec:1:40: duty: '2' is not a number in 0..1 (or a percentage)" in str(ei.value)
    with pytest.raises(sfctl.CtlError) as ei:
        sfctl.fault_apply(f.socket, "{action: node_freeze}")
    assert "spec:1:2: node: missing: node_freeze needs node" in str(ei.value)
    ids, _ = sfctl.fault_apply(
        f.socket, "[{action: straggle, node: node0, for: 1s}, {action: connect_fail, nth: 2}, "
        "{action: comm_hang, conn: [node0, node1], for: 10ms}]")
    assert len(ids) == 4, ids  # [a, b] is both ways: two faults
    fl = sfctl.faults(f.socket)["faults"]
    assert [x["action"] for x in fl] == ["straggle", "connect_fail", "comm_hang", "comm_hang"]
    assert "straggle of node node0" in fl[0]["scope"], fl
    assert sfctl.fault_clear(f.socket, "all") >= 2


@pytest.mark.parametrize("seed", [1, 2])
def test_32_15_soak_of_freezes_straggles_and_hangs_loses_nothing(harness, fabric_factory,
                                                                 tmp_path, seed):
    """Freezes, straggles and hangs of random nodes and connections, each with an end, with the
    ring running: they only delay. Nothing lost, nothing changed, nothing early, no fault failed
    a message (a frozen peer is alive: no retry budget runs out on a process)."""
    rnd = random.Random(seed)
    nodes = ["node0", "node1", "node2"]
    lines = []
    for i in range(6):
        kind = rnd.choice(["node_freeze", "straggle", "comm_hang"])
        trig = "after: {first_traffic: node0}, at: %dms" % (i * 60 + rnd.randint(0, 20))
        dur = "for: %dms" % rnd.randint(30, 250)
        if kind == "comm_hang":
            a, b = rnd.sample(nodes, 2)
            lines.append("- {action: comm_hang, conn: {from: %s, to: %s}, %s, %s}" % (
                a, b, trig, dur))
        elif kind == "straggle":
            lines.append("- {action: straggle, node: %s, %s, %s, period: %dms, duty: %.2f}" % (
                rnd.choice(nodes), trig, dur, rnd.randint(5, 20), rnd.uniform(0.2, 0.7)))
        else:
            lines.append("- {action: node_freeze, node: %s, %s, %s}" % (rnd.choice(nodes),
                                                                       trig, dur))
    text = "\n".join(lines)
    rn = run(harness, fabric_factory, tmp_path, text + "\n", expect="ok", gap_us=500, msgs=600,
             nodes=3, size=rnd.choice([4096, 65536]), seed=seed)
    rn.r.check_ok()
    for k in range(3):
        assert rn.m(k)["received"] == 600 and rn.m(k)["wrong"] == 0, (text, rn.report())
    st = sfctl.stats(rn.f.socket)
    assert all(l["early"] == 0 for l in st.values()), st
    assert all(f["failed"] == 0 for f in rn.faults["faults"]), rn.report()
    assert sum(f["hit"] for f in rn.faults["faults"]) > 0, rn.report()
    assert "cannot send" not in rn.f.log(), rn.f.log()  # every signal reached its process


# ---- expect: failure: hang: (simfabric run) ----------------------------------------------------

HANG_SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                             "scenarios", "job-harness-freeze-hang.yaml")


def simfabric_run(sf_env, path, tmp_path):
    import subprocess
    run_dir = str(tmp_path / ("run-" + os.path.basename(path).rsplit(".", 1)[0]))
    t0 = time.monotonic()
    cp = subprocess.run([sys.executable, sf_env.cli, "run", "--run-dir", run_dir, path],
                        capture_output=True, text=True, timeout=180)
    return cp, time.monotonic() - t0, run_dir


def test_32_13_an_expected_hang_passes_and_says_where_each_rank_was(sf_env, tmp_path):
    cp, took, run_dir = simfabric_run(sf_env, HANG_SCENARIO, tmp_path)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out
    assert took >= 3.0, (took, out)  # the launcher waited out the hang's 3 s
    assert "hang: no rank ended in 3 s, as expected" in out, out
    assert re.search(r"ok +failure +no rank ended in 3 s \(an expected hang\); where each was: .*"
                     r"T \(stopped\)", out), out
    stacks = os.path.join(run_dir, "stacks.txt")
    assert os.path.exists(stacks) and "=== pid" in open(stacks).read(), out


def test_32_14_a_job_that_ends_fails_an_expected_hang(sf_env, tmp_path):
    # the same job with a freeze of 300 ms: it resumes and ends before the hang's 3 s
    text = open(HANG_SCENARIO).read().replace(
        "{name: ice, action: node_freeze, node: node1, after: {messages: 50, link: node0}}",
        "{name: ice, action: node_freeze, node: node1, after: {messages: 50, link: node0}, "
        "for: 300ms}").replace('"100000"', '"400"')
    assert "for: 300ms" in text
    p = tmp_path / "short-freeze.yaml"
    p.write_text(text)
    cp, took, _ = simfabric_run(sf_env, str(p), tmp_path)
    out = cp.stdout + cp.stderr
    assert cp.returncode != 0, out
    assert re.search(r"FAIL +failure +expected a hang of 3 s, but harness \(\S*\) ended on its "
                     r"own: exit 0 after", out), out
    assert took < 60, (took, out)
