# SPDX-License-Identifier: MIT
"""sfreport - what a job did on its fabric, from its run directory (`simfabric report`).

  simfabric report RESULTS [--out DIR] [--format png|svg|text] [--fabric FILE]

RESULTS is a run directory of `simfabric run` or `simfabric launch` (its stats.json, faults.json,
series.json and fabric.json, which they write on a modelled fabric, and the program's results:
nccljob.json, harness.json, ...) or one results file (the NCCL job program's --json, the
harness's --json, tools/bench/bench.py's --json), read with the fabric.json beside it or --fabric's
(a dump, or a scenario file). Three views:

  measured vs model  per collective and size, the measured time and busbw against the
                     alpha-beta model of the fabric (tools/sfmodel.py predict()); ratio is
                     measured busbw / model busbw (= model time / measured time)
  utilisation        per directed link over fabric time, from series.json (the daemon's
                     samples of what crossed every link, op=series): payload bytes x 8 /
                     (rate x time), its peak sample and its mean over the active interval
                     (the samples from the first to the last with traffic, within the job's
                     span); without series.json, bytes / (rate x the job's run time) for the
                     whole run. Per link also its queueing delay (p99 bound and max) from
                     stats.json; per connection, its messages and bytes
  faults             each fault's origin and windows in fabric time (ms since the daemon
                     started, the clock of faults.json and series.json) and what it hit,
                     against the job's start and end, laid over the throughput of the links
                     it acts on (series.json) and, where the program stamped its messages
                     (the harness's faults test), its throughput over time

as three charts (model, links and faults .png or .svg in --out, by default next to the results)
when matplotlib imports, and always as a plain-text summary on stdout (--format text: only that).
Standard library only; matplotlib is optional.
"""
import json
import math
import os
import sys

from . import model as sfmodel

EXIT_OK, EXIT_USAGE, EXIT_CANNOT = 0, 2, 77
CHARTS = ("model", "links", "faults")
CHART_WIDTH = 60  # columns of the text charts
# run-directory files that are not a program's results
OWN_FILES = {"stats.json", "faults.json", "series.json", "fabric.json", "launch.json",
             "job.json", "report.json"}
RESULT_FILES = ("nccljob.json", "harness.json", "result.json", "bench.json")
TORCH_NAMES = {"all_reduce": "allreduce", "all_gather": "allgather",
               "reduce_scatter": "reducescatter", "all_to_all": "alltoall",
               "send_recv": "sendrecv"}


class ReportError(Exception):
    """RESULTS cannot be reported on: status is the CLI's exit status."""

    def __init__(self, msg, status=EXIT_USAGE):
        super().__init__(msg)
        self.status = status


# ---- loading ---------------------------------------------------------------------------------

def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise ReportError("%s: %s" % (path, e.strerror))
    except ValueError as e:
        raise ReportError("%s is not JSON: %s" % (path, e))


def _maybe(path):
    return _load(path) if os.path.isfile(path) else None


def kind_of(doc):
    """Which program wrote a results document: nccljob, harness, torch, bench, or None."""
    if not isinstance(doc, dict):
        return None
    res = doc.get("results")
    if isinstance(res, list) and res and all(isinstance(r, dict) for r in res):
        if all("coll" in r for r in res):
            return "nccljob"
        if all("collective" in r for r in res):
            return "torch"
    if doc.get("program") == "simfabric-nccljob":
        return "nccljob"
    if isinstance(doc.get("tests"), list) and "plugin" in doc:
        return "harness"
    if "latency_us" in doc and isinstance(doc.get("bandwidth"), list):
        return "bench"
    return None


def find_results(d):
    """The program's results in run directory d: (path, doc, kind), or (None, None, None). The
    NCCL job program's per-rank files (--json r-%r.json) give the combined view or rank 0's."""
    names = [n for n in RESULT_FILES if os.path.isfile(os.path.join(d, n))]
    names += sorted(n for n in os.listdir(d) if n.endswith(".json") and n not in OWN_FILES
                    and n not in RESULT_FILES)
    found = []
    for n in names:
        p = os.path.join(d, n)
        try:
            doc = _load(p)
        except ReportError:
            continue
        k = kind_of(doc)
        if k:
            found.append((p, doc, k))
    log = os.path.join(d, "rank-0.log")
    if not found and os.path.isfile(log):  # torch_collectives.py prints its JSON as a line
        with open(log, "rb") as f:
            for ln in reversed(f.read().decode("utf-8", "replace").splitlines()):
                if ln.startswith("{"):
                    try:
                        doc = json.loads(ln)
                    except ValueError:
                        continue
                    if kind_of(doc):
                        found.append((log, doc, kind_of(doc)))
                    break
    if not found:
        return None, None, None

    def rank(item):
        doc = item[1]
        return (0 if doc.get("view") == "combined" else 1 if doc.get("rank", 0) == 0 else 2,
                found.index(item))
    return min(found, key=rank)


def load_fabric(path):
    """A fabric dump (JSON) or a scenario file (resolved by `simfabricd --dump-fabric`)."""
    if path.endswith((".yaml", ".yml")):
        from . import launch as sflaunch
        from . import paths as sfpaths
        try:
            return sflaunch.dump_scenario(path)
        except sfpaths.LaunchError as e:
            raise ReportError("--fabric %s: %s" % (path, e))
    return _load(path)


class Run:
    """What there is to report on: .fabric (dump), .stats (stats.json), .faults (faults.json),
    .series (series.json), .doc / .kind / .source (the program's results), .dir."""

    def __init__(self, results, fabric=None):
        if os.path.isdir(results):
            self.dir = os.path.realpath(results)
            self.source, self.doc, self.kind = find_results(self.dir)
        elif os.path.isfile(results):
            self.dir = os.path.dirname(os.path.realpath(results))
            self.source, self.doc = os.path.realpath(results), _load(results)
            self.kind = kind_of(self.doc)
            if self.kind is None and os.path.basename(results) in OWN_FILES:
                self.source = self.doc = None  # a counter file: report on its directory
            elif self.kind is None:
                raise ReportError("%s is not a results file simfabric knows (the NCCL job "
                                  "program's, the harness's or tools/bench/bench.py's --json)" %
                                  results)
        else:
            raise ReportError("%s: no such run directory or results file" % results)
        fpath = fabric or os.path.join(self.dir, "fabric.json")
        self.fabric = load_fabric(fpath) if fabric or os.path.isfile(fpath) else None
        self.stats = _maybe(os.path.join(self.dir, "stats.json"))
        self.faults = _maybe(os.path.join(self.dir, "faults.json"))
        self.series = _maybe(os.path.join(self.dir, "series.json"))

    @property
    def epoch_ns(self):
        for d in (self.stats, self.faults, self.series):
            if d and d.get("epoch_ns") is not None:
                return d["epoch_ns"]
        return None

    @property
    def over_time(self):
        """series_links(self), worked out once: the text and both charts use it."""
        if not hasattr(self, "_over_time"):
            self._over_time = series_links(self)
        return self._over_time

    @property
    def job_span(self):
        """(start_ns, end_ns) of the job in fabric time, or None."""
        j = (self.stats or {}).get("job") or {}
        if j.get("start_ns") is None:
            return None
        return j["start_ns"], j["end_ns"]

    @property
    def job_seconds(self):
        return ((self.stats or {}).get("job") or {}).get("seconds")


# ---- measured against the model ----------------------------------------------------------------

def measured(doc, kind):
    """A results document, normalised: (rows [{"coll", "bytes", "time_us", "stream"}], nranks,
    the ranks' nodes in rank order or None, what it is)."""
    rows, nranks, nodes = [], None, None
    if kind == "nccljob":
        nranks = doc.get("nranks")
        for r in doc.get("results") or []:
            if r.get("time_us"):
                rows.append({"coll": r["coll"], "bytes": r["bytes"], "time_us": r["time_us"]})
        hosts = doc.get("hostids") or []
        if hosts and all(hosts):
            nodes = list(dict.fromkeys(hosts))
        what = "the NCCL job program"
    elif kind == "torch":
        nranks = doc.get("world")
        for r in doc.get("results") or []:
            if r.get("time_us"):
                rows.append({"coll": TORCH_NAMES.get(r["collective"], r["collective"]),
                             "bytes": r["bytes"], "time_us": r["time_us"]})
        what = "torch.distributed"
    elif kind in ("harness", "bench"):
        if kind == "harness":
            nranks = doc.get("nranks")
            m = next((t.get("metrics") or {} for t in doc.get("tests") or []
                      if t.get("name") == "bench" and t.get("rank") == 0), None)
            what = "the harness's bench" if m is not None else \
                "the harness; its bench test did not run, so nothing to hold to the model"
            m = m or {}
        else:
            nranks, m, what = 2, doc, "tools/bench/bench.py"
        if m.get("latency_us"):
            rows.append({"coll": "sendrecv", "bytes": 8, "time_us": m["latency_us"]})
        for b in m.get("bandwidth") or []:
            gbps = b.get("plugin_gbps", b.get("plugin"))
            if gbps:
                rows.append({"coll": "sendrecv", "stream": True, "bytes": b["bytes"],
                             "time_us": b["bytes"] / (gbps * 1e9) * 1e6})
    else:
        return [], None, None, None
    return rows, nranks, nodes, what


def job_nodes(fb, nranks, nodes=None):
    """The nodes of the ring the model follows: the results' own, the scenario's job:, or the
    fabric's first nodes (one rank each)."""
    if nodes:
        return nodes
    job = (fb or {}).get("job") or {}
    if job.get("nodes"):
        return list(job["nodes"])
    names = [n["name"] for n in (fb or {}).get("nodes") or []]
    g = job.get("gpus_per_node") or 1
    return names[:max(1, (nranks or 0) // g)] if names and nranks else []


def model_rows(run):
    """(rows, notes): per measurement its model time and busbw, and the ratio."""
    rows, nranks, nodes, what = measured(run.doc, run.kind) if run.doc else ([], None, None, None)
    notes = []
    if what is None:
        return [], ["no results of a program in %s (nccljob.json, harness.json, ...)" % run.dir]
    notes.append("%s, %s rank(s): %s" % (os.path.basename(run.source), nranks or "?", what))
    model = None
    fb = run.fabric
    if fb is None:
        notes.append("no fabric.json: measured only (give --fabric)")
    elif fb.get("kind") == "ideal":
        notes.append("the ideal fabric has no model: measured only")
    else:
        nodes = job_nodes(fb, nranks, nodes)
        try:
            model = sfmodel.FabricModel(fb, nodes) if len(nodes) >= 2 else None
        except (KeyError, ValueError) as e:
            notes.append("no model: %s" % e)
        if model is None and len(nodes) < 2:
            notes.append("no model: fewer than 2 nodes (%s)" % ", ".join(nodes))
        elif model is not None:
            notes.append("model on %s: %s" % (", ".join(nodes), model.describe()))
    algo = (((fb or {}).get("expect") or {}).get("timing") or {}).get("model", "best")
    n = nranks or 2
    out = []
    for r in rows:
        coll = "stream" if r.get("stream") else r["coll"]
        t = r["time_us"] * 1e-6
        f = sfmodel.busbw_factor(coll, n)
        row = {"coll": r["coll"] + (" (stream)" if r.get("stream") else ""),
               "bytes": r["bytes"], "time_us": r["time_us"], "busbw": r["bytes"] * f / t / 1e9,
               "model_time_us": None, "model_busbw": None, "algo": None, "ratio": None}
        if model is not None:
            try:
                m = sfmodel.predict(model, coll, r["bytes"], n, algo)
            except ValueError:
                m = None
            if m and m["time_s"] > 0:
                row.update(model_time_us=m["time_s"] * 1e6, algo=m["algo"],
                           model_busbw=None if math.isinf(m["busbw"]) else m["busbw"] / 1e9,
                           ratio=m["time_s"] / t)
        out.append(row)
    return out, notes


# ---- links and connections ---------------------------------------------------------------------

def link_rows(run):
    """Per directed link: its counters and utilisation = bytes x 8 / (rate x job seconds)."""
    secs = run.job_seconds
    out = []
    for l in (run.stats or {}).get("links") or []:
        rate = l.get("rate_bps") or 0
        util = l["bytes"] * 8.0 / (rate * secs) if rate and secs else None
        late = l["late_sum_ns"] / l["late_n"] / 1e3 if l.get("late_n") else 0.0
        out.append(dict(l, util=util, late_us=late))
    return out


# ---- links over time (series.json) -------------------------------------------------------------

def span_of(sample):
    """A sample's interval [start, end) in fabric ns."""
    return sample["t_ns"] - sample["dt_ns"], sample["t_ns"]


def series_samples(series, span=None):
    """op=series' samples (series.json's), those that overlap span (start_ns, end_ns) when
    given: a shared daemon's samples include earlier jobs."""
    out = (series or {}).get("samples") or []
    if span:
        out = [s for s in out if span_of(s)[1] > span[0] and span_of(s)[0] < span[1]]
    return out


def dropped_before(series, span):
    """How many ns at the job's start the series no longer holds (0: it covers the start): the
    daemon's ring drops its oldest samples once full (series.json's first > 0)."""
    samples = (series or {}).get("samples") or []
    if not span or not samples or not series.get("first"):
        return 0
    return max(0, span_of(samples[0])[0] - span[0])


def active(samples):
    """The samples from the first to the last in which any link carried bytes ([] if none)."""
    busy = [k for k, s in enumerate(samples) if any(s["bytes"])]
    return samples[busy[0]:busy[-1] + 1] if busy else []


def link_usage(samples, rates):
    """Per link over the active samples: {"bytes", "peak_bps" (the busiest sample's payload
    rate), "mean_bps" (over the time sampled), and "peak" / "mean" as fractions of the link's
    rate (None for an unlimited link)}, and that time in ns: the sum of the active samples'
    lengths (the sampler is off only while no channel is open, when nothing moves)."""
    act = active(samples)
    secs = sum(s["dt_ns"] for s in act) / 1e9
    nl = len(act[0]["bytes"]) if act else 0
    out = []
    for i in range(nl):
        tot = sum(s["bytes"][i] for s in act)
        peak = max(act, key=lambda s: s["bytes"][i] / s["dt_ns"] if s["dt_ns"] > 0 else 0)
        pbps = peak["bytes"][i] * 8e9 / peak["dt_ns"] if peak["dt_ns"] > 0 else 0.0
        mbps = tot * 8 / secs if secs > 0 else 0.0
        rate = rates.get(i) or 0
        out.append({"id": i, "bytes": tot, "peak_bps": pbps,
                    "mean_bps": mbps, "peak": pbps / rate if rate else None,
                    "mean": mbps / rate if rate else None})
    return out, int(round(secs * 1e9))


def binned(samples, i, lo, hi, bins):
    """Link i's payload rate in bit/s in bins over [lo, hi) ns, each sample's bytes spread
    evenly over its interval. All 0 when [lo, hi) has no length: no time, no rate."""
    if hi <= lo:
        return [0.0] * bins
    w = (hi - lo) / float(bins)
    acc = [0.0] * bins
    for s in samples:
        a, b = span_of(s)
        v = s["bytes"][i]
        if not v or b <= lo or a >= hi:
            continue
        if b <= a:  # no length: all of it at its end
            acc[min(bins - 1, int((b - lo) / w))] += v
            continue
        for k in range(max(0, int((a - lo) / w)), min(bins, int((b - lo) / w) + 1)):
            ov = min(b, lo + (k + 1) * w) - max(a, lo + k * w)
            if ov > 0:
                acc[k] += v * ov / (b - a)
    return [x * 8e9 / w for x in acc]


def stairs(samples, i):
    """Link i's payload rate, sample by sample, as (edges ns, bit/s): what ax.stairs() draws.
    A gap between samples (the sampler was off: no channel open) is a step of 0."""
    edges, vals = [], []
    for s in samples:
        a, b = span_of(s)
        if edges and a > edges[-1]:
            vals.append(0.0)
            edges.append(a)
        elif edges:
            a = edges[-1]
        else:
            edges.append(a)
        vals.append(s["bytes"][i] * 8e9 / (b - a) if b > a else 0.0)
        edges.append(max(a, b))
    return edges, vals


def series_links(run):
    """(usage rows with each link's ends and rate, active time ns, the samples) from
    series.json within the job's span, or None without series.json."""
    if run.series is None:
        return None
    samples = series_samples(run.series, run.job_span)
    info = {l["id"]: l for l in (run.fabric or {}).get("links") or []}
    info.update({l["id"]: l for l in (run.stats or {}).get("links") or []})
    rates = {i: l.get("rate_bps") for i, l in info.items()}
    rows, ns = link_usage(samples, rates)
    for r in rows:
        l = info.get(r["id"], {})
        r.update({"from": l.get("from"), "to": l.get("to"), "rate_bps": l.get("rate_bps")})
    return rows, ns, samples


# ---- faults ------------------------------------------------------------------------------------

def fault_rows(run):
    """Each fault of faults.json with .spec (its schedule from fabric.json, or None for a live
    one) and .spans [(start_ns, end_ns)] of the windows begun, in fabric time."""
    fl = run.faults or {}
    now = fl.get("now_ns") or (run.job_span or (0, 0))[1]
    specs = {(f.get("id"), f.get("name")): f for f in (run.fabric or {}).get("faults") or []}
    out = []
    for f in fl.get("faults") or []:
        spec = specs.get((f["id"], f["name"]))
        spans = []
        origin, until = f.get("origin_ns", -1), f.get("until_ns", -1)
        end_all = until if until >= 0 else now
        if origin >= 0 and spec:
            per = spec.get("period_ns") or 0
            dur = spec.get("duration_ns")
            for i in range(f.get("windows", 0)):
                s = origin + spec.get("start_ns", 0) + i * per
                e = min(s + dur if dur is not None else end_all, end_all)
                spans.append((s, max(s, e)))
        elif origin >= 0 and f.get("windows", 0):
            spans.append((origin, max(origin, end_all)))
        out.append(dict(f, spec=spec, spans=spans))
    return out


def completions(run):
    """The harness's faults test: every message received, (fabric ns of its completion,
    bytes), in order; [] without per-message times or the fabric's epoch."""
    epoch = run.epoch_ns
    if run.kind != "harness" or epoch is None:
        return []
    out = []
    for t in run.doc.get("tests") or []:
        m = t.get("metrics") or {}
        if t.get("name") != "faults" or "recv_times" not in m:
            continue
        for post, done in m["recv_times"]:
            if done:
                out.append((int(round(done * 1e9)) - epoch, m.get("bytes", 0)))
    return sorted(out)


def throughput(points, lo, hi, bins=60):
    """Received bytes per second in bins over [lo, hi] ns: [(bin start ns, GB/s)]."""
    if not points or hi <= lo:
        return []
    w = (hi - lo) / float(bins)
    acc = [0] * bins
    for t, b in points:
        if lo <= t <= hi:
            acc[min(bins - 1, int((t - lo) / w))] += b
    return [(lo + i * w, a / (w * 1e-9) / 1e9) for i, a in enumerate(acc)]


# ---- text --------------------------------------------------------------------------------------

RAMP = " .:-=+*#%@"  # 0, then up to 1/9, 2/9, ... 9/9 of the link rate (or the busiest bin)


def sparkline(values, top):
    """One character per value: ' ' for 0, then RAMP's by value / top."""
    return "".join(" " if v <= 0 else RAMP[min(len(RAMP) - 1, 1 + int(v / top * (len(RAMP) - 1)
                                                                       * 0.999999))]
                   if top > 0 else " " for v in values)


def windows_line(spans, lo, hi, width):
    """'#' in every column [lo, hi) split into width that a window (a, b) overlaps, else ' '."""
    w = (hi - lo) / float(width)
    return "".join("#" if any(a < lo + (k + 1) * w and b > lo + k * w for a, b in spans)
                   else " " for k in range(width))


def text_fault_chart(run, rows, pts, width=CHART_WIDTH):
    """The faults chart in text: what moved, one column per 1/width of the time (the harness's
    received messages, from the first to the last; else series.json's faulted links over the
    job's span), and under it each fault's windows as '#'. [] without anything to draw."""
    span = run.job_span
    if pts:  # from the first message received to the last, and every window
        ends = [t for t, _ in pts] + [x for f in rows for ab in f["spans"] for x in ab]
        span = (min(ends), max(ends))
    if not span or span[1] <= span[0] or not rows:
        return []
    lo, hi = span
    if pts:
        vals, what = [g * 1e9 for _, g in throughput(pts, lo, hi, width)], "received"
    else:
        over = run.over_time
        links = fault_links(rows, over[0]) if over else []
        if not links:
            return []
        vals = [sum(x) / 8 for x in zip(*[binned(over[2], u["id"], lo, hi, width)
                                          for u in links])]
        what = "link%s %s" % ("s" if len(links) > 1 else "", ",".join(str(u["id"])
                                                                    for u in links))
    top = max(vals) if vals else 0
    lines = ["  from %s to %s ms, one column per %s ms: '%s' up to the peak, %s/s" % (
        _ms(lo), _ms(hi), "%.1f" % ((hi - lo) / 1e6 / width), RAMP.strip(), _gbytes(top))]
    lines.append("  %-10.10s |%s|" % (what, sparkline(vals, top)))
    for f in rows:
        lines.append("  %-10.10s |%s|" % ("#%d %s" % (f["id"], f["name"]),
                                          windows_line(f["spans"], lo, hi, width)))
    return lines


def _gbytes(bytes_per_s):
    return "%.3g GB" % (bytes_per_s / 1e9)


def _size(n):
    for u, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= u:
            return "%d %s" % (n // u, name) if n % u == 0 else "%.1f %s" % (n / u, name)
    return "%d B" % n


def _ms(ns):
    return "%.3f" % (ns / 1e6)


def _pct(u):
    if u is None:
        return "-"
    return "<0.01%" if 0 < u < 1e-4 else "%.2f%%" % (100 * u)


def _num(v, fmt):
    return fmt % v if v is not None else "-"


def text_model(run):
    rows, notes = model_rows(run)
    lines = ["measured vs model"] + ["  " + n for n in notes]
    if rows:
        lines.append("  %-20s %10s %12s %12s %11s %11s %7s %s" % (
            "COLLECTIVE", "BYTES", "TIME us", "MODEL us", "BUSBW GB/s", "MODEL GB/s", "RATIO",
            "ALGO"))
        for r in rows:
            lines.append("  %-20s %10s %12.2f %12s %11.3f %11s %7s %s" % (
                r["coll"], _size(r["bytes"]), r["time_us"], _num(r["model_time_us"], "%.2f"),
                r["busbw"], _num(r["model_busbw"], "%.3f"), _num(r["ratio"], "%.3f"),
                r["algo"] or "-"))
        if any(r["ratio"] is not None for r in rows):
            lines.append("  (ratio: measured busbw / the model's = model time / measured time; "
                         "above 1 beats the model)")
    return lines


def _us(ns):
    return "%.1f" % (ns / 1e3) if ns is not None else "-"


def _rate(bps):
    return "%g" % (bps / 1e9) if bps else "unlim."


def text_links(run):
    lines = ["per-link utilisation"]
    if run.stats is None:
        return lines + ["  no stats.json beside the results (`simfabric run` and `launch` "
                        "write it on a modelled fabric; the ideal one has no links)"]
    over = run.over_time
    secs = run.job_seconds
    shared = ("; the daemon was shared, so its counters include earlier jobs"
              if run.stats.get("shared_daemon") else "")
    if over is None:
        lines.append("  payload bytes / (link rate x %s job run time)%s; no series.json, so no "
                     "utilisation over time" % ("%.3f s" % secs if secs else "an unknown",
                                                shared))
    else:
        use, ns, samples = over
        act = active(samples)
        lines.append("  over time (series.json, a sample every %s ms): payload bytes x 8 / "
                     "(link rate x time)" % _ms(run.series.get("period_ns", 0)))
        lines.append("  PEAK: the busiest sample; MEAN: over the %s ms sampled %s" % (
            _ms(ns), "from %s to %s ms of fabric time (the first to the last sample with "
            "traffic)" % (_ms(span_of(act[0])[0]), _ms(act[-1]["t_ns"])) if act else
            "(no sample with traffic)"))
        if shared:
            lines.append("  (samples within the job's span only%s)" % shared)
        lost = dropped_before(run.series, run.job_span)
        if lost:
            lines.append("  WARNING: the daemon's ring kept only the newest %d samples: the "
                         "first %s ms of the job are not in series.json (raise --series-samples "
                         "or --sample-ms)" % (run.series.get("capacity", 0), _ms(lost)))
        use = {u["id"]: u for u in use}
    links = link_rows(run)
    if links:
        util = ("%7s %7s" % ("PEAK", "MEAN")) if over else "%7s" % "UTIL"
        lines.append("  %-4s %-28s %9s %9s %13s %s %6s %8s %6s %9s %9s %9s" % (
            "LINK", "FROM -> TO", "RATE Gb/s", "MSGS", "BYTES", util, "LOST", "TIMEOUTS",
            "FAILED", "Q P99<=us", "Q MAX us", "LATE us"))
        for l in links:
            if over:
                u = use.get(l["id"], {})
                util = "%7s %7s" % (_pct(u.get("peak")), _pct(u.get("mean")))
            else:
                util = "%7s" % _pct(l["util"])
            lines.append("  %-4d %-28s %9s %9d %13d %s %6d %8d %6d %9s %9s %9.1f" % (
                l["id"], "%s -> %s" % (l.get("from"), l.get("to")), _rate(l.get("rate_bps")),
                l["msgs"], l["bytes"], util, l.get("lost", 0), l.get("timeouts", 0),
                l.get("failed", 0), _us(l.get("queue_p99_le_ns")), _us(l.get("queue_max_ns")),
                l["late_us"]))
        lines.append("  (Q: how long a message entering the link waited behind earlier ones; "
                     "P99<= is the upper bound of the histogram bucket of the 99th percentile)")
    conns = run.stats.get("connections") or []
    lines += ["", "connections (per channel, as its receiver counted)"]
    if not conns:
        lines.append("  none recorded")
    for c in conns[:32]:
        lines.append("  %-10s %-28s %-7s %9s msgs %13s bytes" % (
            c.get("id"), "%s -> %s" % (c.get("src"), c.get("dst")), c.get("state"),
            c.get("msgs"), c.get("bytes")))
    if len(conns) > 32:
        lines.append("  ... and %d more (stats.json has them all)" % (len(conns) - 32))
    return lines


SLOW_PAIR_NS = 20000  # the fidelity monitor's bars: late by this much on average ...
SLOW_PAIR_MIN = 16  # ... over at least this many deliveries


def text_host_pairs(run):
    """Across hosts (stats.json's host_pairs): the deliveries at each host from each other one,
    and how late they were for the model's time; [] for a run on one host."""
    pairs = (run.stats or {}).get("host_pairs")
    if pairs is None:
        return []
    lines = ["", "between hosts (the deliveries at each host of connections from another, as "
                 "the receiver counted; late: after the model's time)"]
    if not pairs:
        return lines + ["  none recorded"]
    lines.append("  %-18s %10s %13s %12s" % ("FROM -> TO", "DELIVERIES", "LATE MEAN us",
                                              "LATE MAX us"))
    for p in sorted(pairs, key=lambda p: (p.get("from", 0), p.get("to", 0))):
        n = p.get("n") or 0
        mean = p.get("late_sum_ns", 0) / n if n else 0.0
        lines.append("  %-18s %10d %13.1f %12.1f%s" % (
            "host %s -> host %s" % (p.get("from"), p.get("to")), n, mean / 1e3,
            p.get("late_max_ns", 0) / 1e3,
            "  SLOW: the network between these hosts cannot carry the fabric at this speed"
            if n >= SLOW_PAIR_MIN and mean >= SLOW_PAIR_NS else ""))
    return lines


def _schedule(spec):
    if not spec:
        return "a live fault: its schedule is not in fabric.json"
    dur = spec.get("duration_ns")
    s = "start %s ms after its origin, windows of %s" % (
        _ms(spec.get("start_ns", 0)), "forever" if dur is None else "%s ms" % _ms(dur))
    if spec.get("period_ns"):
        s += " every %s ms, %s of them" % (_ms(spec["period_ns"]), spec.get("count") or
                                          "unbounded")
    if spec.get("probability", 1) < 1:
        s += ", each taken with probability %g (the spans below are the first ones)" % (
            spec["probability"])
    return s


def text_faults(run):
    lines = ["faults"]
    span = run.job_span
    if span:
        lines.append("  the job ran from %s to %s ms of fabric time" % (_ms(span[0]),
                                                                      _ms(span[1])))
    rows = fault_rows(run)
    if not rows:
        planned = (run.fabric or {}).get("faults") or []
        if run.faults is None and planned:  # a hand run (simfabric up + a job): no faults.json
            return lines + ["  %d in the fabric (%s), but no faults.json: what they hit was not "
                            "recorded (`simfabric run` of a scenario with a job: section writes "
                            "it; by hand: simfabric fault list --json > RUN_DIR/faults.json "
                            "before simfabric down)" % (len(planned), ", ".join(
                                "'%s'" % f.get("name") for f in planned))]
        return lines + ["  none (no faults.json: the fabric had no faults)" if run.faults is None
                        else "  none"]
    pts = completions(run)
    for f in rows:
        lines.append("  #%-3d %-20s %-10s %-8s %s" % (f["id"], f["name"], f["action"],
                                                     f["state"], f["scope"]))
        lines.append("       origin %s, %s" % ("%s ms" % _ms(f["origin_ns"])
                                               if f["origin_ns"] >= 0 else "never triggered",
                                               _schedule(f["spec"])))
        lines.append("       windows begun %d; messages hit %d, delayed %d (%s ms in all), "
                     "failed %d%s" % (f["windows"], f["hit"], f["delayed"], _ms(f["delay_ns"]),
                                      f["failed"], "; cleared at %s ms" % _ms(f["until_ns"])
                                      if f.get("until_ns", -1) >= 0 else ""))
        if f["spans"]:
            shown = ", ".join("%s-%s" % (_ms(a), _ms(b)) for a, b in f["spans"][:8])
            more = " and %d more" % (len(f["spans"]) - 8) if len(f["spans"]) > 8 else ""
            lines.append("       windows (ms): %s%s" % (shown, more))
        if pts and f["spans"]:
            inside = sum(1 for t, _ in pts if any(a <= t <= b for a, b in f["spans"]))
            lines.append("       %d of %d received message(s) completed inside its windows" % (
                inside, len(pts)))
    lines += text_fault_chart(run, rows, pts)
    if pts:
        gaps = [(b[0] - a[0], a[0]) for a, b in zip(pts, pts[1:])]
        g = max(gaps) if gaps else (0, pts[0][0])
        lines.append("  throughput: %d message(s) received from %s to %s ms; the longest pause "
                     "%s ms, from %s ms" % (len(pts), _ms(pts[0][0]), _ms(pts[-1][0]),
                                            _ms(g[0]), _ms(g[1])))
    return lines


def text_report(run):
    fb = run.fabric or {}
    head = "simfabric report: %s (fabric %s%s%s)" % (
        run.dir, fb.get("kind", "unknown"), " '%s'" % fb["name"] if fb.get("name") else "",
        ", job %.2f s" % run.job_seconds if run.job_seconds else "")
    return "\n".join([head, ""] + text_model(run) + [""] + text_links(run) +
                     text_host_pairs(run) + [""] + text_faults(run))


# ---- charts ------------------------------------------------------------------------------------

def pyplot():
    """matplotlib.pyplot on the Agg backend, or None where matplotlib does not import."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # ImportError, or a broken install
        return None
    return plt


def _empty(ax, msg):
    ax.text(0.5, 0.5, msg, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def chart_model(plt, run, path):
    rows, notes = model_rows(run)
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(12, 4.8))
    if not rows:
        _empty(lat, notes[-1] if notes else "no measurements")
        _empty(bw, "no measurements")
    series = {}
    for r in rows:
        series.setdefault(r["coll"], []).append(r)
    for i, (coll, rs) in enumerate(sorted(series.items())):
        rs.sort(key=lambda r: r["bytes"])
        c = "C%d" % (i % 10)
        x = [r["bytes"] for r in rs]
        lat.plot(x, [r["time_us"] for r in rs], "o-", color=c, label="%s measured" % coll)
        bw.plot(x, [r["busbw"] for r in rs], "o-", color=c, label="%s measured" % coll)
        m = [r for r in rs if r["model_time_us"] is not None]
        if m:
            lat.plot([r["bytes"] for r in m], [r["model_time_us"] for r in m], "x--", color=c,
                     label="%s model" % coll)
            mb = [r for r in m if r["model_busbw"] is not None]
            bw.plot([r["bytes"] for r in mb], [r["model_busbw"] for r in mb], "x--", color=c,
                    label="%s model" % coll)
    if rows:
        lat.set_xscale("log", base=2)
        lat.set_yscale("log")
        bw.set_xscale("log", base=2)
        lat.set(xlabel="message size (bytes)", ylabel="time (us)", title="latency")
        bw.set(xlabel="message size (bytes)", ylabel="busbw (GB/s)", title="bandwidth")
        for ax in (lat, bw):
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize="small")
    fig.suptitle("measured vs model: %s" % "; ".join(notes[1:] or notes), fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chart_links(plt, run, path):
    over = run.over_time
    if over is not None and active(over[2]):
        return chart_links_over_time(plt, run, path, *over)
    links = link_rows(run)
    fig, ax = plt.subplots(figsize=(10, max(3, 0.35 * len(links) + 1.5)))
    if not links:
        _empty(ax, "no per-link counters (stats.json)")
    else:
        labels = ["%d %s -> %s" % (l["id"], l.get("from"), l.get("to")) for l in links]
        vals = [100 * (l["util"] or 0) for l in links]
        ax.barh(range(len(links)), vals, color="C0")
        ax.set_yticks(range(len(links)))
        ax.set_yticklabels(labels, fontsize="small")
        ax.invert_yaxis()
        for i, l in enumerate(links):
            ax.text(vals[i], i, " %s" % _size(l["bytes"]), va="center", fontsize="x-small")
        ax.set_xlabel("utilisation (%% of the link rate over the job's %s)" % (
            "%.2f s" % run.job_seconds if run.job_seconds else "run time"))
        ax.set_xlim(0, max(vals + [1]) * 1.25)
        ax.grid(True, axis="x", alpha=0.3)
    ax.set_title("per-link utilisation: payload bytes / (rate x run time)%s" % (
        "" if over is None else "; series.json has no traffic"))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


BUSIEST = 8  # links drawn as lines; the heat map has them all


def _label(u):
    return "%d %s -> %s" % (u["id"], u.get("from"), u.get("to"))


def chart_links_over_time(plt, run, path, use, ns, samples):
    """Utilisation % against fabric time: the busiest links as lines, sample by sample, and
    every link that carried traffic as a heat map."""
    act = active(samples)
    lo, hi = span_of(act[0])[0], act[-1]["t_ns"]
    busy = sorted((u for u in use if u["bytes"] and u["rate_bps"]), key=lambda u: -u["bytes"])
    shown = busy[:BUSIEST]
    fig, (ax, hm) = plt.subplots(2, 1, figsize=(12, 4 + max(2.5, 0.22 * len(busy))),
                                 gridspec_kw={"height_ratios": [3, max(2, 0.2 * len(busy))]},
                                 constrained_layout=True)  # the colour bar: beside both
    for k, u in enumerate(shown):
        edges, bps = stairs(act, u["id"])
        ax.stairs([100.0 * b / u["rate_bps"] for b in bps], [e / 1e6 for e in edges],
                  color="C%d" % (k % 10), label="%s (peak %s, mean %s)" % (
                      _label(u), _pct(u["peak"]), _pct(u["mean"])))
    if shown:
        ax.legend(fontsize="x-small", loc="upper right")
    else:
        _empty(ax, "only unlimited links carried traffic")
    ax.set(xlim=(lo / 1e6, hi / 1e6), ylabel="utilisation (% of the link rate)",
           title="per-link utilisation over fabric time (series.json, a sample every %s ms; "
           "the %d busiest of %d rate-limited link(s) with traffic)" % (
               _ms(run.series.get("period_ns", 0)), len(shown), len(busy)))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    bins = 200
    grid = [[100.0 * b / u["rate_bps"] for b in binned(act, u["id"], lo, hi, bins)]
            for u in busy] or [[0.0] * bins]
    im = hm.imshow(grid, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0,
                   extent=(lo / 1e6, hi / 1e6, len(busy) - 0.5, -0.5))
    hm.set_yticks(range(len(busy)))
    hm.set_yticklabels([_label(u) for u in busy], fontsize="x-small")
    hm.set_xlabel("fabric time (ms since the daemon started)")
    fig.colorbar(im, ax=[ax, hm], label="utilisation %", pad=0.01, shrink=0.5,
                 anchor=(0, 0))
    fig.savefig(path)
    plt.close(fig)


def fault_links(rows, use):
    """The links to draw under the fault windows: those the faults act on (their schedule in
    fabric.json names them) that carried traffic, else the busiest; at most BUSIEST."""
    by = {u["id"]: u for u in use if u["bytes"]}
    named = [i for f in rows for i in (f["spec"] or {}).get("links") or []]
    links = [by[i] for i in dict.fromkeys(named) if i in by]
    return (links or sorted(by.values(), key=lambda u: -u["bytes"]))[:BUSIEST]


def _throughput_panel(ax, rows, use, samples):
    """Per-link throughput from series.json, sample by sample, with the fault windows over it."""
    links = fault_links(rows, use)
    for k, u in enumerate(links):
        edges, bps = stairs(samples, u["id"])
        ax.stairs([b / 1e9 for b in bps], [e / 1e6 for e in edges], color="C%d" % (k % 10),
                  label=_label(u))
    for k, f in enumerate(rows):
        for j, (a, b) in enumerate(f["spans"]):
            ax.axvspan(a / 1e6, b / 1e6, color="C3", alpha=0.15 + 0.1 * (k % 3),
                       label="#%d %s" % (f["id"], f["name"]) if j == 0 else None)
    ax.set_ylabel("payload Gb/s per link")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if links or rows:
        ax.legend(fontsize="x-small", loc="upper right")
    ax.set_title("fault windows over per-link throughput (series.json)")


def chart_faults(plt, run, path):
    rows = fault_rows(run)
    span = run.job_span
    pts = completions(run)
    over = run.over_time
    act = active(over[2]) if over else []
    h = max(3, 0.5 * len(rows) + 2)
    if act:
        fig, (top, ax) = plt.subplots(2, 1, sharex=True, figsize=(12, h + 4),
                                      gridspec_kw={"height_ratios": [4, h]})
    else:
        fig, ax = plt.subplots(figsize=(12, h))
    ends = [b for f in rows for _, b in f["spans"]] + [t for t, _ in pts]
    starts = [a for f in rows for a, _ in f["spans"]] + [t for t, _ in pts]
    if span:
        starts.append(span[0])
        ends.append(span[1])
    if act:
        starts.append(span_of(act[0])[0])
        ends.append(act[-1]["t_ns"])
        _throughput_panel(top, rows, over[0], act)
    if not starts:
        _empty(ax, "no faults, and no job span in fabric time")
    else:
        lo, hi = min(starts), max(ends)
        pad = max(1, (hi - lo)) * 0.03
        for i, f in enumerate(rows):
            bars = [(a / 1e6, max((b - a) / 1e6, (hi - lo) / 1e6 * 0.002)) for a, b in f["spans"]]
            ax.broken_barh(bars, (i - 0.35, 0.7), color="C3", alpha=0.7)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(["#%d %s (%s)" % (f["id"], f["name"], f["action"]) for f in rows],
                           fontsize="small")
        ax.set_ylim(-0.8, max(len(rows), 1) - 0.2)
        if span:
            for x, what in ((span[0], "job start"), (span[1], "job end")):
                ax.axvline(x / 1e6, color="k", ls=":", lw=1)
                ax.text(x / 1e6, ax.get_ylim()[1], " " + what, va="top", fontsize="x-small")
        ax.set_xlim((lo - pad) / 1e6, (hi + pad) / 1e6)
        ax.set_xlabel("fabric time (ms since the daemon started)")
        if not rows:
            ax.text(0.5, 0.5, "no faults", ha="center", transform=ax.transAxes)
        tp = throughput(pts, lo, hi)
        if tp:
            ax2 = ax.twinx()
            ax2.step([t / 1e6 for t, _ in tp], [g for _, g in tp], where="post", color="C0")
            ax2.set_ylabel("received (GB/s)", color="C0")
            ax2.set_ylim(bottom=0)
    ax.set_title("fault windows%s" % (" over the harness's per-message throughput" if pts
                                      else " and the job's span"))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_charts(run, out, fmt, plt):
    """The three charts into out as model.<fmt>, links.<fmt>, faults.<fmt>; their paths."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for name, fn in (("model", chart_model), ("links", chart_links), ("faults", chart_faults)):
        p = os.path.join(out, "%s.%s" % (name, fmt))
        fn(plt, run, p)
        paths.append(p)
    return paths


# ---- the command -------------------------------------------------------------------------------

def report(results, out=None, fmt=None, fabric=None, stdout=None):
    """What `simfabric report` does: the text summary on stdout, and the charts when fmt is png
    or svg (None: png where matplotlib imports). Returns the chart paths. ReportError."""
    stdout = stdout or sys.stdout
    run = Run(results, fabric)
    plt = None
    if fmt != "text":
        plt = pyplot()
        if plt is None and fmt is not None:
            raise ReportError("--format %s needs matplotlib, which does not import here (Debian: "
                              "apt-get install python3-matplotlib); --format text prints the "
                              "summary" % fmt, EXIT_CANNOT)
    stdout.write(text_report(run) + "\n")
    if plt is None:
        if fmt is None:
            stdout.write("\n(matplotlib does not import here: the text summary only)\n")
        return []
    paths = write_charts(run, out or run.dir, fmt or "png", plt)
    stdout.write("\ncharts: %s\n" % ", ".join(paths))
    return paths


def args_report(sp):
    sp.add_argument("results", metavar="RESULTS",
                    help="a run directory, or a results JSON file (NCCL job program, harness, "
                         "bench)")
    sp.add_argument("--out", metavar="DIR", help="where the charts go (default: the run "
                                                  "directory, or the results file's)")
    sp.add_argument("--format", choices=["png", "svg", "text"],
                    help="charts as png or svg, or text only (default: png when matplotlib "
                         "imports, else text)")
    sp.add_argument("--fabric", metavar="FILE",
                    help="the fabric to model: a fabric dump (fabric.json) or a scenario file "
                         "(default: fabric.json beside the results)")


def cmd_report(a):
    try:
        report(a.results, a.out, a.format, a.fabric)
    except ReportError as e:
        print("simfabric report: %s" % e, file=sys.stderr)
        return e.status
    return EXIT_OK


class Command:
    """One subcommand, as tools/simfabric's COMMANDS entries: name, help, args, run."""

    def __init__(self, name, help_, args, run):
        self.name, self.help, self.args, self.run = name, help_, args, run


CLI = [Command("report", "a run's measured vs model, per-link utilisation and faults: charts "
               "or text", args_report, cmd_report)]
