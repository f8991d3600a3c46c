#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench_xhost.py - per-flow shares on one host and on two, side by side in one run (`make bench`).

The distributed fabric clock (docs/scale-out.md, section 4) against the single-host emulation
on the same scenario: model-oversub.yaml's fabric (8 nodes, two leaves of four, two spines, 2:1)
at 0.5 Gb/s, run by `simfabric launch --nodes 8` once with one daemon and once with
--local-hosts 2 (leaf0's nodes on host 0, leaf1's on host 1, every flow below crosses hosts
except 5>4). The harness's flows test streams each phase's flows at once; a flow's share is its
steady rate over the sum of its phase's. Phases: a warm-up (not compared: a process's first
transfers over libfabric lag the model, then catch up); the oversubscribed spine (two flows on
each of leaf0's uplinks, whose owner is the senders' host: exact by construction); two flows on
one uplink; one per spine; an incast into node4 from four nodes of host 0 (node4's port is
reserved by its own host, in the order the messages reach it); and, reported but not a target,
an incast that mixes three senders of host 0 with one of node4's own host (5>4), which reserves
its whole route at the post, before the others' messages reach the port: it gets more than its
share (docs/scale-out.md says why).

0.5 Gb/s, not faster: on 2 cores, eight polling ranks and libfabric's tcp provider between
them lag faster flows by milliseconds (the fidelity monitor's late deliveries), and a steady rate
measured while the machine catches up is not the model's. Target (issue 18): each compared
flow's share within 5% of the single-host run's. Exit status 1 if one is not.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

WARMUP = "0>4,1>5,2>6,3>7"
PHASES = [("oversubscribed spine: 2 flows per leaf0 uplink", "0>4,1>5,2>6,3>7", True),
          ("2 flows on one uplink (even gids)", "0>4,1>6", True),
          ("one flow per spine", "0>4,1>5", True),
          ("incast into node4 from host 0", "0>4,1>4,2>4,3>4", True),
          ("incast mixing hosts (5>4 is node4's host's)", "0>4,1>4,2>4,5>4", False)]
TOL = 0.05


def run(build, d, local_hosts, scn):
    jpath = os.path.join(d, "flows-%d.json" % local_hosts)
    spec = ";".join([WARMUP] + [p for _, p, _ in PHASES])
    p = subprocess.run(
        [os.path.join(ROOT, "tools", "simfabric"), "launch", "--nodes", "8", "--local-hosts",
         str(local_hosts), "--scenario", scn, "--run-dir", os.path.join(d, "run-%d" %
                                                                       local_hosts), "--",
         os.path.join(build, "simfabric-harness"), "--launched", "--plugin",
         os.path.join(build, "libnccl-net-simfabric.so"), "--json", jpath, "--tests", "flows",
         "--flows", spec, "--flow-bytes", "48M", "--flow-msg", "512K", "--timeout", "200"],
        env=dict(os.environ, SIMFABRIC_BUILD_DIR=build), capture_output=True, text=True,
        timeout=400)
    if p.returncode != 0:
        sys.exit("bench_xhost: the run on %d host(s) failed:\n%s%s" % (local_hosts, p.stdout,
                                                                      p.stderr))
    with open(jpath) as f:
        j = json.load(f)
    warm = len(WARMUP.split(","))
    rates = {e["flow"] - warm: e["steady_gbit_s"] for t in j["tests"] if t["name"] == "flows"
             for e in t["metrics"]["flows"] if e["role"] == "recv" and e["flow"] >= warm}
    late = []
    for stats in [os.path.join(d, "run-%d" % local_hosts, "stats.json")]:
        with open(stats) as f:
            links = json.load(f)["links"]
        n = sum(l["late_n"] for l in links)
        late.append(sum(l["late_sum_ns"] for l in links) / n / 1e3 if n else 0.0)
    return rates, late[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    build = os.path.realpath(a.build)
    with tempfile.TemporaryDirectory(prefix="sf-bench-xhost-") as d:
        scn = os.path.join(d, "oversub-slow.yaml")
        with open(os.path.join(ROOT, "scenarios", "model-oversub.yaml")) as f:
            text = f.read()
        if "link: {rate_gbps: 2," not in text:
            sys.exit("bench_xhost: model-oversub.yaml no longer sets rate_gbps: 2")
        with open(scn, "w") as f:
            f.write(text.replace("link: {rate_gbps: 2,", "link: {rate_gbps: 0.5,"))
        one, late1 = run(build, d, 1, scn)
        two, late2 = run(build, d, 2, scn)
    print("bench_xhost: per-flow shares, one host against two (--local-hosts 2), model-oversub "
          "at 0.5 Gb/s")
    print("%-46s %5s %10s %7s %10s %7s %7s" % ("phase", "flow", "one Gb/s", "share",
                                                "two Gb/s", "share", "ratio"))
    k, worst, out = 0, 0.0, []
    for what, spec, target in PHASES:
        idx = list(range(k, k + len(spec.split(","))))
        t1, t2 = sum(one[i] for i in idx), sum(two[i] for i in idx)
        for i, pair in zip(idx, spec.split(",")):
            s1, s2 = one[i] / t1, two[i] / t2
            r = s2 / s1
            if target:
                worst = max(worst, abs(r - 1))
            out.append({"phase": what, "flow": pair, "one": one[i], "two": two[i],
                        "share_one": s1, "share_two": s2, "ratio": r, "target": target})
            print("%-46s %5s %10.4f %7.3f %10.4f %7.3f %7.3f%s" % (
                what[:46], pair, one[i], s1, two[i], s2, r, "" if target else "  (no target)"))
        k = idx[-1] + 1
    print("deliveries after the model's time, on average: one host %.0f us; two hosts: host 0's "
          "daemon %.0f us (the receivers are host 1's, whose counters the launcher does not "
          "collect yet)" % (late1, late2))
    ok = worst <= TOL
    print("target: every compared share within %.0f%% of one host's: worst %.1f%%: %s" % (
        100 * TOL, 100 * worst, "met" if ok else "MISSED"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"flows": out, "worst": worst, "late_us": [late1, late2]}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
