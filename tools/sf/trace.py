# SPDX-License-Identifier: MIT
"""sftrace - the plugin's message traces (SIMFABRIC_TRACE=FILE): merge them, summarise them.

  simfabric trace merge OUT.json IN... [--quiet]
  simfabric trace summary TRACE...

Each process of a job writes its own trace (SIMFABRIC_TRACE=trace-%n-%p.json: %n the node, %p
the pid), Chrome trace / Perfetto JSON on CLOCK_MONOTONIC. `merge` puts any number of them (files,
or directories whose *.json are traces) into one file sorted by time, so that every node's
messages, and the flows from each send to its receive, are on one timeline (open it at
https://ui.perfetto.dev or chrome://tracing). `summary` prints per connection what its messages
did: how many, bytes, failures, and the post-to-completion times.

Standard library only.
"""
import glob
import json
import os
import sys

EXIT_OK, EXIT_USAGE = 0, 2


class TraceError(Exception):
    pass


def load(path):
    """One trace file: its document, checked to be a simfabric (or any Chrome JSON) trace."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise TraceError("%s: %s" % (path, e.strerror))
    except ValueError as e:
        raise TraceError("%s is not JSON: %s" % (path, e))
    if isinstance(doc, list):  # the JSON array form of the format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError("%s has no traceEvents: not a Chrome trace" % path)
    return doc


def is_trace(path):
    """Does the file start like a trace the plugin (or merge) wrote?"""
    try:
        with open(path) as f:
            head = f.read(256)
    except OSError:
        return False
    return '"simfabric_trace"' in head


def expand(inputs, out=None):
    """Files as given; a directory gives its *.json that are traces (not OUT itself)."""
    files = []
    for p in inputs:
        if os.path.isdir(p):
            found = sorted(glob.glob(os.path.join(p, "*.json")))
            files += [f for f in found if is_trace(f) and not (
                out and os.path.realpath(f) == os.path.realpath(out))]
        else:
            files.append(p)
    if not files:
        raise TraceError("no trace files in %s" % " ".join(inputs))
    return files


def _ts(e):
    return e.get("ts", 0.0)


def merge_docs(docs):
    """Merge loaded traces: metadata events first, then every event by time (stable).

    Two files whose processes share a pid but not a node (pid reuse across runs) get the later
    one's pid moved out of the way; the same pid and node is one process (a reloaded plugin
    writes FILE.1, whose tracks are already distinct)."""
    owner = {}  # pid -> node of the first file that used it
    used = set()
    meta, rest, infos = [], [], []
    seen_meta = set()
    for name, doc in docs:
        md = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        node = md.get("node")
        pids = {e.get("pid") for e in doc["traceEvents"] if "pid" in e}
        remap = {}
        for pid in sorted(p for p in pids if isinstance(p, int)):
            if pid in owner and owner[pid] != node:
                new = max(used | {pid}) + 1
                remap[pid] = new
                owner[new] = node
                used.add(new)
            else:
                owner.setdefault(pid, node)
                used.add(pid)
        for e in doc["traceEvents"]:
            if e.get("pid") in remap:
                e = dict(e, pid=remap[e["pid"]])
            if e.get("ph") == "M":
                key = json.dumps(e, sort_keys=True)
                if key not in seen_meta:
                    seen_meta.add(key)
                    meta.append(e)
            else:
                rest.append(e)
        info = dict(md, source=name)
        if remap:
            info["pid_remapped"] = {str(k): v for k, v in remap.items()}
        infos.append(info)
    rest.sort(key=_ts)
    total = {"simfabric_trace": 1, "merged": infos,
             "messages": sum(i.get("messages", 0) for i in infos),
             "dropped": sum(i.get("dropped", 0) for i in infos),
             "dropped_messages": sum(i.get("dropped_messages", 0) for i in infos)}
    return {"metadata": total, "displayTimeUnit": "ns", "traceEvents": meta + rest}


def write(doc, out):
    """One event per line; written to a temporary and renamed, so OUT is always whole."""
    tmp = "%s.tmp.%d" % (out, os.getpid())
    with open(tmp, "w") as f:
        f.write('{"metadata":%s,\n"displayTimeUnit":"ns",\n"traceEvents":[\n'
                % json.dumps(doc["metadata"], separators=(",", ":")))
        ev = doc["traceEvents"]
        for i, e in enumerate(ev):
            f.write(json.dumps(e, separators=(",", ":")))
            f.write(",\n" if i + 1 < len(ev) else "\n")
        f.write("]}\n")
    os.replace(tmp, out)


def merge(out, inputs):
    files = expand(inputs, out)
    doc = merge_docs([(p, load(p)) for p in files])
    write(doc, out)
    return doc, files


# ---- summary -------------------------------------------------------------------------------------

def _pct(xs, q):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def summary(doc):
    """Per connection (process, first track's name): messages, bytes, failures, latencies."""
    names = {}
    procs = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
    conns = {}
    faults = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "msg":
            a = e.get("args", {})
            key = (procs.get(e["pid"], str(e["pid"])), a.get("chan"), e["name"].split()[0])
            c = conns.setdefault(key, {"msgs": 0, "bytes": 0, "failed": 0, "unfinished": 0,
                                       "lat": [], "peer": a.get("peer", "?")})
            c["msgs"] += 1
            c["bytes"] += a.get("bytes", 0)
            st = a.get("status")
            if st == "failed":
                c["failed"] += 1
            elif st == "unfinished":
                c["unfinished"] += 1
            else:
                c["lat"].append(e.get("dur", 0.0))
        if e.get("ph") == "i" and e.get("cat") == "fault" and e.get("tid", 0) >= 1000:
            faults.append(e)
    lines = ["%-10s %-5s %-6s %-18s %7s %12s %6s %6s %10s %10s" % (
        "NODE", "CHAN", "DIR", "PEER", "MSGS", "BYTES", "FAILED", "UNFIN", "p50 us", "p99 us")]
    for (node, chan, d), c in sorted(conns.items(), key=lambda kv: (kv[0][0], str(kv[0][1]),
                                                                     kv[0][2])):
        lines.append("%-10s %-5s %-6s %-18s %7d %12d %6d %6d %10.1f %10.1f" % (
            node, chan, d, c["peer"], c["msgs"], c["bytes"], c["failed"], c["unfinished"],
            _pct(c["lat"], 0.5), _pct(c["lat"], 0.99)))
    md = doc.get("metadata", {})
    if md.get("dropped"):
        lines.append("dropped: %d event(s) past SIMFABRIC_TRACE_MAX" % md["dropped"])
    for f in faults:
        a = f.get("args", {})
        where = a.get("conn") or "chan %s message #%s" % (a.get("chan"), a.get("msg"))
        lines.append("%.3f us  %s  %s: %s" % (f["ts"], procs.get(f["pid"], f["pid"]), f["name"],
                                              where))
    return "\n".join(lines)


# ---- the CLI (tools/simfabric's MODULES) ------------------------------------------------------

def args_trace(sp):
    sub = sp.add_subparsers(dest="verb", required=True)
    m = sub.add_parser("merge", help="merge per-process traces into one, sorted by time")
    m.add_argument("out", metavar="OUT.json")
    m.add_argument("inputs", metavar="IN", nargs="+",
                   help="trace files, or directories of them (*.json)")
    m.add_argument("--quiet", action="store_true")
    s = sub.add_parser("summary", help="per connection: messages, bytes, failures, latencies")
    s.add_argument("inputs", metavar="TRACE", nargs="+", help="trace files or directories")


def cmd_trace(a):
    try:
        if a.verb == "merge":
            doc, files = merge(a.out, a.inputs)
            if not a.quiet:
                md = doc["metadata"]
                print("simfabric trace: %d file(s), %d message(s), %d event(s) -> %s%s" % (
                    len(files), md["messages"], len(doc["traceEvents"]), a.out,
                    " (%d event(s) were dropped past SIMFABRIC_TRACE_MAX)" % md["dropped"]
                    if md["dropped"] else ""))
            return EXIT_OK
        files = expand(a.inputs)
        doc = merge_docs([(p, load(p)) for p in files]) if len(files) > 1 else load(files[0])
        print(summary(doc))
        return EXIT_OK
    except TraceError as e:
        print("simfabric trace: %s" % e, file=sys.stderr)
        return EXIT_USAGE


class Command:
    """One subcommand, as tools/simfabric's COMMANDS entries: name, help, args, run."""

    def __init__(self, name, help_, args, run):
        self.name, self.help, self.args, self.run = name, help_, args, run


CLI = [Command("trace", "message traces (SIMFABRIC_TRACE): merge per-process files, summarise",
               args_trace, cmd_trace)]


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(prog="sftrace", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    args_trace(p)
    sys.exit(cmd_trace(p.parse_args()))
