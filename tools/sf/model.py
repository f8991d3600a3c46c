# SPDX-License-Identifier: MIT
"""sfmodel - what a collective should take over a resolved fabric: the alpha-beta model.

The launcher (`simfabric run`) holds a job's measured times to this model when the scenario says
`expect: timing:`. Everything comes from the fabric dump (`op=fabric`, `simfabricd --dump-fabric`):
no YAML is read here. Standard library only.

One fabric hop between ring neighbours, node a's NIC j to node b's NIC j, costs

    alpha = o_send_ns(a) + path latency_ns + header time + o_recv_ns(b)
    B     = min( host_rate(a), host_rate(b), min over the path's links of
                 rate_bps / 8 * mtu / (mtu + hdr_bytes) )          payload bytes per second

`path latency_ns` is the dump's (every hop's latency_ns plus the forwarding latency of the switch
it enters); the header time is one packet's header bytes (hdr_bytes + hdr_first_extra +
hdr_last_extra) at the path's slowest rate. A rate or host limit of 0 is unlimited. alpha is what
the fabric's NICs report to NCCL as latency_ns; B is the link's payload rate after per-packet
headers, capped by PCIe.

A job's ring visits its nodes in the job's order (rank order, as NCCL's rings do), node i to
node i+1 and the last back to the first. alpha is the largest of its hops', and B the smallest,
summed over NIC indices (rails): with k NICs per node NCCL spreads its channels over all of them.

With S the collective's size as nccl-tests counts it (the whole buffer: count x type size x
nranks for allgather, reducescatter and alltoall), n ranks, N nodes and G = n / N ranks per node
(ranks of one node talk through the GPU or shared memory, which the model counts as free, so only
the N fabric hops of a ring's n cost alpha), the model's time T is

    allreduce, ring   2 (n-1) N/n alpha + 2 (n-1)/n S / B
    allreduce, tree   2 ceil(log2 N) alpha + k S / B,   k = 1 for N = 2, else 2
                      (NCCL's double binary tree: a rank interior to one tree sends and
                      receives the whole buffer to and from two children and its parent)
    allgather,        (n-1) N/n alpha + (n-1)/n S / B
    reducescatter
    broadcast, reduce (N-1) alpha + S / B              (a pipelined chain)
    alltoall          alpha + G (n-G)/n S / B          (what leaves a node; oversubscribed
                                                        switches are not modelled, so this is
                                                        a lower bound on the time)
    sendrecv          alpha + S / B                    (every rank to the next; one message
                                                        one way when n = 2)
    stream            S / B                            (back-to-back messages, alpha hidden:
                                                        the harness's bandwidth runs)

and its bus bandwidth busbw = S x factor / T, factor as nccl-tests: 2 (n-1)/n for allreduce,
(n-1)/n for allgather, reducescatter and alltoall, 1 otherwise. `best` is the faster of ring and
tree (tree only exists for allreduce), as NCCL's tuner would pick; `ring` or `tree` forces one.

check() compares measurements with it: ratio = measured busbw / model busbw (= model time /
measured time). At and above min_bytes the ratio must lie in busbw = [lo, hi]; below it, in
latency = [lo, hi] (by default [0, hi]: small messages are dominated by software overheads the
model leaves out, so only "never faster than the model beyond hi" holds there).
"""
import math

__all__ = ["Hop", "FabricModel", "predict", "busbw_factor", "check", "COLLECTIVES"]

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
               "sendrecv", "stream")


class Hop:
    """One ring hop's alpha (seconds) and B (payload bytes per second; math.inf: unlimited)."""

    def __init__(self, alpha, bw, src, dst):
        self.alpha, self.bw, self.src, self.dst = alpha, bw, src, dst

    def __repr__(self):
        return "Hop(%s -> %s: alpha %.3f us, B %s)" % (
            self.src, self.dst, self.alpha * 1e6,
            "unlimited" if math.isinf(self.bw) else "%.3f GB/s" % (self.bw / 1e9))


def _rate_Bps(gbps):
    return math.inf if not gbps else gbps * 1e9 / 8


def _path(fb, src, dst):
    for p in fb.get("paths") or ():
        if p["src"] == src and p["dst"] == dst:
            return p
    return None


def _nic(fb, node, index):
    for n in fb["nodes"]:
        if n["name"] == node:
            for nic in n["nics"]:
                if nic["index"] == index:
                    return nic
    return None


def hop(fb, a, b, j=0):
    """The hop from node a's NIC j to node b's NIC j (see the module's text for the formulas)."""
    na, nb = _nic(fb, a, j), _nic(fb, b, j)
    if na is None or nb is None:
        raise KeyError("no NIC %d on %s or %s" % (j, a, b))
    src, dst = "%s/%d" % (a, j), "%s/%d" % (b, j)
    p = _path(fb, src, dst)
    links = fb.get("links") or []
    if p is not None:
        hops = [links[i] for i in p["links"]]
        lat_ns = p["latency_ns"]
    else:  # over 1024 NIC pairs the dump lists no paths: the NICs' own cables only
        hops = [links[i] for i in (na.get("link_out"), nb.get("link_in")) if i is not None]
        lat_ns = sum(l["hop_latency_ns"] for l in hops) if len(hops) == 2 else 0
    bw = min(_rate_Bps(na["params"].get("host_rate_gbps", 0)),
             _rate_Bps(nb["params"].get("host_rate_gbps", 0)))
    slow = math.inf
    hdr = 0
    for l in hops:
        pr = l["params"]
        raw = l["rate_bps"] / 8 if l.get("rate_bps") else math.inf
        slow = min(slow, raw)
        hdr = max(hdr, pr.get("hdr_bytes", 0) + pr.get("hdr_first_extra", 0) +
                  pr.get("hdr_last_extra", 0))
        if not math.isinf(raw):
            mtu = pr.get("mtu", 4096)
            bw = min(bw, raw * mtu / (mtu + pr.get("hdr_bytes", 0)))
    alpha_ns = na["params"].get("o_send_ns", 0) + lat_ns + nb["params"].get("o_recv_ns", 0)
    alpha = alpha_ns * 1e-9 + (hdr / slow if not math.isinf(slow) else 0.0)
    return Hop(alpha, bw, src, dst)


class FabricModel:
    """The ring over nodes (in job order) on a fabric dump: alpha (s) and B (bytes/s)."""

    def __init__(self, fb, nodes):
        if fb.get("kind") == "ideal":
            raise ValueError("the ideal fabric has no latency or bandwidth to model")
        self.nodes = list(nodes)
        self.hops = []
        if len(self.nodes) < 2:
            self.alpha, self.bw, self.rails = 0.0, math.inf, 0
            return
        nics = min(len(n["nics"]) for n in fb["nodes"] if n["name"] in self.nodes)
        self.rails = nics
        alphas, bws = [], []
        for j in range(nics):
            rail = [hop(fb, a, b, j) for a, b in zip(self.nodes, self.nodes[1:] + self.nodes[:1])]
            self.hops += rail
            alphas.append(max(h.alpha for h in rail))
            bws.append(min(h.bw for h in rail))
        self.alpha = max(alphas)
        self.bw = sum(bws)

    def describe(self):
        return "alpha %.3f us, B %s over %d node(s), %d rail(s)" % (
            self.alpha * 1e6, "unlimited" if math.isinf(self.bw) else "%.2f GB/s" % (
                self.bw / 1e9), len(self.nodes), self.rails)


def busbw_factor(coll, n):
    """nccl-tests' busbw / algbw for a collective over n ranks."""
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / float(n)
    return 1.0


def _xfer(nbytes, bw):
    return 0.0 if math.isinf(bw) else nbytes / bw


def coll_time(coll, nbytes, n, nnodes, alpha, bw, algo="ring"):
    """The model's time in seconds (formulas in the module's text)."""
    N, S = nnodes, float(nbytes)
    G = n // max(1, N)
    if N < 2:
        return 0.0
    if coll == "allreduce":
        if algo == "tree":
            k = 1 if N == 2 else 2
            return 2 * math.ceil(math.log2(N)) * alpha + _xfer(k * S, bw)
        return 2 * (n - 1) * N / n * alpha + _xfer(2.0 * (n - 1) / n * S, bw)
    if coll in ("allgather", "reducescatter"):
        return (n - 1) * N / n * alpha + _xfer((n - 1) / n * S, bw)
    if coll in ("broadcast", "reduce"):
        return (N - 1) * alpha + _xfer(S, bw)
    if coll == "alltoall":
        return alpha + _xfer(G * (n - G) / n * S, bw)
    if coll == "sendrecv":
        return alpha + _xfer(S, bw)
    if coll == "stream":
        return _xfer(S, bw)
    raise ValueError("unknown collective %r" % coll)


def predict(model, coll, nbytes, n, algo="best"):
    """{"time_s", "busbw" (bytes/s), "algo"} for coll of nbytes over n ranks on model's ring."""
    N = len(model.nodes)
    algos = ["ring", "tree"] if coll == "allreduce" and algo == "best" else \
        ["tree" if algo == "tree" and coll == "allreduce" else "ring"]
    best = None
    for a in algos:
        t = coll_time(coll, nbytes, n, N, model.alpha, model.bw, a)
        if best is None or t < best[0]:
            best = (t, a)
    t, a = best
    bus = nbytes * busbw_factor(coll, n) / t if t > 0 else math.inf
    return {"time_s": t, "busbw": bus, "algo": a}


def check(results, fb, nodes, nranks, timing):
    """Hold results ([{"coll", "bytes", "time_us", ...}], "stream": true for streaming runs) to
    the model with expect.timing's bounds. Returns (ok, rows, notes); a row per result checked:
    coll, bytes, time_us, busbw (GB/s), model_time_us, model_busbw (GB/s), algo, ratio, bounds,
    verdict ("ok", "too fast", "too slow")."""
    model = FabricModel(fb, nodes)
    lo, hi = timing["busbw"]
    llo, lhi = timing.get("latency") or (0.0, hi)
    min_bytes = timing.get("min_bytes", 1 << 20)
    only = timing.get("collectives")
    rows, notes, ok = [], ["model: " + model.describe()], True
    for r in results:
        coll = r["coll"]
        if only and coll not in only:
            continue
        if not r.get("time_us") or r["time_us"] <= 0:
            continue
        m = predict(model, "stream" if r.get("stream") else coll, r["bytes"], nranks,
                    timing.get("model", "best"))
        if m["time_s"] <= 0:
            notes.append("%s %d B: the model gives no time (no fabric hop): not checked" % (
                coll, r["bytes"]))
            continue
        t = r["time_us"] * 1e-6
        ratio = m["time_s"] / t
        b = (lo, hi) if r["bytes"] >= min_bytes else (llo, lhi)
        verdict = "ok" if b[0] <= ratio <= b[1] else ("too fast" if ratio > b[1] else "too slow")
        ok = ok and verdict == "ok"
        f = busbw_factor("stream" if r.get("stream") else coll, nranks)
        rows.append({"coll": coll + (" (stream)" if r.get("stream") else ""), "bytes": r["bytes"],
                     "time_us": r["time_us"], "busbw": r["bytes"] * f / t / 1e9,
                     "model_time_us": m["time_s"] * 1e6,
                     "model_busbw": m["busbw"] / 1e9 if not math.isinf(m["busbw"]) else None,
                     "algo": m["algo"], "ratio": ratio, "bounds": list(b), "verdict": verdict})
    if not rows:
        ok = False
        notes.append("no measurement to hold to the model")
    return ok, rows, notes


def format_rows(rows):
    """The table `simfabric run` prints."""
    out = ["    %-20s %10s %12s %10s %12s %10s %-5s %6s  %s" % (
        "collective", "bytes", "time us", "busbw GB/s", "model us", "model GB/s", "algo", "ratio",
        "")]
    for r in rows:
        out.append("    %-20s %10d %12.2f %10.3f %12.2f %10s %-5s %6.3f  %s" % (
            r["coll"], r["bytes"], r["time_us"], r["busbw"], r["model_time_us"],
            "%.3f" % r["model_busbw"] if r["model_busbw"] is not None else "-", r["algo"],
            r["ratio"], "" if r["verdict"] == "ok" else "<- %s (bounds %g..%g)" % (
                r["verdict"], r["bounds"][0], r["bounds"][1])))
    return "\n".join(out)
