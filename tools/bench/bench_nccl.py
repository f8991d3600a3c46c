#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench_nccl.py - real NCCL over simfabric against NCCL's own Socket transport, side by side in
one run, on one GPU machine (the ranks share the GPUs, under MPS when they must).

For 2 and 4 ranks it runs the NCCL job program (build/simfabric-nccljob) through
`simfabric launch`: over the ideal fabric (NCCL_NET=simfabric) and, with the very same launcher
environment, over NCCL_NET=Socket on the loopback interface. Each pair runs ROUNDS times,
alternating, and the best of each is kept. It prints 8 B allreduce latency and 64 MiB allreduce
bus bandwidth with their ratios against the targets (busbw >= 2x Socket; latency <= Socket),
the times of 64 KiB to 4 MiB allreduces for information (where NCCL's choice of protocol and
channels, from the speed the plugin reports, shows), then, over the 25 and 100 Gb/s scenarios, measured busbw against the alpha-beta model.

The communicators are blocking (config.blocking = 1), as in nccl-tests and torch.distributed. A
non-blocking communicator makes NCCL start a thread for every group it launches (ncclGroupEnd in
NCCL's src/group.cc), some 30 us per collective whatever the transport, which drowns the network's
share of an 8 B allreduce; that figure is printed too, for information, without a target.

Writes every figure as JSON to --json (or $SIMFABRIC_RESULTS/bench-nccl.json).
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tools/, for its modules
import sflaunch  # noqa: E402
import sfmodel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
MID = ("64K", "256K", "1M", "4M")  # between the latency and the bandwidth figures, for information


def run_job(paths, nranks, net, sizes, iters, warmup, scenario=None, tag="", blocking=1):
    out = os.path.join(sflaunch.make_run_dir(name="bench-nccl"), "r-%r.json")
    cmd = [paths.nccljob, "--coll", "allreduce", "--sizes", sizes, "--iters", str(iters),
           "--warmup", str(warmup), "--timing", "loop", "--blocking", str(blocking),
           "--json", out]
    if net == "socket":
        # after the launcher's environment (which always says simfabric): no plugin at all
        cmd = ["env", "-u", "NCCL_NET_PLUGIN", "NCCL_NET=Socket", "NCCL_SOCKET_IFNAME=lo"] + cmd
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    r = sflaunch.launch(cmd, nranks, scenario=scenario, echo=False, timeout=600, paths=paths,
                        env=env)
    # the transport NCCL really used, from its own log
    used = None
    log = os.path.join(r.run_dir, "rank-0.log")
    if os.path.exists(log):
        m = re.search(r"Using network (\S+)", open(log, errors="replace").read())
        used = m.group(1) if m else None
    want = "Socket" if net == "socket" else "simfabric"
    if used != want:
        raise SystemExit("bench_nccl: %s %d ranks ran over network %s, not %s (see %s)" % (
            net, nranks, used, want, log))
    p0 = out.replace("%r", "0")
    if not r.ok or not os.path.exists(p0):
        raise SystemExit("bench_nccl: %s %d ranks (%s) failed:\n%s\n%s" % (
            net, nranks, tag, r.summary(), r.logs()))
    with open(p0) as f:
        res = json.load(f)
    if res["status"] != "ok" or not all(x["ok"] for x in res["results"]):
        raise SystemExit("bench_nccl: %s %d ranks: status %s" % (net, nranks, res["status"]))
    return {x["bytes"]: x for x in res["results"]}, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--json")
    a = ap.parse_args()
    paths = sflaunch.Paths(a.build_dir)
    if not sflaunch.gpu_ids():
        print("bench_nccl: skipped: no NVIDIA GPU here (nvidia-smi %s)" % (
            "lists none" if sflaunch.shutil.which("nvidia-smi") else "not found"))
        return 0
    if not os.path.exists(paths.nccljob):
        print("bench_nccl: skipped: %s is not built (needs CUDA and NCCL)" % paths.nccljob)
        return 0
    report = {"ideal": {}, "model": {}}
    print("NCCL allreduce, simfabric (ideal fabric) vs NCCL's Socket transport, best of %d "
          "alternating rounds" % a.rounds)
    print("%-6s %-22s %12s %12s %8s %s" % ("ranks", "measure", "simfabric", "Socket", "ratio",
                                           "target"))
    for n in [int(x) for x in a.ranks.split(",")]:
        best = {"simfabric": {}, "socket": {}}
        for _ in range(a.rounds):
            for net in ("simfabric", "socket"):
                lat, _r = run_job(paths, n, net, "8", 2000, 200)
                nbl, _r = run_job(paths, n, net, "8", 2000, 200, blocking=0)
                bw, _r = run_job(paths, n, net, "64M", 20, 5)
                mid, _r = run_job(paths, n, net, ",".join(MID), 100, 10)
                b = best[net]
                b["mid_us"] = {size: min(b.get("mid_us", {}).get(size, 1e18), x["time_us"])
                               for size, x in mid.items()}
                b["lat_us"] = min(b.get("lat_us", 1e18), lat[8]["time_us"])
                b["lat_nonblocking_us"] = min(b.get("lat_nonblocking_us", 1e18),
                                              nbl[8]["time_us"])
                b["busbw"] = max(b.get("busbw", 0), bw[64 << 20]["busbw_gbps"])
        s, k = best["simfabric"], best["socket"]
        rl, rb = s["lat_us"] / k["lat_us"], s["busbw"] / k["busbw"]
        print("%-6d %-22s %10.1f us %10.1f us %7.2fx %s" % (
            n, "8 B latency", s["lat_us"], k["lat_us"], rl,
            "<= 1.00x: %s" % ("met" if rl <= 1.0 else "NOT met")))
        print("%-6d %-22s %10.1f us %10.1f us %7.2fx %s" % (
            n, "8 B, non-blocking comm", s["lat_nonblocking_us"], k["lat_nonblocking_us"],
            s["lat_nonblocking_us"] / k["lat_nonblocking_us"], "(information: NCCL's thread "
            "per group dominates)"))
        print("%-6d %-22s %7.2f GB/s %7.2f GB/s %7.2fx %s" % (
            n, "64 MiB busbw", s["busbw"], k["busbw"], rb,
            ">= 2.00x: %s" % ("met" if rb >= 2.0 else "NOT met")))
        for size in sorted(s["mid_us"]):
            print("%-6d %-22s %10.1f us %10.1f us %7.2fx %s" % (
                n, "%d KiB allreduce" % (size >> 10), s["mid_us"][size], k["mid_us"][size],
                s["mid_us"][size] / k["mid_us"][size], "(information)"))
        report["ideal"][n] = {"simfabric": s, "socket": k, "latency_ratio": rl,
                              "busbw_ratio": rb}
    print("\nNCCL allreduce busbw against the alpha-beta model (tools/sfmodel.py), 2 ranks")
    for sc in ("job-nccl-25g.yaml", "job-nccl-100g.yaml"):
        path = os.path.join(ROOT, "scenarios", sc)
        res, r = run_job(paths, 2, "simfabric", "1M,16M,64M", 20, 5, scenario=path, tag=sc)
        rows = []
        model = sfmodel.FabricModel(r.fabric, sflaunch.node_names(r.fabric, 2))
        for size in sorted(res):
            x = res[size]
            m = sfmodel.predict(model, "allreduce", size, 2)["busbw"] / 1e9
            rows.append({"bytes": size, "busbw": x["busbw_gbps"], "model": m})
            print("  %-20s %8d KiB  measured %6.2f GB/s  model %s" % (
                sc, size >> 10, x["busbw_gbps"], "%.2f GB/s (%.2fx)" % (m, x["busbw_gbps"] / m)
                if m else "n/a"))
        report["model"][sc] = rows
    out = a.json or (os.path.join(os.environ["SIMFABRIC_RESULTS"], "bench-nccl.json")
                     if os.environ.get("SIMFABRIC_RESULTS") else None)
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
