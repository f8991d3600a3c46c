#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench.py - simfabric's benchmark, everything side by side in one run (`make bench`).

Ideal fabric, 2 processes (the harness's --bench): 8-byte one-way latency through the plugin next
to a raw shared-memory ping-pong between the same two processes; streaming bandwidth at 64 KiB,
1 MiB and 16 MiB next to a memcpy over the same buffers; and the shared memory each connection
holds, sampled from the daemon while the traffic runs. Exit status 1 if a target is missed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tools/, for its modules
from sf import ctl as sfctl  # noqa: E402
from sf.daemon import Daemon  # noqa: E402

MIB = 1 << 20


def sample_memory(sock, stop, seen):
    """Twice a second, record each open connection's shared-memory size.

    Sparse on purpose: the ranks are pinned to the machine's CPUs, and every sample makes the
    daemon and this process run on one of them."""
    while not stop.is_set():
        try:
            for c in sfctl.show(sock)["chans"]:
                if c.get("state") == "open":
                    seen.setdefault(c["id"], set()).add(c.get("shm_bytes"))
        except sfctl.CtlError:
            pass
        stop.wait(0.5)


def run(build, conn_mem, reps):
    d = tempfile.mkdtemp(prefix="simfabric-bench.")
    os.chmod(d, 0o700)
    sock = os.path.join(d, "ctl.sock")
    daemon = Daemon(os.path.join(build, "simfabricd"), sock, os.path.join(d, "daemon.log"),
                    ["--conn-mem", str(conn_mem)] if conn_mem else [])
    try:
        daemon.start(timeout=10)
        hello_mem = None
        seen, stop = {}, threading.Event()
        th = threading.Thread(target=sample_memory, args=(sock, stop, seen), daemon=True)
        th.start()
        runs = []
        for _ in range(reps):
            out = os.path.join(d, "bench.json")
            p = subprocess.run([os.path.join(build, "simfabric-harness"), "--plugin",
                                os.path.join(build, "libnccl-net-simfabric.so"), "--bench",
                                "--nranks", "2", "--json", out],
                               env=dict(os.environ, SIMFABRIC_SOCKET=sock),
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                sys.exit("bench: the harness failed:\n%s\n%s" % (p.stdout, p.stderr))
            with open(out) as f:
                res = json.load(f)
            runs.append([t for t in res["tests"] if t["name"] == "bench" and t["rank"] == 0][0]
                        ["metrics"])
        stop.set()
        th.join()
        st = sfctl.show(sock)
        hello_mem = st.get("conn_mem")
        return runs, seen, hello_mem
    finally:
        daemon.stop(timeout=10)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--reps", type=int, default=3, help="harness runs; medians are reported")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()

    runs, seen, staging = run(a.build, None, a.reps)
    lat = median([r["latency_us"] for r in runs])
    floor = median([r["shm_floor_us"] for r in runs])
    rows = []
    for i, b in enumerate(runs[0]["bandwidth"]):
        rows.append({"bytes": b["bytes"],
                     "plugin": median([r["bandwidth"][i]["plugin_gbps"] for r in runs]),
                     "memcpy": median([r["bandwidth"][i]["memcpy_gbps"] for r in runs]),
                     "memcpy_hot": median([r["bandwidth"][i].get("memcpy_hot_gbps", 0)
                                           for r in runs])})
    sizes = sorted({s for v in seen.values() for s in v})
    fixed = all(len(v) == 1 for v in seen.values()) and len(sizes) == 1
    per_conn = sizes[0] if sizes else None

    # "Configurable": the same traffic with a quarter of the default staging.
    small_runs, small_seen, small_staging = run(a.build, (staging or 2 * MIB) // 4, 1)
    small_sizes = sorted({s for v in small_seen.values() for s in v})

    ok = True
    print("simfabric bench: ideal fabric, 2 processes, medians of %d runs" % a.reps)
    print()
    print("8-byte one-way latency  plugin %.3f us   shared-memory floor %.3f us   above floor %.3f us"
          "   target <= 2 us: %s" % (lat, floor, lat - floor, "ok" if lat - floor <= 2 else "MISS"))
    ok &= lat - floor <= 2
    print()
    print("%-10s %12s %14s %8s %18s" % ("size", "plugin GB/s", "memcpy GB/s", "ratio",
                                         "memcpy hot GB/s"))
    for r in rows:
        ratio = r["plugin"] / r["memcpy"] if r["memcpy"] else 0
        note = ""
        if r["bytes"] == MIB:
            note = "  target >= 0.7: %s" % ("ok" if ratio >= 0.7 else "MISS")
            ok &= ratio >= 0.7
        print("%-10s %12.2f %14.2f %8.2f %18.2f%s" % (
            "%d KiB" % (r["bytes"] >> 10) if r["bytes"] < MIB else "%d MiB" % (r["bytes"] >> 20),
            r["plugin"], r["memcpy"], ratio, r["memcpy_hot"], note))
    print("  (memcpy: the same 8 source and 8 destination buffers the stream cycles through;"
          " hot: one pair, cache-resident)")
    print()
    if per_conn is None:
        print("shared memory per connection: no open connection was sampled  MISS")
        ok = False
    else:
        print("shared memory per connection: %d bytes (%.2f MiB) across %d connections, %s over the"
              " run   target fixed and <= 8 MiB: %s" % (
                  per_conn, per_conn / MIB, len(seen), "fixed" if fixed else "CHANGING",
                  "ok" if fixed and per_conn <= 8 * MIB else "MISS"))
        ok &= fixed and per_conn <= 8 * MIB
    if small_sizes:
        print("  configurable: --conn-mem %d gives %d bytes per connection (streaming 1 MiB at"
              " %.2f GB/s)" % (small_staging or 0, small_sizes[0],
                               [b for b in small_runs[0]["bandwidth"] if b["bytes"] == MIB][0]
                               ["plugin_gbps"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"latency_us": lat, "floor_us": floor, "bandwidth": rows,
                       "shm_bytes_per_conn": per_conn, "fixed": fixed, "runs": runs}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
