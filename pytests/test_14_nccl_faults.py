# SPDX-License-Identifier: MIT
"""Real NCCL under faults (GPU): the NCCL job program over a 2-node fabric whose link goes down
for longer than the RC retry budget (every rank reports ncclRemoteError through
ncclCommGetAsyncError, aborts and exits within the bound), and flaps for shorter (exact data,
slower by about what the model says). Figures go to $SIMFABRIC_RESULTS when set."""
import json
import os

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT

T_O = 4096 * 2 ** 10  # timeout_exp 10
RETRY = 7

FABRIC = """name: {name}
seed: 1
fabric:
  defaults:
    link: {{rate_gbps: 100, latency_ns: 500}}
    nic: {{timeout_exp: 10, retry_count: {retry}}}
  nodes: {{count: 2, name: "node{{i}}"}}
  switches:
    - {{name: sw0}}
  links:
    - ends: [[node0, node1], sw0]
faults:
{faults}
"""

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def job(paths, tmp_path, name, faults, iters, size="1M", timeout=180, extra=()):
    text = FABRIC.format(name=name, retry=RETRY, faults="\n".join(
        "  " + l for l in faults.strip().splitlines()) or "  []")
    return simfabric_pytest.nccljob(
        paths, tmp_path, name, ["--coll", "allreduce", "--sizes", size, "--warmup", "5",
                                "--iters", str(iters), "--timing", "each", "--op-timeout-s",
                                "30", "--timeout-s", str(timeout)] + list(extra),
        scenario_text=text, env={"NCCL_DEBUG": "WARN"}, timeout=timeout)


def save(name, obj):
    d = os.environ.get("SIMFABRIC_RESULTS")
    if d:
        with open(os.path.join(d, name), "w") as f:
            json.dump(obj, f, indent=1)


def daemon_log(r):
    p = os.path.join(r.run_dir, "simfabricd.log")
    return open(p).read() if os.path.exists(p) else ""


def test_14_01_link_down_past_the_budget_aborts_every_rank_with_remote_error(nccl_gpu, tmp_path):
    r, res = job(nccl_gpu, tmp_path, "down", """
- {name: cut, action: link_down, link: [node0, sw0], after: {messages: 400, link: node0},
   for: 10s}
""", iters=100000, timeout=120)
    report = "%s\n%s\n%s" % (r.summary(), r.logs(), daemon_log(r)[-4000:])
    assert res is not None, report
    assert res["status"] == "nccl_error", report
    assert res["error"]["code"] == "ncclRemoteError", (res["error"], report)
    rcs = [p.rc for p in r.procs]
    assert rcs == [3, 3], (rcs, report)
    fl = r.faults["faults"][0] if r.faults else None
    assert fl and fl["failed"] >= 1, (r.faults, report)
    # from the fault's start to the last rank's exit: the model's 8 T_o, then NCCL's abort
    t_exit = max(p.t_exit for p in r.procs)
    logs = r.logs(limit=200000)
    assert "fault #0 'cut'" in logs and "retry count exhausted" in logs, logs[-6000:]
    save("nccl-fault-link-down.json", {"result": res, "fault": fl, "exit_s": t_exit,
                                       "rcs": rcs, "budget_ms": RETRY * T_O / 1e6,
                                       "fail_after_ms": (RETRY + 1) * T_O / 1e6})
    assert r.seconds < 60, report


FLAP_TIMED_S = 0.6  # test_14_02's flap job: its timed loop, stalls apart (windows span 0.25 s)


def test_14_02_a_flap_shorter_than_the_budget_only_slows_the_job(nccl_gpu, tmp_path):
    # The job must outlast every window: they open 60 ms apart from the 200th message, 240 ms
    # from first to last. With 400 iterations of 1 MiB (about 0.2 ms each on the host path)
    # the job ended after two or three of them, which is why main measured 29.4 ms of the 63
    # the model gives for five: the test was wrong, not the model. 1500 iterations last
    # 0.3 s and more, stalls apart.
    iters = 1500
    # the base run has a straggler (rank 0 starts one iteration 20 ms late): the positive
    # control of the stall measure used below, on the same path
    base_r, base = job(nccl_gpu, tmp_path, "base", "", iters=iters, extra=["--inject", "0:slow"])
    assert base and base["status"] == "ok", base_r.summary() + base_r.logs()
    b = base["results"][0]
    # its largest stall episode is the straggler's: 20 ms, never less; not counted twice (40).
    # A busy H100 added its own: hiccups over 5 ms (7 stalled iterations), and 7 ms more on the
    # straggler's own (27 ms). Those are the machine's; the bound leaves them room.
    assert b["stall_episodes"] >= 1 and 19000 <= b["stall_top_us"][0] <= 30000, b
    down_ns, windows = 10000000, 5  # 10 ms < 29.4 ms budget: the 3rd retry gets through
    # The timed loop must outlast the last window, 240 ms after the first: 1500 iterations of
    # the H100's 118 us ended before it (4 stalls of 5, 50.3 ms of 62.9). So as many as last
    # FLAP_TIMED_S at the base run's pace, whatever the machine.
    flap_iters = max(iters, int(FLAP_TIMED_S * 1e6 / b["time_us"]))
    r, res = job(nccl_gpu, tmp_path, "flap", """
- {name: flap, action: flap, link: [node0, sw0], after: {messages: 200, link: node0},
   period: 60ms, duty: %.6f, count: %d}
""" % (down_ns / 60e6, windows), iters=flap_iters)
    report = "%s\n%s\n%s" % (r.summary(), r.logs(), daemon_log(r)[-4000:])
    assert res and res["status"] == "ok", report
    assert all(x["ok"] and x["wrong"] == 0 for x in res["results"]), res["results"]
    fl = r.faults["faults"][0]
    assert fl["windows"] == windows and fl["failed"] == 0 and fl["delayed"] >= windows, \
        (fl, report)
    # the collective stalls in each window until the first retry after the link is back:
    # ceil(10 ms / T_o) = 3 timeouts, 12.6 ms; the job waits for about that, once per window
    per_window = -(-down_ns // T_O) * T_O
    flap, it_us = res["results"][0], b["time_us"]
    # the five largest episodes: one a window (they are 60 ms apart); a busy host's smaller
    # ones beside them are not the fault's
    extra = sum(flap["stall_top_us"][:windows]) / 1e6
    model = windows * per_window / 1e9
    save("nccl-fault-flap.json", {"base": base["results"], "flap": res["results"], "fault": fl,
                                  "extra_s": extra, "model_extra_s": model})
    # Each window holds the ring for per_window: a collective cannot complete while one of its
    # messages waits for its retry. The job times every iteration: the stalled ones stand out
    # (over the median + 5 ms, with their neighbours over + 1 ms; a busy host's scattered
    # hiccups are not counted: on an H100 the base run's straggler once measured as 142
    # iterations over + 1 ms), each window's in one episode, and the five largest episodes'
    # excess, summed, is the stall itself (a busy host's rare hiccup over 5 ms is one more,
    # smaller, episode: seven of them in one H100 run). The difference of
    # two runs' means was measured before, and 1500 iterations' drift (34 ms on the H200) hid
    # the 63 ms it was meant to check. NCCL may be between two messages when a window opens
    # (it stalls at its next post) or just finishing one: an iteration either way per window.
    # One retry too many or too few per window is T_o (4.2 ms, 21 ms over five windows).
    assert flap["stall_episodes"] >= windows, (flap, report)
    # Never earlier than the model: five windows cannot cost less than their retries, less the
    # iteration NCCL may have been between two messages in.
    early = windows * 2 * it_us / 1e6 + 0.002
    # Not a retry too many: no iteration holds more than one window's stall (they are 60 ms
    # apart) and 0.9 T_o, which a retry too many in any one window would pass (per_window +
    # T_o, and the iteration's own time); over the five, half a T_o each. The real machine adds
    # to a stall what it takes to get going again after one (on an H100: 66.6 ms for the
    # model's 62.9, 7 stalled iterations, the longest 12.8 ms; on a busier one the longest was
    # 15.7 ms, 3.1 ms over the window, with the five windows' sum inside the bound): that is
    # not the model's, and the bound leaves it room.
    late = windows * T_O / 2e9
    assert flap["max_us"] <= (per_window + 0.9 * T_O) / 1e3, (
        "an iteration took %.1f ms: more than a window's %d retries (%.1f ms) and 0.9 of a "
        "timeout" % (flap["max_us"] / 1e3, per_window // T_O, per_window / 1e6), report)
    assert model - early <= extra <= model + late, (
        "stalled %.1f ms in %d iteration(s), the model says %.1f ms (-%.1f, +%.1f ms)" % (
            extra * 1e3, flap["stalls"], model * 1e3, early * 1e3, late * 1e3), report)
