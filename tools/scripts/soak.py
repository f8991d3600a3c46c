#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""soak.py [--messages N] [--seed S] [--build DIR] [--json FILE] - the randomized fault soak of
issue 15 (`make soak`; a 10^4-message run is pytests/test_33): the harness's `faults` test (each
rank sends to the next, every message checked) over and over, 2 to 8 ranks, under random
delay-only faults applied live to one long-lived daemon, until N messages have been received.

Delay-only: every fault window (link_down, nic_down, flap, stall, degrade, and node_freeze where
the daemon has it) is shorter than the retry budget (7 T_o = 29.4 ms on this fabric) and in a
25 ms slot of its own, so the transport always gets a retry through between two; a
fault that would fail a message is a bug in the fabric, not in the soak. What must hold, and is
checked after every iteration: nothing lost (each rank received all it was sent), nothing changed
(0 wrong), nothing early (the daemon's per-link `early` counter), no fault failed a message, and
the daemon's fds and memory bounded (its fds back to what they were after its first iteration
once the ranks are gone; its RSS not growing past that by more than --rss-slack-kib).
The daemon takes 256 faults in its life (cleared ones included), so a new one starts when the
next iteration's faults would not fit; each daemon's fds and RSS are judged on its own.
Exit status 0 when every check held, 1 otherwise (the failing iteration's logs are kept and
named), 2 on a usage error.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from sf import ctl as sfctl  # noqa: E402
from sf.daemon import Daemon as Simfabricd  # noqa: E402

NODES = 8
# 25 Gb/s, T_o = 4.096 us x 2^10 = 4.19 ms, 7 retries: a budget of 29.4 ms (as test_13).
SCENARIO = """name: soak
seed: {seed}
fabric:
  defaults:
    link: {{rate_gbps: 25, latency_ns: 500}}
    nic: {{timeout_exp: 10, retry_count: 7}}
  nodes: {{count: {nodes}, name: "node{{i}}"}}
  switches:
    - {{name: sw0}}
  links:
    - ends: [all, sw0]
"""
MAX_FAULTS = 256  # a daemon's faults over its life (sim/core/fault.h)
WINDOW_US = 12000  # a fault window's longest (--max-window-us): under the 29.4 ms budget
UP_US = 13000      # the least up time between two slots' windows: three retries fit in it
FIRST_SLOT_US = 1000  # after the first message of node0: the ring is under way
TRIGGER = "after: {first_traffic: node0}"  # a live fault counts from the next one's post


def freeze_exists(build, work):
    """Whether this daemon knows node_freeze (issue 14's process faults): a freeze shorter than
    the budget only delays, so the soak takes it among its kinds once it exists."""
    sc = os.path.join(work, "probe.yaml")
    with open(sc, "w") as f:
        f.write(SCENARIO.format(seed=1, nodes=2) +
                "faults:\n  - {action: node_freeze, node: node1, at: 1s, for: 1ms}\n")
    cp = subprocess.run([os.path.join(build, "simfabricd"), "--check", "--scenario", sc],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    return cp.returncode == 0


def fault_specs(rnd, nranks, nslots, window_us, kinds, fixed_us=0):
    """nslots faults, one per slot, on the links of nodes 0..nranks-1, their windows at most
    window_us long (delay-only when that is under the budget). Their `at:` counts from the
    first message node0 posts after they are applied (so a slow start of the ranks on a loaded
    machine moves them with the traffic, not past it)."""
    out = []
    slot = window_us + UP_US
    for i in range(nslots):
        kind = rnd.choice(kinds)
        node = "node%d" % rnd.randrange(nranks)
        at = "%dus" % (FIRST_SLOT_US + i * slot + rnd.randint(0, 3000))
        w = fixed_us or rnd.randint(100, window_us - 3000)  # the slot's 3 ms of jitter within
        if kind == "flap":  # two outages of at most w/4 each, as long up in between
            out.append("{action: flap, link: %s, %s, at: %s, period: %dus, duty: %.2f, "
                       "count: 2}" % (node, TRIGGER, at, window_us // 2, rnd.uniform(0.1, 0.5)))
        elif kind == "degrade":
            out.append("{action: degrade, link: %s, %s, at: %s, for: %dus, set: {rate_gbps: "
                       "%d, add_latency_ns: %d}}" % (node, TRIGGER, at, w,
                                                 rnd.randint(1, 20), rnd.randint(0, 50000)))
        elif kind == "node_freeze":  # the node's ranks stopped: their peers wait for them
            out.append("{action: node_freeze, node: %s, %s, at: %s, for: %dus}"
                       % (node, TRIGGER, at, w))
        elif kind == "nic_down":
            out.append("{action: nic_down, nic: %s, %s, at: %s, for: %dus}"
                       % (node, TRIGGER, at, w))
        else:
            out.append("{action: %s, link: %s, %s, at: %s, for: %dus}"
                       % (kind, node, TRIGGER, at, w))
    return out


def proc_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Daemon:
    def __init__(self, build, work, n):
        self.dir = os.path.join(work, "d%d" % n)
        os.mkdir(self.dir, 0o700)
        self.socket = os.path.join(self.dir, "ctl.sock")
        sc = os.path.join(self.dir, "soak.yaml")
        with open(sc, "w") as f:
            f.write(SCENARIO.format(seed=n + 1, nodes=NODES))
        self.log = os.path.join(self.dir, "simfabricd.log")
        self.daemon = Simfabricd(os.path.join(build, "simfabricd"), self.socket, self.log,
                                 ["--scenario", sc]).start(timeout=10)
        self.proc = self.daemon.proc
        self.fd0 = None  # fds after the first iteration, once they have settled
        self.faults = 0
        self.samples = []  # (iteration, fds, rss KiB) once the ranks are gone

    def idle(self, timeout=10.0):
        """Wait until no session is left (the ranks' connections closed and seen)."""
        deadline = time.monotonic() + timeout
        while True:
            sh = sfctl.show(self.socket)
            if sh["sessions"] == 0 and sh["chans_open"] == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the daemon still holds %d session(s), %d open channel(s) "
                                   "%.0f s after the ranks exited" % (sh["sessions"],
                                                                      sh["chans_open"],
                                                                      timeout))
            time.sleep(0.02)

    def sample(self, it):
        """fds and RSS once the ranks are gone. The daemon closes a client's connection when
        it reads its EOF, a moment after our last request returned: wait (bounded) for the
        count to come back to the first iteration's; a leak stays, and shows."""
        pid = self.proc.pid
        deadline = time.monotonic() + 5
        fds = proc_fds(pid)
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = proc_fds(pid)
            if now == fds and (self.fd0 is None or now <= self.fd0):
                break
            fds = now
        if self.fd0 is None:
            self.fd0 = fds
        self.samples.append((it, fds, proc_rss_kib(pid)))

    def stop(self):
        self.daemon.stop(timeout=10)


def judge_daemon(d, slack_kib):
    """fds back to the first iteration's count; RSS not past it by more than slack_kib."""
    if len(d.samples) < 2:
        return []
    _, fd0, rss0 = d.samples[0]
    bad = []
    for it, fds, rss in d.samples[1:]:
        if fds != fd0:
            bad.append("iteration %d: the daemon holds %d fds, %d after its first iteration"
                       % (it, fds, fd0))
        if rss - rss0 > slack_kib:
            bad.append("iteration %d: the daemon's RSS is %d KiB, %d more than after its first "
                       "iteration (slack %d)" % (it, rss, rss - rss0, slack_kib))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=float, default=1e6, help="messages in all (default 1e6)")
    ap.add_argument("--seed", type=int, default=1, help="first iteration's seed; the i-th "
                    "iteration uses seed+i (default 1)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--work", help="make the work directory in this one (default: $TMPDIR)")
    ap.add_argument("--require-hits", action="store_true",
                    help="fail when no fault touched a message (make soak: over 10^6 messages "
                    "some must; a short run on a starved machine may post too few to)")
    ap.add_argument("--rss-slack-kib", type=int, default=8192,
                    help="RSS a daemon may grow past its first iteration (default 8192)")
    ap.add_argument("--max-window-us", type=int, default=WINDOW_US,
                    help="a fault window's longest (default %d; past the 29.4 ms budget the "
                    "faults lose messages, which the soak must report)" % WINDOW_US)
    ap.add_argument("--window-us", type=int, default=0,
                    help="every window exactly this long, one fault per iteration (to show "
                    "the soak failing: 60000000 with --kinds link_down --ranks 2)")
    ap.add_argument("--kinds", help="comma-separated fault actions (default: every delay-only "
                    "one the daemon has)")
    ap.add_argument("--ranks", type=int, default=0, help="ranks in every iteration (default: "
                    "2 to 8 at random)")
    ap.add_argument("--max-msgs", type=int, default=6000,
                    help="largest count a rank sends in one iteration (default 6000)")
    a = ap.parse_args()
    if a.messages < 1 or a.max_msgs < 10 or a.max_window_us < 4000 or a.window_us < 0 or \
            not (a.ranks == 0 or 2 <= a.ranks <= NODES):
        ap.error("--messages must be at least 1, --max-msgs at least 10, --max-window-us at "
                 "least 4000, --window-us not negative and --ranks 2..%d" % NODES)
    target = int(a.messages)
    build = os.path.abspath(a.build)
    for exe in ("simfabricd", "simfabric-harness", "libnccl-net-simfabric.so"):
        if not os.path.exists(os.path.join(build, exe)):
            ap.error("%s not found in %s: run make all" % (exe, build))

    work = tempfile.mkdtemp(prefix="simfabric-soak-", dir=a.work)
    tot = {"iterations": 0, "messages": 0, "bytes": 0, "faults": 0, "hit": 0, "delayed": 0,
           "delay_ns": 0, "lost": 0, "wrong": 0, "early": 0, "fault_failed": 0, "daemons": 0,
           "ranks": {}, "sizes": {}, "seeds": [a.seed, None], "kinds": {}}
    kinds = ["flap", "stall", "degrade", "link_down", "nic_down"]
    if freeze_exists(build, work):
        kinds.append("node_freeze")
    if a.kinds:
        bad = [k for k in a.kinds.split(",") if k not in kinds]
        if bad:
            ap.error("--kinds: %s is not one of %s" % (bad[0], ", ".join(kinds)))
        kinds = a.kinds.split(",")
    print("soak: fault kinds: %s" % ", ".join(kinds), flush=True)
    problems, daemons, d = [], [], None
    t0 = time.monotonic()
    it = 0
    try:
        while tot["messages"] < target and not problems:
            seed = a.seed + it
            rnd = random.Random(seed)
            nranks = rnd.randint(2, NODES)
            nranks = a.ranks or nranks  # drawn anyway: the same seed gives the same rest
            size = rnd.choice([4096, 4096, 65536, 65536, 200000])
            gap_us = rnd.randint(40, 120)
            left = -(-(target - tot["messages"]) // nranks)
            msgs = max(1, min(left, rnd.randint(a.max_msgs // 3, a.max_msgs)))
            # Slots within the time a rank spends posting at the least (msgs x gap).
            longest = a.window_us or a.max_window_us
            nslots = max(1, min(10, (msgs * gap_us - FIRST_SLOT_US) // (longest + UP_US)))
            specs = fault_specs(rnd, nranks, nslots, longest, kinds, a.window_us)
            if d is None or d.faults + len(specs) > MAX_FAULTS:
                if d is not None:
                    problems += judge_daemon(d, a.rss_slack_kib)
                    d.stop()
                d = Daemon(build, work, len(daemons))
                daemons.append(d)
            early0 = sum(l["early"] for l in sfctl.stats(d.socket).values())
            first_id = d.faults
            for s in specs:
                sfctl.fault_apply(d.socket, s)
            d.faults += len(specs)
            out = os.path.join(work, "it%d.json" % it)
            hlog = os.path.join(work, "it%d.log" % it)
            argv = [os.path.join(build, "simfabric-harness"), "--plugin",
                    os.path.join(build, "libnccl-net-simfabric.so"), "--nranks", str(nranks),
                    "--tests", "faults", "--fault-msgs", str(msgs), "--fault-bytes", str(size),
                    "--fault-gap-us", str(gap_us), "--fault-expect", "ok", "--bound", "5",
                    "--max-bytes", str(max(size, 4096)), "--timeout", "300", "--json", out]
            with open(hlog, "w") as lf:
                rc = subprocess.call(argv, stdout=lf, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, SIMFABRIC_SOCKET=d.socket))
            why = []
            try:
                with open(out) as f:
                    res = json.load(f)
            except (OSError, ValueError) as e:
                res = {"tests": []}
                why.append("no report (%s)" % e)
            ranks = [t for t in res["tests"] if t["name"] == "faults"]
            if rc != 0:
                why.append("the harness exited %d" % rc)
            if len(ranks) != nranks:
                why.append("%d of %d ranks reported" % (len(ranks), nranks))
            got = 0
            for t in ranks:
                m = t["metrics"]
                got += m.get("received", 0)
                lost = msgs - m.get("received", 0)
                tot["lost"] += max(lost, 0)
                tot["wrong"] += m.get("wrong", 0)
                if lost or m.get("wrong") or m.get("sent") != msgs or m.get("first_error"):
                    why.append("rank %d: sent %s, received %s of %d, %s wrong, first error %s"
                               % (t["rank"], m.get("sent"), m.get("received"), msgs,
                                  m.get("wrong"), m.get("first_error")))
            try:
                d.idle()
            except RuntimeError as e:
                why.append(str(e))
            early = sum(l["early"] for l in sfctl.stats(d.socket).values()) - early0
            tot["early"] += early
            if early:
                why.append("%d message(s) delivered before the model's time" % early)
            fl = [f for f in sfctl.faults(d.socket)["faults"] if f["id"] >= first_id]
            for f in fl:
                k = specs[f["id"] - first_id].split(",")[0].split()[-1]
                kk = tot["kinds"].setdefault(k, {"applied": 0, "hit": 0})
                kk["applied"] += 1
                kk["hit"] += f["hit"]
                tot["hit"] += f["hit"]
                tot["delayed"] += f["delayed"]
                tot["delay_ns"] += f["delay_ns"]
                tot["fault_failed"] += f["failed"]
                if f["failed"]:
                    why.append("fault #%d (%s) failed %d message(s)" % (f["id"], f["scope"],
                                                                        f["failed"]))
            d.sample(it)
            tot["iterations"] += 1
            tot["messages"] += got
            tot["bytes"] += got * size
            tot["faults"] += len(specs)
            tot["ranks"][str(nranks)] = tot["ranks"].get(str(nranks), 0) + 1
            tot["sizes"][str(size)] = tot["sizes"].get(str(size), 0) + 1
            tot["seeds"][1] = seed
            print("soak: it %d seed %d: %d ranks x %d msgs of %d B, gap %d us, %d faults "
                  "(%d hit, %d delayed), daemon fds %d rss %d KiB: %s"
                  % (it, seed, nranks, msgs, size, gap_us, len(specs),
                     sum(f["hit"] for f in fl), sum(f["delayed"] for f in fl),
                     d.samples[-1][1], d.samples[-1][2], "; ".join(why) or "ok"), flush=True)
            if why:
                problems.append("iteration %d (seed %d): %s; its logs: %s, %s, %s"
                                % (it, seed, "; ".join(why), hlog, out, d.log))
            it += 1
        if d is not None and not problems:
            problems += judge_daemon(d, a.rss_slack_kib)
    finally:
        for x in daemons:
            x.stop()
    tot["daemons"] = len(daemons)
    tot["seconds"] = round(time.monotonic() - t0, 1)
    tot["daemon_samples"] = [x.samples for x in daemons]
    tot["problems"] = problems
    if a.json:
        with open(a.json, "w") as f:
            json.dump(tot, f, indent=1)
    print("soak: %d messages (%d bytes) in %d iterations over %d daemon(s), %.1f s; seeds %d..%s;"
          " ranks %s; %d faults, %d hit, %d delayed (%.1f ms in all); lost %d, wrong %d, "
          "early %d, failed by a fault %d"
          % (tot["messages"], tot["bytes"], tot["iterations"], tot["daemons"], tot["seconds"],
             a.seed, tot["seeds"][1], tot["ranks"], tot["faults"], tot["hit"], tot["delayed"],
             tot["delay_ns"] / 1e6, tot["lost"], tot["wrong"], tot["early"],
             tot["fault_failed"]))
    print("soak: by kind (applied/hit): %s" % ", ".join(
        "%s %d/%d" % (k, v["applied"], v["hit"]) for k, v in sorted(tot["kinds"].items())))
    for x in daemons:
        if x.samples:
            print("soak: daemon %s: fds %s, RSS %s KiB" % (
                os.path.basename(x.dir), "..".join(str(s[1]) for s in (x.samples[0], x.samples[-1])),
                "..".join(str(s[2]) for s in (x.samples[0], x.samples[-1]))))
    if tot["hit"] == 0:
        print("soak: %s no fault hit a message: the soak tested nothing"
              % ("FAIL" if a.require_hits else "note:"), file=sys.stderr)
    if problems or (a.require_hits and tot["hit"] == 0):
        for p in problems:
            print("soak: FAIL " + p, file=sys.stderr)
        print("soak: work directory kept: %s" % work, file=sys.stderr)
        return 1
    if a.keep:
        print("soak: work directory kept: %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
