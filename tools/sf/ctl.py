# SPDX-License-Identifier: MIT
"""sfctl - a small client for simfabricd's text control protocol (docs/control-protocol.md).

Used by the `simfabric` CLI and by the pytest driver. Standard library only.
"""
import json
import os
import pwd
import socket
import stat
import struct
import time

__all__ = ["CtlError", "default_socket", "request", "show", "fabric", "stats", "link_records",
           "series", "merge_series", "run_series", "wait_ready", "format_status", "format_fabric",
           "nic_counters", "format_nics"]


class CtlError(Exception):
    """A request failed: errno and the daemon's reason, or no daemon at all. reason: the
    message without the op and the errno, for a user (the whole message is for logs)."""

    def __init__(self, msg, errno=None, reason=None):
        super().__init__(msg)
        self.errno = errno
        self.reason = reason or msg


def version():
    """simfabric's one version: sim/core/version.h next to this tools/ (a checkout; the C
    programs compile it in), else what `make install` wrote into sfinstall.py."""
    import re
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # tools/, sf/'s parent
    try:
        with open(os.path.join(os.path.dirname(here), "sim", "core", "version.h")) as f:
            m = re.search(r'#define SF_VERSION "([^"]+)"', f.read())
        return m.group(1) if m else "unknown"
    except OSError:
        pass
    try:
        import sfinstall
        return sfinstall.VERSION
    except ImportError:
        return "unknown (sim/core/version.h not found next to tools/)"


def default_socket():
    """The socket path the plugin and the daemon use by default (sim/core/ctl.c ctl_default_socket):
    $SIMFABRIC_SOCKET, else $XDG_RUNTIME_DIR/simfabric/ctl.sock, else ~/.simfabric/ctl.sock of
    the effective uid, where no other user can create the directory first (unlike /tmp)."""
    if os.environ.get("SIMFABRIC_SOCKET"):
        return os.environ["SIMFABRIC_SOCKET"]
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return os.path.join(run, "simfabric", "ctl.sock")
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        home = os.environ.get("HOME", "")
    if not home.startswith("/"):
        raise CtlError("cannot work out the default socket path: uid %d has no home directory "
                       "(set SIMFABRIC_SOCKET)" % os.geteuid())
    return os.path.join(home.rstrip("/") or "/", ".simfabric", "ctl.sock")


def check_dir(path):
    """The socket's directory must be one only we control (sim/core/ctl.c ctl_check_dir): a real
    directory (lstat: not a symlink), owned by our euid, no group/other access."""
    d = os.path.dirname(path) or "."
    try:
        st = os.lstat(d)
    except OSError as e:
        return "socket directory %s: %s" % (d, e.strerror)
    if stat.S_ISLNK(st.st_mode):
        return ("socket directory %s is a symbolic link; it must be a real directory (whoever "
                "can change the link can move the socket)" % d)
    if not stat.S_ISDIR(st.st_mode):
        return "socket directory %s is not a directory" % d
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return ("socket directory %s is owned by uid %d with mode %04o; it must be owned by uid "
                "%d with no group/other access (chmod 700 %s)"
                % (d, st.st_uid, stat.S_IMODE(st.st_mode), os.geteuid(), d))
    return None


def check_peer(sock):
    """The server of a connected Unix socket runs as our euid (SO_PEERCRED), or an error text."""
    pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))
    if uid != os.geteuid():
        return ("the socket is served by uid %d (pid %d), not by this process's uid %d; refusing "
                "it: another user's daemon could read and change every message"
                % (uid, pid, os.geteuid()))
    return None


def _read_message(sock, deadline):
    buf = b""
    while b"\n\n" not in buf and not buf.startswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise CtlError("timed out waiting for the daemon's reply")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            raise CtlError("the daemon closed the connection before replying")
        buf += chunk
    text = buf.split(b"\n\n", 1)[0].decode("ascii", "replace")
    pairs = []
    for line in text.split("\n"):
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise CtlError("malformed reply line %r" % line)
        pairs.append((key, value))
    return pairs


def request(path, op, timeout=5.0, **keys):
    """Send op with keys, return the reply as a list of (key, value); raise CtlError on errno!=0."""
    lines = ["op=%s" % op] + ["%s=%s" % (k, v) for k, v in keys.items()]
    for k, v in [("op", op)] + list(keys.items()):
        bad = [c for c in str(v) if not " " <= c <= "~"]
        if bad:
            why = "%s has %r, which the control protocol cannot carry (printable ASCII only)" % (
                k, bad[0])
            raise CtlError("%s: %s" % (op, why), 22, why)  # EINVAL
    why = check_dir(path)
    if why and os.path.lexists(os.path.dirname(path) or "."):
        raise CtlError("refusing the socket %s: %s" % (path, why))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        try:
            s.connect(path)
        except OSError as e:
            raise CtlError("no simfabric daemon at %s (%s); start one with: simfabric up "
                           "--socket %s" % (path, e.strerror, path))
        why = check_peer(s)
        if why:
            raise CtlError("refusing the socket %s: %s" % (path, why), 1)
        s.sendall(("\n".join(lines) + "\n\n").encode("ascii"))
        pairs = _read_message(s, time.monotonic() + timeout)
    finally:
        s.close()
    d = dict(pairs)
    err = int(d.get("errno", "-1"))
    if err != 0:
        why = d.get("error", "no reason given")
        raise CtlError("%s: %s (errno %d)" % (op, why, err), err, why)
    return pairs


def wait_ready(path, timeout=10.0, proc=None):
    """Poll with op=ping until the daemon answers; fail early if proc exits. With proc, the
    answer must come from proc itself (ping says its pid): another daemon already serving
    the path is not the one just started."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise CtlError("simfabricd exited with status %d before it was ready" % proc.returncode)
        try:
            d = dict(request(path, "ping", timeout=1.0))
            if proc is None or int(d.get("pid", "0")) == proc.pid:
                return
            last = CtlError("%s answers at %s, not the daemon just started (pid %d)"
                            % (describe_ping(d), path, proc.pid))
        except CtlError as e:
            last = e
        time.sleep(0.02)
    raise CtlError("simfabricd at %s not ready after %.1f s: %s" % (path, timeout, last))


def describe_ping(d):
    """A daemon as its ping reply names it: 'simfabricd pid N (scenario S)'."""
    return "simfabricd pid %s (%s)" % (d.get("pid", "?"), "scenario " + d["scenario"]
                                        if d.get("scenario") else "the ideal fabric")


def running(path, timeout=1.0):
    """The ping reply of a daemon serving path as a dict, or None when none answers."""
    try:
        return dict(request(path, "ping", timeout=timeout))
    except CtlError:
        return None


def _num(v):
    try:
        return int(v, 0)
    except ValueError:
        return v


def _pages(path, op, timeout):
    """Every page of a paged op (next=<n> says where the next one starts): [(key, value)]
    with the header of the first page and the records of all."""
    pairs, skip = [], None
    for _ in range(1000000):
        page = request(path, op, timeout=timeout, **({"skip": skip} if skip is not None else {}))
        nxt = [v for k, v in page if k == "next"]
        pairs += [(k, v) for k, v in page if k != "next" and (skip is None or "." in k)]
        if not nxt:
            return pairs
        skip = nxt[0]
    raise CtlError("op=%s: more than a million pages" % op)


def show(path, timeout=5.0):
    """The live fabric as a dict: fabric, instance, nodes[], nics[], chans[], listeners."""
    pairs = _pages(path, "show", timeout)
    out = {"nodes": {}, "nics": {}, "chans": {}}
    for key, value in pairs:
        parts = key.split(".")
        if parts[0] == "node" and len(parts) == 3:
            out["nodes"].setdefault(parts[1], {})[parts[2]] = _num(value)
        elif parts[0] == "nic" and len(parts) == 4:
            out["nics"].setdefault(parts[1] + "." + parts[2], {})[parts[3]] = _num(value)
        elif parts[0] == "chan" and len(parts) == 3:
            out["chans"].setdefault(parts[1], {})[parts[2]] = _num(value)
        elif key in ("nodes", "nics", "chans"):
            out["n_" + key] = _num(value)  # counts; the lists take the plain names
        elif key != "errno":
            out[key] = _num(value)
    out["nodes"] = [dict(v, index=k) for k, v in out["nodes"].items()]
    out["nics"] = [dict(v, index=k) for k, v in out["nics"].items()]
    out["chans"] = [dict(v, id=k) for k, v in out["chans"].items()]
    return out


def fabric(path, timeout=5.0):
    """The resolved fabric (op=fabric) as parsed JSON: every parameter after defaults, per
    node, NIC, switch, directed link and NIC-to-NIC path. See docs/control-protocol.md."""
    pairs = _pages(path, "fabric", timeout)
    total = int(dict(pairs)["bytes"])
    chunks = {int(k[5:]): v for k, v in pairs if k.startswith("json.")}
    text = "".join(chunks[i] for i in sorted(chunks))
    if len(text) != total or sorted(chunks) != list(range(len(chunks))):
        raise CtlError("op=fabric: got %d of %d bytes in chunks %s" % (len(text), total,
                                                                      sorted(chunks)[:10]))
    return json.loads(text)


def format_fabric(fb):
    """A human-readable summary of fabric()'s result."""
    c = fb["counts"]
    lines = ["fabric %s%s: %d node(s), %d NIC(s), %d switch(es), %d directed link(s), seed %d" % (
        fb["kind"], " '%s' from %s" % (fb["name"], fb["scenario"]) if fb.get("scenario") else "",
        c["nodes"], c["nics"], c["switches"], c["links"], fb["seed"])]
    if fb.get("description"):
        lines.append("  " + fb["description"])
    if fb["nodes"]:
        lines += ["", "%-20s %-24s %10s %12s %s" % ("NODE", "NIC", "SPEED", "LATENCY", "GUID")]
        for n in fb["nodes"]:
            for nic in n["nics"]:
                lines.append("%-20s %-24s %7.1f Gb %9d ns %s" % (
                    n["name"], nic["name"], nic["speed_mbps"] / 1000.0, nic["latency_ns"],
                    nic["guid"]))
    if fb["switches"]:
        lines += ["", "%-20s %9s %12s %12s %s" % ("SWITCH", "PORTS", "TO NICS", "TO SWITCHES",
                                                  "OVERSUBSCRIPTION")]
        for s in fb["switches"]:
            o = s.get("oversubscription")
            lines.append("%-20s %4d/%-4d %9s Gb %9s Gb %s" % (
                s["name"], s["ports_used"], s["params"]["ports"], s["nic_gbps"], s["switch_gbps"],
                "%g:1" % o if o else "-"))
    if fb["links"]:
        lines += ["", "%-5s %-16s %-16s %10s %9s  %s" % ("LINK", "FROM", "TO", "RATE", "HOP",
                                                         "IMPAIRMENTS")]
        for l in fb["links"]:
            p = l["params"]
            imp = []
            if p.get("jitter", {}).get("dist", "none") != "none":
                imp.append("jitter " + json.dumps(p["jitter"], separators=(",", ":")))
            if p.get("loss", {}).get("model", "none") != "none":
                imp.append("loss " + json.dumps(p["loss"], separators=(",", ":")))
            for k in ("reorder", "duplicate", "corrupt"):
                if p.get(k):
                    imp.append("%s %s" % (k, p[k]))
            rate = "%s Gb" % p["rate_gbps"] if p["rate_gbps"] else "unlimited"
            lines.append("%-5d %-16s %-16s %10s %6d ns  %s" % (
                l["id"], l["from"], l["to"], rate, l["hop_latency_ns"], ", ".join(imp)))
    if fb.get("paths"):
        lines += ["", "%-16s %-16s %10s  %s" % ("PATH FROM", "TO", "LATENCY", "LINKS")]
        for p in fb["paths"]:
            lines.append("%-16s %-16s %7d ns  %s" % (p["src"], p["dst"], p["latency_ns"],
                                                    " ".join(str(x) for x in p["links"])))
    elif fb.get("path_pairs"):
        lines += ["", "(%d NIC pairs: paths not listed)" % fb["path_pairs"]]
    return "\n".join(lines)


def _hist(text, n):
    """"B:COUNT/B:COUNT" (the non-empty buckets) -> a list of n counts."""
    out = [0] * n
    for part in filter(None, text.split("/")):
        b, _, c = part.partition(":")
        out[int(b)] = int(c)
    return out


def link_records(stats, links):
    """stats()'s {id: counters} as a list by id, each record with its link's "id", "from",
    "to" and "rate_bps" from the fabric dump's links (None where the dump has no such link)."""
    names = {l["id"]: l for l in links or []}
    return [dict({"id": i, "from": names.get(i, {}).get("from"),
                  "to": names.get(i, {}).get("to"),
                  "rate_bps": names.get(i, {}).get("rate_bps")}, **c)
            for i, c in sorted(stats.items())]


def stats(path, timeout=5.0):
    """Per directed link: counters, the queueing delay and the fidelity monitor, as
    {link id: {key: int, "queue_hist": [counts], "late_hist": [counts]}} (op=stats; a
    histogram's bucket 0 counts 0 ns, bucket b [2^(b-1), 2^b) ns)."""
    pairs = _pages(path, "stats", timeout)
    head = dict(pairs)
    nb = {"queue_hist": int(head.get("queue_buckets", 0)),
          "late_hist": int(head.get("late_buckets", 0))}
    out = {}
    for k, v in pairs:
        parts = k.split(".")
        if parts[0] != "link":
            continue
        rec = out.setdefault(int(parts[1]), {})
        if len(parts) == 2:
            rec.update({a: int(b) for a, b in (kv.split("=") for kv in v.split(","))})
        elif parts[2] in nb:
            rec[parts[2]] = _hist(v, nb[parts[2]])
    return out


def host_pairs(path, timeout=5.0):
    """The deliveries at this daemon's host from each other host of a run (op=stats'
    from_host.<h>: the receiving end of connections between hosts counts them):
    {sending host: {"n", "late_sum_ns", "late_max_ns"}}; {} on one host alone."""
    out = {}
    for k, v in _pages(path, "stats", timeout):
        parts = k.split(".")
        if parts[0] == "from_host" and len(parts) == 2:
            out[int(parts[1])] = {a: int(b) for a, b in (kv.split("=") for kv in v.split(","))}
    return out


def hist_le(h, n, pct, mx):
    """fst_hist_le (sim/core/fstate.h): the pct-th percentile of the n values counted in
    histogram h, as the top of its bucket; the last bucket's bound is mx where that is higher."""
    seen = 0
    for b, c in enumerate(h):
        seen += c
        if n and seen * 100 >= n * pct:
            top = 1 << b if b else 0
            return mx if b == len(h) - 1 and mx > top else top
    return 0


# op=stats' per-link keys that are not counts: maxima, and percentiles of the histograms
_STATS_MAX = ("queue_max_ns", "late_max_ns")
_STATS_DERIVED = ("queue_p50_le_ns", "queue_p99_le_ns", "late_p50_le_ns", "late_p99_le_ns")


def stats_misfit(base, other):
    """Why other (stats()'s form, another host's) cannot be merged into base by merge_stats,
    or None: a link's key that is a histogram in one and a count in the other, or histograms
    of different lengths (summed they would lose buckets)."""
    for i, rec in other.items():
        for k, v in rec.items():
            b = base.get(i, {}).get(k)
            if b is None or k in _STATS_DERIVED:
                continue
            if isinstance(b, list) != isinstance(v, list):
                return "link %s: '%s' is a %s there, a %s here" % (
                    i, k, "histogram" if isinstance(v, list) else "count",
                    "histogram" if isinstance(b, list) else "count")
            if isinstance(b, list) and len(b) != len(v):
                return "link %s: '%s' has %d buckets there, %d here" % (i, k, len(v), len(b))
    return None


def merge_stats(many):
    """One fabric's stats (stats()'s form) from the daemons of a run's hosts: each host counts
    what it reserved (docs/scale-out.md, section 4), so a link's counts and histograms are the
    hosts' sums, its maxima the largest, and its percentiles recomputed from the summed
    histograms as the daemon computes them."""
    out = {}
    for st in many:
        for i, rec in (st or {}).items():
            m = out.setdefault(i, {})
            for k, v in rec.items():
                if k in _STATS_DERIVED:
                    continue
                if isinstance(v, list):
                    m[k] = [a + b for a, b in zip(m[k], v)] if k in m else list(v)
                elif k in _STATS_MAX:
                    m[k] = max(m.get(k, 0), v)
                else:
                    m[k] = m.get(k, 0) + v
    for m in out.values():
        for kind in ("queue", "late"):
            h = m.get(kind + "_hist")
            if h is None:
                continue
            for pct in (50, 99):
                m["%s_p%d_le_ns" % (kind, pct)] = hist_le(h, sum(h), pct,
                                                           m.get(kind + "_max_ns", 0))
    return out


SERIES_SPAN_BINS = 1000  # a sample longer than this many periods (a stalled loop) is not split


def merge_series(many):
    """One fabric's series (series()'s form) from the daemons of a run's hosts, each of which
    samples what it reserved (docs/scale-out.md, section 4), all along, on its own grid of the
    run's fabric time (one epoch, or one virtual time 0 agreed by the agents): every host's
    samples re-binned onto one grid of the first host's period, each sample's bytes shared
    among the bins its interval overlaps in proportion (whole bytes, so that every link's sum
    stays the hosts' sum, as merge_stats' counts do; a sample over SERIES_SPAN_BINS periods
    puts its bytes in its last). A bin some host sampled is kept, idle or not, so that a mean
    over the samples counts idle time as one host's does; a bin none sampled is a gap. Where a
    host's ring dropped its oldest samples ("first" > 0), the merged series starts where that
    host's kept samples do, so that no bin lacks a host it had. "capacity" is the smallest
    ring's; "hosts": how many series went in. None when none did."""
    many = [se for se in many if se and se.get("period_ns")]
    if not many:
        return None
    if len(many) == 1:
        return dict(many[0], hosts=1)
    period = int(many[0]["period_ns"])
    nlinks = max(int(se["links"]) for se in many)
    bins, covers_from = {}, None
    for se in many:
        smps = se.get("samples") or []
        if int(se.get("first", 0)) > 0 and smps:
            start0 = int(smps[0]["t_ns"]) - int(smps[0]["dt_ns"])
            covers_from = start0 if covers_from is None else max(covers_from, start0)
        for smp in smps:
            end, dt = int(smp["t_ns"]), max(0, int(smp["dt_ns"]))
            start = end - dt
            first, last = start // period, max(start, end - 1) // period
            if last - first > SERIES_SPAN_BINS:
                first = last
            for k in range(first, last + 1):
                bins.setdefault(k, [0] * nlinks)
            for i, b in enumerate(smp["bytes"]):
                left = b
                for k in range(first, last + 1) if b else ():
                    if k == last:
                        share = left
                    else:
                        lo, hi = max(start, k * period), min(end, (k + 1) * period)
                        share = b * (hi - lo) // dt if dt else 0
                    left -= share
                    bins[k][i] += share
    keep = sorted(k for k in bins if covers_from is None or k * period >= covers_from)
    samples = [{"seq": n, "t_ns": (k + 1) * period, "dt_ns": period, "bytes": bins[k]}
               for n, k in enumerate(keep)]
    return {"period_ns": period, "links": nlinks,
            "capacity": min(int(se.get("capacity", 0)) for se in many),
            "taken": sum(int(se.get("taken", 0)) for se in many),
            "first": sum(int(se.get("first", 0)) for se in many),  # > 0: a ring dropped some
            "epoch_ns": many[0].get("epoch_ns"),
            "now_ns": max(int(se.get("now_ns", 0)) for se in many),
            "samples": samples, "hosts": len(many)}


def merge_faults(many):
    """One fault list (faults()'s form) from the daemons of a run's hosts, which all load the
    same plan: per fault the hosts' counters summed, its origin the first a host saw (a trigger
    fires in one link owner's state), its state 'on' where any host has it on."""
    base = None
    for fl in many:
        if not fl:
            continue
        if base is None:
            base = json.loads(json.dumps(fl))
            continue
        by_id = {f.get("id"): f for f in base.get("faults", [])}
        for f in fl.get("faults", []):
            b = by_id.get(f.get("id"))
            if b is None:
                base.setdefault("faults", []).append(dict(f))
                continue
            for k in ("hit", "delayed", "failed", "delay_ns"):
                if isinstance(f.get(k), int):
                    b[k] = b.get(k, 0) + f[k]
            o = f.get("origin_ns")
            if isinstance(o, int) and o > 0 and not (isinstance(b.get("origin_ns"), int) and
                                                     0 < b["origin_ns"] <= o):
                b["origin_ns"] = o
            if f.get("state") == "on":
                b["state"] = "on"
    return base


def _hosts_doc(run_dir):
    """A live run's hosts file (sf.federate.write_hosts): (doc, {host: entry}, nhosts), or
    CtlError naming why not."""
    path = os.path.join(run_dir, "hosts.json")
    try:
        with open(path) as f:
            doc = json.load(f)
        hosts = {int(k): v for k, v in doc["hosts"].items()}
        nhosts = int(doc["nhosts"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise CtlError("%s: no hosts file of a run there (%s)" % (run_dir, e))
    if any(os.path.exists(os.path.join(run_dir, f)) for f in ("launch.json", "report.json")):
        # written as a launch (launch.json) or a `simfabric run` (report.json) ends
        raise CtlError("the run in %s has ended: `simfabric report %s` shows its counters" % (
            run_dir, run_dir))
    return doc, hosts, nhosts


def _run_hosts(run_dir, timeout, now, with_stats):
    """Each host of a live run, from its hosts file: (nhosts, [(rec, show, faults, stats)],
    links) with rec {host, how, age_s?, error?}; a host on this machine asked now (stats, and the
    fabric's links from the first such host, only with_stats), another as its agent last sent
    it, a host with neither all None."""
    doc, hosts, nhosts = _hosts_doc(run_dir)
    out, links = [], None
    for h in range(nhosts):
        v, rec = hosts.get(h) or {}, {"host": h}
        show_ = fl = st = None
        if isinstance(v.get("socket"), str):
            rec["how"] = "asked now at " + v["socket"]
            try:
                show_ = show(v["socket"], timeout)
                try:
                    fl = faults(v["socket"], timeout)
                except CtlError:
                    fl = None  # the ideal fabric has no faults
            except CtlError as e:
                rec["error"] = str(e)
            if with_stats and "error" not in rec:
                try:
                    st = stats(v["socket"], timeout)
                    if links is None:
                        links = fabric(v["socket"], timeout).get("links", [])
                except CtlError:
                    st = None  # left out, and named (stats_missing)
        elif isinstance(v.get("snapshot"), dict):
            snap = v["snapshot"]
            rec["how"] = "as its agent sent it"
            rec["age_s"] = max(0.0, now - float(v.get("at_unix", now)))
            show_, fl = snap.get("show"), snap.get("faults")
            if isinstance(snap.get("stats"), dict):
                st = {int(k): r for k, r in snap["stats"].items()}  # JSON's keys
        elif doc.get("relayed", True):
            rec["error"] = "nothing from it yet (its agent sends its state every second)"
        else:
            rec["error"] = ("on another machine, and no agent brings its state here (another "
                            "host's run directory, or a run over the ideal fabric): ask it "
                            "there with simfabric status --run-dir")
        out.append((rec, show_ if isinstance(show_, dict) else None, fl, st))
    return nhosts, out, links or []


def run_status(run_dir, timeout=5.0, now=None, with_stats=False):
    """The live state of a launched run's every host (`simfabric status --run-dir`), from the
    hosts file its launcher keeps in run_dir (sf.federate.write_hosts): a host whose daemon is
    on this machine is asked now, another is what its agent last sent host 0's. show()'s form,
    each node and connection with its "host", and "hosts": [{host, how, age_s?, error?}];
    "faults": the hosts' lists merged (merge_faults), None on the ideal fabric. with_stats
    (`simfabric stats --run-dir`): also "stats", every host's per-link counters merged
    (merge_stats: each host counts what it reserved), "stats_missing", the hosts that gave
    none or counters of another shape (another build's daemon), and "links", the fabric's
    links as fabric() gives them. CtlError when run_dir has no
    hosts file (not a run of `simfabric launch` or `run`, or an older one) or the run ended."""
    nhosts, per, links = _run_hosts(run_dir, timeout, time.time() if now is None else now,
                                    with_stats)
    out = {"run_dir": run_dir, "nhosts": nhosts, "hosts": [], "nodes": [], "chans": []}
    lists, many, missing = [], [], []
    for rec, show_, fl, st in per:
        h = rec["host"]
        if show_:
            for k in ("fabric", "instance", "version"):
                out.setdefault(k, show_.get(k))
            for k in ("nodes", "chans"):
                out[k] += [dict(x, host=h) for x in show_.get(k, []) if isinstance(x, dict)]
        if st is None or (many and stats_misfit(many[0], st)):
            missing.append(h)
        else:
            many.append(st)
        lists.append(fl)
        out["hosts"].append(rec)
    # every daemon lists every node of the fabric: each once, from the host its processes
    # opened their sessions with (else the first that lists it)
    nodes = {}
    for n in out["nodes"]:
        k = n.get("name")
        if k not in nodes or (n.get("pids") and not nodes[k].get("pids")):
            nodes[k] = n
    out["nodes"] = list(nodes.values())
    out["chans_open"] = sum(1 for c in out["chans"] if c.get("state") == "open")
    out["faults"] = merge_faults(lists)
    if with_stats:
        out["stats"], out["stats_missing"], out["links"] = merge_stats(many), missing, links
    return out


def run_series(run_dir, timeout=5.0):
    """`simfabric series --run-dir`: every host's samples of a live run, merged onto one grid
    (merge_series), from the daemons on this machine. (series, links, missing): the fabric's
    links from the first daemon that answered, missing [(host, why)] for the hosts left out (on
    another machine: their agents send state, not samples, while the run lasts). CtlError as
    run_status raises it, or when no host could be asked."""
    doc, hosts, nhosts = _hosts_doc(run_dir)
    many, links, missing = [], None, []
    for h in range(nhosts):
        v = hosts.get(h) or {}
        if not isinstance(v.get("socket"), str):
            missing.append((h, "on another machine: its agent sends its samples to host 0's "
                               "at the end of the run, into the run's series.json "
                               "(`simfabric report`)"))
            continue
        try:
            fab = fabric(v["socket"], timeout).get("links", [])
            many.append(series(v["socket"], timeout))
            links = fab if links is None else links
        except CtlError as e:
            missing.append((h, str(e)))
    if not many:
        raise CtlError("no host of the run in %s gave its samples: %s" % (
            run_dir, "; ".join("host %d: %s" % m for m in missing)))
    return merge_series(many), links or [], missing


def format_run_status(st):
    """run_status()'s result as text: one line per host, then format_status's tables with a
    HOST column."""
    lines = ["run %s: %d host(s)" % (st["run_dir"], st["nhosts"])]
    for h in st["hosts"]:
        lines.append("  host %d: %s" % (h["host"], "NOT ANSWERING: " + h["error"] if "error" in h
                                        else h["how"] + (" %.1f s ago" % h["age_s"]
                                                         if "age_s" in h else "")))
    return "\n".join(lines + [format_status(st)])


def series(path, timeout=5.0):
    """The daemon's per-link samples (op=series, every page): {"period_ns", "links",
    "capacity", "taken", "first", "epoch_ns", "now_ns", "samples": [{"seq", "t_ns", "dt_ns",
    "bytes": [per link]}]}: t_ns in fabric time (ns since the daemon's start), each sample
    the payload bytes every link carried in the dt_ns before it. A sample the ring dropped
    between two pages, after the first of them had only some of its lines, is left out."""
    pairs = _pages(path, "series", timeout)
    head = {k: int(v) for k, v in pairs if "." not in k and k != "errno"}
    per = head["links_per_line"]
    chunks = -(-head["links"] // per) or 1  # lines per sample
    samples, got = {}, {}
    for k, v in pairs:
        parts = k.split(".")
        if parts[0] != "s":
            continue
        nums = [int(x) for x in v.split(",")]
        seq = int(parts[1])
        smp = samples.setdefault(seq, {"seq": seq, "t_ns": nums[0], "dt_ns": nums[1],
                                       "bytes": [0] * head["links"]})
        c0 = int(parts[2]) * per
        smp["bytes"][c0:c0 + len(nums) - 2] = nums[2:]
        got.setdefault(seq, set()).add(int(parts[2]))
    head.pop("links_per_line")
    head["samples"] = [samples[q] for q in sorted(samples) if len(got[q]) == chunks]
    return head


def clock(path, offset_ns, rtt_ns, timeout=5.0):
    """Tell one host's daemon (of several) its clock against host 0's, as its launch agent
    measured it (op=clock: host 0's clock less this host's, and the sample's round trip);
    show reports it. docs/scale-out.md, section 4."""
    request(path, "clock", timeout=timeout, offset_ns=int(offset_ns), rtt_ns=int(rtt_ns))


def format_status(st):
    """A human-readable table of show()'s result."""
    lines = ["fabric %s (instance %s, simfabricd %s): %d node(s), %d connection(s) (%s open), "
             "%s listener(s)" % (st.get("fabric", "?"), st.get("instance", "?"),
                                 st.get("version", "?"), len(st["nodes"]), len(st["chans"]),
                                 st.get("chans_open", "?"), st.get("listeners", 0))]
    if "clock_offset_ns" in st:  # one host of several: its clock against host 0's (op=clock)
        lines.append("clock: %+.1f us to host 0's (round trip %.1f us, %d check(s), the last "
                     "%.0f s ago), %+.1f us since the first" % (
                         st["clock_offset_ns"] / 1e3, st["clock_rtt_ns"] / 1e3,
                         st["clock_checks"], st["clock_age_ms"] / 1e3,
                         st["clock_moved_ns"] / 1e3))
    # a run's several hosts (run_status): each node and connection says whose daemon it is
    hc = any("host" in x for x in st["nodes"] + st["chans"])
    host = (lambda x: "%-5s " % x.get("host", "?")) if hc else (lambda x: "")
    if st["nodes"]:
        lines.append("")
        lines.append("%s%-20s %-6s %-7s %s" % ("HOST  " if hc else "", "NODE", "NICS", "GPU",
                                                "PIDS"))
        for n in st["nodes"]:
            # GPU: the plugin's GPU data path in that node's processes (SIMFABRIC_GPU)
            lines.append("%s%-20s %-6s %-7s %s" % (host(n), n.get("name"), n.get("nics"),
                                                   n.get("gpu") or "-", n.get("pids", "")))
    if st["chans"]:
        lines.append("")
        lines.append("%s%-18s %-22s %-22s %-8s %10s %14s %10s" % (
            "HOST  " if hc else "", "CONN", "FROM", "TO", "STATE", "MSGS", "BYTES", "SHM"))
        for c in st["chans"]:
            lines.append("%s%-18s %-22s %-22s %-8s %10s %14s %10s" % (
                host(c), c["id"], c.get("src"), c.get("dst"), c.get("state"), c.get("msgs"),
                c.get("bytes"), c.get("shm_bytes")))
        lines.append("")
        lines.append(format_nics(nic_counters(st["chans"])))
    return "\n".join(lines)


# what a NIC's uplinks (the links leaving it) and downlinks (those reaching it) add up to
NIC_UP_KEYS = ("packets", "lost", "timeouts", "duplicates", "reordered", "corrupted", "failed",
               "queue_ns")
NIC_DOWN_KEYS = ("late_n", "late_sum_ns", "early")


def nic_counters(conns, links=()):
    """Per NIC ("node/index"), what its connections sent and received (conns: show()'s chans or
    stats.json's connections: src, dst, msgs, bytes) and, on a modelled fabric, the sums of its
    links' counters (links: dicts with from, to and op=stats' counters): what the model did on
    its uplinks (packets, lost, ...) and the fidelity monitor on its downlinks. A list sorted
    by NIC of {"nic", "tx_conns", "tx_msgs", "tx_bytes", "rx_conns", "rx_msgs", "rx_bytes",
    "up": {...}, "down": {...}} ("up"/"down" empty on the ideal fabric)."""
    out = {}

    def nic(name):
        return out.setdefault(name, {"nic": name, "tx_conns": 0, "tx_msgs": 0, "tx_bytes": 0,
                                     "rx_conns": 0, "rx_msgs": 0, "rx_bytes": 0, "up": {},
                                     "down": {}})
    for c in conns:
        for side, end in (("tx", c.get("src")), ("rx", c.get("dst"))):
            if end:
                n = nic(end)
                n[side + "_conns"] += 1
                n[side + "_msgs"] += int(c.get("msgs") or 0)
                n[side + "_bytes"] += int(c.get("bytes") or 0)
    for l in links:
        for end, keys, part in ((l.get("from"), NIC_UP_KEYS, "up"),
                                (l.get("to"), NIC_DOWN_KEYS, "down")):
            if end and "/" in end:  # a NIC's end; switches have plain names
                d = nic(end)[part]
                for k in keys:
                    d[k] = d.get(k, 0) + int(l.get(k) or 0)
    return [out[k] for k in sorted(out)]


def format_nics(nics):
    """nic_counters()'s list as a table."""
    lines = ["%-22s %6s %10s %14s %6s %10s %14s %8s %6s %7s %5s" % (
        "NIC", "TX CON", "TX MSGS", "TX BYTES", "RX CON", "RX MSGS", "RX BYTES", "PACKETS",
        "LOST", "CORRUPT", "EARLY")]
    for n in nics:
        up, down = n["up"], n["down"]
        lines.append("%-22s %6d %10d %14d %6d %10d %14d %8s %6s %7s %5s" % (
            n["nic"], n["tx_conns"], n["tx_msgs"], n["tx_bytes"], n["rx_conns"], n["rx_msgs"],
            n["rx_bytes"], up.get("packets", "-"), up.get("lost", "-"), up.get("corrupted", "-"),
            down.get("early", "-")))
    return "\n".join(lines)


def dumps(st):
    return json.dumps(st, indent=2, sort_keys=True)


_TEXT_FIELDS = ("name", "action", "scope", "state")  # a fault's words: never numbers (name=0x1f)


def _kv(text):
    """"a=1,b=x" -> {"a": 1, "b": "x"} (numbers converted, but for _TEXT_FIELDS)."""
    out = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        out[k] = v if k in _TEXT_FIELDS else _num(v)
    return out


def faults(path, timeout=5.0):
    """The daemon's faults (op=fault verb=list, every page): {"epoch_ns", "now_ns", "faults": [...]}.
    The first fault of each live spec (`simfabric fault apply`) also has "spec" (its text) and
    "effective_ns" (when it took effect, fabric time)."""
    res, skip, live = {"faults": []}, 0, {}
    while True:
        pairs = request(path, "fault", timeout=timeout, verb="list", skip=skip)
        nxt = None
        for k, v in pairs:
            if k.startswith("fault."):
                d = _kv(v)
                d["id"] = int(k.split(".")[1])
                res["faults"].append(d)
            elif k.startswith("live."):
                live.setdefault(int(k.split(".")[1]), {})["spec"] = v
            elif k.startswith("live_ns."):
                live.setdefault(int(k.split(".")[1]), {})["effective_ns"] = int(v)
            elif k in ("epoch_ns", "now_ns"):
                res[k] = int(v)
            elif k == "next":
                nxt = int(v)
        if nxt is None:
            for f in res["faults"]:
                f.update(live.get(f["id"], {}))
            return res
        skip = nxt


def fault_apply(path, spec, at_ns=0, timeout=5.0, effective_ns=None, first_id=None):
    """Apply one live fault (YAML flow text); returns (ids, effective_ns). effective_ns: at that
    fabric time instead of at_ns from now; first_id: refused (ESTALE) unless its first fault
    gets that id (another host's live fault, applied here: docs/scale-out.md, section 5)."""
    keys = {"effective_ns": effective_ns} if effective_ns is not None else {"at_ns": at_ns}
    if first_id is not None:
        keys["first_id"] = first_id
    d = request(path, "fault", timeout=timeout, verb="apply", spec=spec, **keys)
    ids = [int(v) for k, v in d if k.startswith("id.")]
    return ids, int(dict(d)["effective_ns"])


def fault_fire(path, fid, origin_ns, name=None, timeout=5.0):
    """A trigger that fired on another host of the run: fault fid (named name there, checked
    when given) has origin origin_ns (fabric time) unless it has one (op=fault verb=fire).
    Returns (set by this call, its origin)."""
    keys = {"name": name} if name is not None else {}
    d = dict(request(path, "fault", timeout=timeout, verb="fire", id=fid, origin_ns=origin_ns,
                     **keys))
    return d["fired"] == "1", int(d["origin_ns"])


def fault_clear(path, fid="all", at_ns=0, timeout=5.0, effective_ns=None, name=None):
    """Clear fault fid (or all), at_ns from now or at fabric time effective_ns; returns how
    many were cleared. name: refused (EINVAL) unless fault fid there has that name (another
    host's clear of its fault fid)."""
    keys = {"effective_ns": effective_ns} if effective_ns is not None else {"at_ns": at_ns}
    if name is not None:
        keys["name"] = name
    d = dict(request(path, "fault", timeout=timeout, verb="clear", id=fid, **keys))
    return int(d["cleared"])
