#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ab_gpu.py - GPU path settings side by side over the modelled fabrics: NCCL's allreduce at
1, 4, 16 and 64 MiB on the 100, 200 and 400 Gb/s scenarios (as tools/bench/bench_nccl.py runs
them), once per setting, the settings alternating and rotated from round to round, busbw against
the alpha-beta model (tools/sf/model.py), then each setting's mean over the rounds.

    tools/bench/ab_gpu.py --variant off=SIMFABRIC_GPU_ARM=off --variant whole=SIMFABRIC_GPU_ARM=whole

A variant is NAME=VAR=VALUE[,VAR=VALUE...] (NAME alone: the defaults). Each run's line also
says how many GPU copies its ranks made and how many were armed ahead (the sendComms' close
lines). docs/gpu-path.md, "Armed copies, measured", came from it. Without a GPU it says so and
exits 0, as the bench does.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tools/, for its modules
import bench_nccl  # noqa: E402
from sf import paths as sfpaths  # noqa: E402

SIZES = "1M,4M,16M,64M"
NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
VAR = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def parse_variant(text):
    """'name=VAR=v,VAR2=w' -> (name, {VAR: v, VAR2: w}); ValueError naming what is wrong."""
    name, _, rest = text.partition("=")
    if not NAME.match(name):
        raise ValueError("variant %r: the name before '=' must be letters, digits, '_', '.' "
                         "or '-'" % text)
    env = {}
    for kv in rest.split(",") if rest else []:
        k, eq, v = kv.partition("=")
        if not eq or not VAR.match(k) or " " in v:
            raise ValueError("variant %r: %r is not VAR=VALUE (an upper-case name, no spaces)"
                             % (text, kv))
        env[k] = v
    return name, env


def copies(log_text):
    """(copies made, of which armed) from the sendComms' close lines in one rank's log."""
    pairs = re.findall(r"(\d+) GPU copies, (\d+) of them armed ahead", log_text)
    return sum(int(a) for a, _ in pairs), sum(int(b) for _, b in pairs)


def order(variants, rnd):
    """Round rnd's order: the list rotated by rnd, so that no setting always runs first."""
    k = rnd % len(variants)
    return variants[k:] + variants[:k]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(bench_nccl.ROOT, "build"))
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=VAR=VALUE,...")
    ap.add_argument("--rates", default="100g,200g,400g")
    ap.add_argument("--nodes", default="2,4")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    try:
        variants = [parse_variant(v) for v in a.variant]
    except ValueError as e:
        ap.error(str(e))
    if len(variants) < 2 or len({n for n, _ in variants}) != len(variants):
        ap.error("--variant: two or more, each with a name of its own")
    known = {r for r, _ in bench_nccl.MODEL_RATES}
    rates = [r for r in a.rates.split(",") if r]
    if not rates or set(rates) - known:
        ap.error("--rates %r: want some of %s" % (a.rates, ",".join(sorted(known))))
    try:
        nodes = [int(x) for x in a.nodes.split(",")]
    except ValueError:
        nodes = []
    if not nodes or min(nodes) < 2 or max(nodes) > 64:
        ap.error("--nodes %r: want numbers from 2 to 64, like 2,4" % a.nodes)
    if not 1 <= a.rounds <= 20:
        ap.error("--rounds %d: want 1 to 20" % a.rounds)
    paths = sfpaths.Paths(a.build_dir)
    why = bench_nccl.why_not_here(paths)
    if why:
        print("ab_gpu: skipped: %s" % why)
        return 0
    got = {}
    for rnd in range(a.rounds):
        for rate in rates:
            for n in nodes:
                sc = bench_nccl.scenario_for(rate, n)
                for name, env in order(variants, rnd):
                    res, r = bench_nccl.run_job(paths, n, "simfabric", SIZES, 20, 5, scenario=sc,
                                                tag=rate, extra_env=dict(env, SIMFABRIC_GPU="on"))
                    ratios = [x["ratio"] for x in bench_nccl.model_rows(r, res, n)]
                    with open(os.path.join(r.run_dir, "rank-0.log"), errors="replace") as f:
                        made, armed = copies(f.read())
                    print("round %d  %-5s %d nodes  %-12s %s   (rank 0: %d GPU copies, %d armed)"
                          % (rnd + 1, rate, n, name, " ".join("%.2f" % x for x in ratios), made,
                             armed), flush=True)
                    got.setdefault((rate, n, name), []).append(ratios)
    print("\nbusbw / model at %s, the mean of %d round(s)" % (SIZES.replace(",", " "), a.rounds))
    for rate in rates:
        for n in nodes:
            for name, _ in variants:
                v = got[(rate, n, name)]
                mean = [sum(x[i] for x in v) / len(v) for i in range(len(v[0]))]
                print("  %-5s %d nodes  %-12s %s" % (rate, n, name,
                                                      " ".join("%.2f" % x for x in mean)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
