#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench_nccl.py - real NCCL over simfabric against NCCL's own Socket transport, side by side in
one run, on one GPU machine (the ranks share the GPU, under MPS).

For 2 and 4 ranks it runs the NCCL job program (build/simfabric-nccljob) through `simfabric
launch` over the ideal fabric three ways: simfabric's GPU path (SIMFABRIC_GPU=on: one-sided copies
into the receiver's GPU memory, NCCL's GPUDirect path, checked in NCCL's log), its host path
(SIMFABRIC_GPU=off) and NCCL_NET=Socket on loopback, with the very same launcher environment, an
allreduce sweep from 8 B to 64 MiB, best of --rounds rounds. It prints the ratios against Socket
first, then, over the 100, 200 and 400 Gb/s scenarios at 2 and 4 nodes, measured busbw against
the alpha-beta model (tools/sf/model.py) and what the daemon's fidelity monitor said, and last the
issue's targets, each met or NOT; then (issue 18) NCCL on the 25 Gb/s scenario across two
emulated hosts (`--local-hosts 2`: libfabric between them, host memory), against the model.

The communicators are blocking (config.blocking = 1), as in nccl-tests and torch.distributed.

Writes every figure as JSON to --json (or $SIMFABRIC_RESULTS/bench-nccl.json).
"""
import argparse
import json
import os
import shutil
import re
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tools/, for its modules
from sf import launch as sflaunch  # noqa: E402
from sf import paths as sfpaths  # noqa: E402
from sf import ranks as sfranks  # noqa: E402
from sf import model as sfmodel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def run_job(paths, nranks, net, sizes, iters, warmup, scenario=None, tag="", blocking=1,
            extra_env=None, local_hosts=1):
    out = os.path.join(sflaunch.make_run_dir(name="bench-nccl"), "r-%r.json")
    cmd = [paths.nccljob, "--coll", "allreduce", "--sizes", sizes, "--iters", str(iters),
           "--warmup", str(warmup), "--timing", "loop", "--blocking", str(blocking),
           "--json", out]
    if net == "socket":
        # after the launcher's environment (which always says simfabric): no plugin at all
        cmd = ["env", "-u", "NCCL_NET_PLUGIN", "NCCL_NET=Socket", "NCCL_SOCKET_IFNAME=lo"] + cmd
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    env.update(extra_env or {})
    r = sflaunch.launch(cmd, nranks, scenario=scenario, echo=False, timeout=600, paths=paths,
                        env=env, local_hosts=local_hosts)
    # the transport NCCL really used, from its own log
    used = None
    log = os.path.join(r.run_dir, "rank-0.log")
    if os.path.exists(log):
        m = re.search(r"Using network (\S+)", open(log, errors="replace").read())
        used = m.group(1) if m else None
    want = "Socket" if net == "socket" else "simfabric"
    if used == "simfabric" and (extra_env or {}).get("SIMFABRIC_GPU") == "on" and \
            "GDRDMA" not in open(log, errors="replace").read():
        raise SystemExit("bench_nccl: %d ranks: NCCL did not use GPUDirect (GDRDMA) over "
                         "simfabric's GPU path (see %s)" % (nranks, log))
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


SWEEP = ("8", "64", "512", "4K", "32K", "256K", "1M", "4M", "16M", "64M")
NETS = ("gpu", "host", "socket")  # simfabric with SIMFABRIC_GPU=on, =off, and NCCL's Socket
# issue targets: GPU mode against Socket, and against the alpha-beta model
LAT_TARGET, BUSBW_TARGET = 0.5, {2: 40.0, 4: 25.0}
MODEL_RATES = (("100g", 0.95), ("200g", 0.95), ("400g", 0.90))
# issue 18: NCCL over two emulated hosts on this machine (libfabric's tcp provider between them,
# the distributed fabric clock), busbw against the model on the 25 Gb/s scenario
XHOST = ("25g", 2, 0.95)


def scenario_for(rate, nodes):
    """scenarios/job-nccl-<rate>.yaml with its node count set to nodes (a temporary copy)."""
    src = os.path.join(ROOT, "scenarios", "job-nccl-%s.yaml" % rate)
    text = open(src).read()
    if nodes != 2:
        text = text.replace("count: 2", "count: %d" % nodes).replace(
            "[node0, node1]", "[%s]" % ", ".join("node%d" % i for i in range(nodes)))
    path = os.path.join(sflaunch.make_run_dir(name="bench-scn"), "job-nccl-%s-%d.yaml" % (
        rate, nodes))
    with open(path, "w") as f:
        f.write(text)
    return path


def sweep(paths, n, net, rounds, gpu_env=None):
    """{bytes: best time_us} and the 64 MiB busbw over rounds, for one kind of net."""
    env = {"SIMFABRIC_GPU": "on" if net == "gpu" else "off"}
    if net == "gpu":
        env.update(gpu_env or {})
    best = {}
    for _ in range(rounds):
        res, _r = run_job(paths, n, "socket" if net == "socket" else "simfabric",
                          ",".join(SWEEP), 50, 10, tag=net, extra_env=env)
        for size, x in res.items():
            b = best.setdefault(size, {"time_us": 1e18, "busbw": 0.0})
            b["time_us"] = min(b["time_us"], x["time_us"])
            b["busbw"] = max(b["busbw"], x["busbw_gbps"])
    return best


def why_not_here(paths):
    """Why NCCL cannot run here (no GPU, the job program not built), or None."""
    if not sfranks.gpu_ids():
        return "no NVIDIA GPU here (nvidia-smi %s)" % (
            "lists none" if shutil.which("nvidia-smi") else "not found")
    if not os.path.exists(paths.nccljob):
        return "%s is not built (needs CUDA and NCCL)" % paths.nccljob
    return None


def env_pairs(ap, opt, items):
    """NAME=VALUE options as a dict; a usage error naming the bad one."""
    out = {}
    for kv in items:
        k, eq, v = kv.partition("=")
        if not eq or not k:
            ap.error("%s %r: want NAME=VALUE" % (opt, kv))
        out[k] = v
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--json")
    ap.add_argument("--gpu-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the GPU path's runs only (repeatable): "
                    "to compare a setting side by side with Socket")
    ap.add_argument("--no-xhost", dest="xhost", action="store_false",
                    help="skip NCCL across two local hosts (issue 18's 25 Gb/s target)")
    ap.add_argument("--rates", default=",".join(r for r, _ in MODEL_RATES),
                    help="the modelled fabrics to run (default all; empty: none)")
    ap.add_argument("--xhost-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the run across two local hosts only "
                    "(repeatable; with --ranks '' --rates '' only that run): to try a "
                    "libfabric setting, FI_OFI_RXM_SAR_LIMIT=4194304 say")
    a = ap.parse_args()
    gpu_env, xhost_env = env_pairs(ap, "--gpu-env", a.gpu_env), env_pairs(ap, "--xhost-env",
                                                                          a.xhost_env)
    if xhost_env and not a.xhost:
        ap.error("--xhost-env is for the run across two local hosts, which --no-xhost skips")
    if "SIMFABRIC_GPU" in xhost_env:
        ap.error("--xhost-env SIMFABRIC_GPU: the run across hosts is on the host path (GPU "
                 "memory across hosts is not built)")
    try:
        ranks = [int(x) for x in a.ranks.split(",") if x.strip()]
    except ValueError:
        ap.error("--ranks %r: want numbers like 2,4 (or '' for none)" % a.ranks)
    rates = [x for x in MODEL_RATES if x[0] in a.rates.split(",")]
    unknown = set(a.rates.split(",")) - {r for r, _ in MODEL_RATES} - {""}
    if unknown:
        ap.error("--rates: unknown %s (known: %s)" % (", ".join(sorted(unknown)),
                                                       ", ".join(r for r, _ in MODEL_RATES)))
    paths = sfpaths.Paths(a.build_dir)
    why = why_not_here(paths)
    if why:
        print("bench_nccl: skipped: %s" % why)
        return 0
    report = {"ideal": {}, "model": {}}
    verdicts = []
    for n in ranks:
        best = {net: sweep(paths, n, net, a.rounds, gpu_env) for net in NETS}
        g, h, k = best["gpu"], best["host"], best["socket"]
        print("\nNCCL allreduce, %d ranks on one GPU, ideal fabric, best of %d rounds: simfabric "
              "GPU path (SIMFABRIC_GPU=on) and host path (off) against NCCL's Socket" % (n, a.rounds))
        print("%9s %9s %9s %11s %11s %11s" % ("bytes", "GPU/Sock", "host/Sock", "GPU us",
                                               "host us", "Socket us"))
        slower = []
        for size in sorted(g):
            rg, rh = g[size]["time_us"] / k[size]["time_us"], h[size]["time_us"] / k[size]["time_us"]
            if rg > 1.0:
                slower.append(size)
            print("%9d %8.2fx %8.2fx %11.1f %11.1f %11.1f" % (
                size, rg, rh, g[size]["time_us"], h[size]["time_us"], k[size]["time_us"]))
        big = 64 << 20
        lat = g[8]["time_us"] / k[8]["time_us"]
        verdicts += [
            ("%d ranks: 8 B allreduce GPU/Socket %.2fx" % (n, lat), "<= %.2fx" % LAT_TARGET,
             lat <= LAT_TARGET),
            ("%d ranks: 64 MiB busbw GPU %.1f GB/s (host %.1f, Socket %.1f)" % (
                n, g[big]["busbw"], h[big]["busbw"], k[big]["busbw"]),
             ">= %.0f GB/s" % BUSBW_TARGET.get(n, 0), g[big]["busbw"] >= BUSBW_TARGET.get(n, 0)),
            ("%d ranks: sizes slower than Socket on the GPU path: %s" % (
                n, ", ".join(str(x) for x in slower) or "none"), "none", not slower)]
        report["ideal"][n] = {"gpu": g, "host": h, "socket": k}
    for rate, want in rates:
        for n in ranks:
            sc = scenario_for(rate, n)
            res, r = run_job(paths, n, "simfabric", "1M,4M,16M,64M", 20, 5, scenario=sc,
                             tag=rate, extra_env=dict(gpu_env, SIMFABRIC_GPU="on"))
            rows = model_rows(r, res, n)
            worst = min(x["ratio"] for x in rows)
            fid = fidelity_note(r)
            why = floor_note(rows, report["ideal"].get(n, {}).get("gpu", {}))
            verdicts.append(("%s, %d nodes: busbw / model from 1 MiB, worst %.2fx (%s); %s%s" % (
                rate, n, worst, ", ".join("%s %.2fx" % (human(x["bytes"]), x["ratio"])
                                          for x in rows), fid, why),
                ">= %.2fx" % want, worst >= want))
            report["model"]["%s-%d" % (rate, n)] = rows
    if a.xhost:
        rate, n, want = XHOST
        sc = scenario_for(rate, n)
        # across two local hosts, then the same scenario and settings on one (the reference:
        # what the host path reaches without libfabric), side by side in one run
        rows, fid = xhost_rows(paths, sc, n, xhost_env, 2)
        one, _ = xhost_rows(paths, sc, n, xhost_env, 1)
        worst = min(x["ratio"] for x in rows)
        verdicts.append(("%s, %d nodes on 2 local hosts (libfabric between them, host memory%s): "
                         "busbw / model from 1 MiB, worst %.2fx (%s); %s; on one host %s" % (
                             rate, n, "".join(", %s=%s" % kv for kv in sorted(xhost_env.items())),
                             worst, ratios(rows), fid, ratios(one)),
                         ">= %.2fx" % want, worst >= want))
        report["model"]["%s-%d-xhost" % (rate, n)] = rows
        report["model"]["%s-%d-xhost-one-host" % (rate, n)] = one
    print("\nTargets (GPU path)")
    for what, target, ok in verdicts:
        print("  %-4s %-10s %s" % ("met" if ok else "NOT", target, what))
    report["targets"] = [{"what": w, "target": t, "met": ok} for w, t, ok in verdicts]
    out = a.json or (os.path.join(os.environ["SIMFABRIC_RESULTS"], "bench-nccl.json")
                     if os.environ.get("SIMFABRIC_RESULTS") else None)
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def xhost_rows(paths, sc, n, env, local_hosts):
    """NCCL allreduce on scenario sc over local_hosts hosts, host memory: (rows, fidelity)."""
    res, r = run_job(paths, n, "simfabric", "1M,4M,16M,64M", 20, 5, scenario=sc,
                     tag="xhost-%d" % local_hosts, extra_env=dict(env, SIMFABRIC_GPU="off"),
                     local_hosts=local_hosts)
    return model_rows(r, res, n), fidelity_note(r)


def model_rows(r, res, n):
    """An allreduce's results (res, by size, from run_job) against the alpha-beta model of the
    fabric launch r ran on, n nodes: a row per size, smallest first, with busbw and the model's
    (GB/s), their ratio and the model's time (us)."""
    model = sfmodel.FabricModel(r.fabric, sflaunch.node_names(r.fabric, n))
    rows = []
    for size in sorted(res):
        p = sfmodel.predict(model, "allreduce", size, n)
        m = p["busbw"] / 1e9
        rows.append({"bytes": size, "busbw": res[size]["busbw_gbps"], "model": m,
                     "ratio": res[size]["busbw_gbps"] / m if m else 0,
                     "model_us": p["time_s"] * 1e6})
    return rows


def floor_note(rows, ideal):
    """What this machine allows each modelled size, from the same run's ideal-fabric sweep
    (ideal: {bytes: {"time_us": ...}}, the GPU path): the ideal fabric adds no network time, so
    the time it took for a size is about the least any fabric's run of that size takes here
    (NCCL may choose otherwise at another link rate, so not a strict bound). Sets each row's
    ideal_us, below_floor and bound (the model's time over the ideal one, at most 1); returns
    the verdict's words for the sizes whose model time is below it, or ""."""
    under = []
    for x in rows:
        t = (ideal.get(x["bytes"]) or {}).get("time_us")
        x["ideal_us"] = t
        x["below_floor"] = bool(t and x["model_us"] < t)
        x["bound"] = min(1.0, x["model_us"] / t) if t else None
        if x["below_floor"]:
            under.append(x)
    if not under:
        return ""
    return ("; the model's time is below this machine's own over the ideal fabric at %s" % (
        ", ".join("%s (model %.1f us, ideal %.1f us: at most %.2fx)" % (
            human(x["bytes"]), x["model_us"], x["ideal_us"], x["bound"]) for x in under)))


def ratios(rows):
    return ", ".join("%s %.2fx" % (human(x["bytes"]), x["ratio"]) for x in rows)


def human(b):
    return "%d MiB" % (b >> 20) if b >= 1 << 20 else "%d KiB" % (b >> 10)


def fidelity_note(r):
    """What the daemon's fidelity monitor said during the run (its log), in a few words."""
    log = os.path.join(r.run_dir, "simfabricd.log")
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    n = len(re.findall(r"fidelity: ", text))
    return "fidelity monitor silent" if n == 0 else "fidelity monitor: %d line(s)" % n


if __name__ == "__main__":
    sys.exit(main())
