# SPDX-License-Identifier: MIT
"""sf.federate - the launch agents of a run over several hosts agree before their daemons start
(docs/scale-out.md, section 2): the same scenario everywhere (a hash of the resolved fabric, the
seed included), and one instant for the fabric's virtual time 0 (each host's CLOCK_MONOTONIC
reading of it, measured NTP-style against host 0's clock).

Host 0's agent serves a TCP port (MASTER_PORT + 1: torchrun's store is at MASTER_PORT, the job's
rendezvous at MASTER_PORT + 2); every other agent connects (retrying until host 0 is up, within
the timeout) and says hello with its host rank, host name and hash. Host 0 answers each one
"ok", or an error naming both hosts and both hashes, which both agents then raise. An agent
then takes SAMPLES clock samples (it sends its clock, host 0 answers with its own at once) and
keeps the one with the least round trip: host 0's clock less its own is the offset, within half
that round trip's asymmetry. Once every host has joined, host 0 sends everyone its epoch (its
clock's reading of virtual time 0, a millisecond before it decided, so that no daemon's epoch is
in its future), and each agent turns it into its own clock's reading: epoch - offset.

One JSON object per line, each way. Errors: FederationError with one line naming the host and
what went wrong (a missing host after the timeout, a mismatch, a malformed line).
"""
import base64
import hashlib
import json
import os
import re
import select
import socket
import threading
import time

from . import ctl as sfctl
from .procs import check_summary

DEFAULT_TIMEOUT_S = 120  # for every host's agent to join host 0's
SAMPLES = 16
HELLO_TIMEOUT_S = 5  # a connection to host 0 that says nothing valid this long is dropped
PROBE_BYTES = 32 << 20  # each host sends this much to host 0: the network's bandwidth
MARGIN_NS = 1000000  # virtual time 0 is a millisecond before host 0 decided it
LINE_LIMIT = 65536  # a line of the rendezvous, at most
COUNTERS_LIMIT = 64 << 20  # ... and of a host's counters at the end of the run (NetRelay)
COUNTERS_WAIT_S = 30  # host 0's agent waits this long for the others' counters
VERDICT_WAIT_S = 120  # simfabric run: another host's agent waits this long for host 0's checks
CLOCK_EVERY_S = 60  # host 0's agent measures every host's clock again this often ...
CLOCK_SAY_NS = 100000  # ... and says so when it moved this much more since it last said
CLOCK_SAMPLES = 4  # samples of each check (the one with the least round trip is kept)
CLOCK_WAIT_S = 2.0  # host 0 waits this long for a host to take them
SEND_TIMEOUT_S = 30.0  # a line (a host's counters: up to COUNTERS_LIMIT) must go within this
PENDING_MAX = 10000  # lines read during a clock exchange and kept for later, at most
BIG = 1 << 62  # a peer's times and ids beyond this are not times or ids
# The agents' protocol over the rendezvous's connection (hello, clock, events, counters):
# agents of other versions are refused at the hello, naming both, rather than misread later.
PROTOCOL = 4  # 3: the launch's options in the hello; ready, start and end (--mpi); 4: status
STATUS_EVERY_S = 1.0  # another host's agent sends its daemon's live state this often (NetRelay)
STATUS_FILE = "hosts.json"  # in host 0's run directory: where each host's state is (write_hosts)


class FederationError(Exception):
    pass


class _Late(FederationError):
    """No whole line by the deadline; what came is kept for the next read."""


def scenario_hash(text):
    """sha256, 16 hex digits, of the resolved fabric's text as `simfabricd --dump-fabric --hosts
    N` prints it (byte-stable by HACKING.md's rule; the seed, the faults and the placement are
    in it): what the hosts of a run compare."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cut_gbps(dump, host):
    """What the scenario can send out of host's nodes, at most: the sum of their NICs' uplink
    rates (Gb/s; inf when one is unlimited). What crosses to other hosts is part of it."""
    hosts = dump.get("hosts") or {}
    links = {l["id"]: l for l in dump.get("links", [])}
    total = 0.0
    for n, node in enumerate(dump.get("nodes", [])):
        if hosts.get("node_host", [0] * (n + 1))[n] != host:
            continue
        for nic in node.get("nics", []):
            rate = links.get(nic.get("link_out"), {}).get("rate_bps", 0)
            if not rate:
                return float("inf")
            total += rate / 1e9
    return total


def fidelity_line(dump, host, gbps, against):
    """Section 6's words before the run: what the scenario can send from host across the
    network measured at gbps (against: where to)."""
    cut = cut_gbps(dump, host)
    if gbps <= 0:
        return None
    if cut > gbps:
        return ("fidelity: the scenario can send %s from host %d to the other hosts; the network "
                "between host %d and %s measured %.1f Gb/s (TCP, %d MiB): traffic that crosses hosts "
                "may run up to %s slower than modelled" % (
                    "without limit" if cut == float("inf") else "%.1f Gb/s" % cut, host, host,
                    against, gbps, PROBE_BYTES >> 20,
                    "any amount" if cut == float("inf") else "%.1fx" % (cut / gbps)))
    return ("fidelity: the network between host %d and %s measured %.1f Gb/s (TCP, %d MiB), above "
            "the %.1f Gb/s the scenario can send from host %d" % (host, against, gbps,
                                                                   PROBE_BYTES >> 20, cut, host))


class _Lines:
    """JSON lines over a socket, with a deadline for every read."""

    def __init__(self, sock, who):
        self.sock, self.who, self.buf = sock, who, b""
        self.limit = LINE_LIMIT  # NetRelay raises it: a host's counters are one line

    def send(self, obj):
        self.sock.settimeout(SEND_TIMEOUT_S)  # not what the last read left
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def drain(self, n, deadline):
        """Read and drop n raw bytes (the probe)."""
        take = min(n, len(self.buf))
        self.buf, n = self.buf[take:], n - take
        while n > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FederationError("%s: the probe did not arrive in time" % self.who)
            self.sock.settimeout(left)
            try:
                got = self.sock.recv(min(n, 1 << 20))
            except (socket.timeout, OSError) as e:
                raise FederationError("%s: the probe: %s" % (self.who, e))
            if not got:
                raise FederationError("%s: the connection closed during the probe" % self.who)
            n -= len(got)

    def recv(self, deadline):
        parts, seen, have = [self.buf], len(self.buf), b"\n" in self.buf
        while not have:
            left = deadline - time.monotonic()
            if left <= 0:
                self.buf = b"".join(parts)
                raise _Late("%s: no answer in time" % self.who)
            self.sock.settimeout(left)
            try:
                got = self.sock.recv(1 << 16)
            except socket.timeout:
                self.buf = b"".join(parts)
                raise _Late("%s: no answer in time" % self.who)
            except OSError as e:
                raise FederationError("%s: %s" % (self.who, e.strerror or e))
            if not got:
                raise FederationError("%s: the connection closed" % self.who)
            parts.append(got)
            seen += len(got)
            have = b"\n" in got
            if not have and seen > self.limit:
                raise FederationError("%s: a line longer than %d KiB" % (self.who,
                                                                        self.limit >> 10))
        line, self.buf = b"".join(parts).split(b"\n", 1)
        if len(line) > self.limit:
            raise FederationError("%s: a line longer than %d KiB" % (self.who, self.limit >> 10))
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            raise FederationError("%s: a malformed line: %r" % (self.who, line[:80]))
        if not isinstance(obj, dict):
            raise FederationError("%s: a malformed line: %r" % (self.who, line[:80]))
        if "error" in obj:
            raise FederationError(str(obj["error"]))
        return obj


def _field(obj, key, kind, who):
    v = obj.get(key)
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if not isinstance(v, kind) or isinstance(v, bool):
        raise FederationError("%s: '%s' missing or not a %s" % (who, key, kind.__name__))
    return v


def _sample(c, n, deadline, clock=time.monotonic_ns, other=None):
    """The asking side of n clock samples over c (it sends its clock, the other side answers
    with its own at once): (the other side's clock less ours, round trip), of the sample with
    the least round trip, whose asymmetry bounds the error (half of it at most). other(msg):
    a line that is not an answer (the relay's events), kept for later; without it, an error."""
    best = None
    for _ in range(n):
        t1 = clock()
        c.send({"t1": t1})
        while True:
            if time.monotonic() >= deadline:  # (recv returns a line it holds at once)
                raise _Late("%s: no answer in time" % c.who)
            msg = c.recv(deadline)
            if "t2" in msg or other is None:
                break
            other(msg)
        t2 = _field(msg, "t2", int, c.who)
        t3 = clock()
        if best is None or t3 - t1 < best[1]:
            best = (t2 - (t1 + t3) // 2, t3 - t1)
    return best


def _answer(c, deadline, clock=time.monotonic_ns, other=None, end=None):
    """The answering side of _sample: each "t1" line answered at once with our clock, until a
    line with the key end (returned; end None: after the SAMPLES of the rendezvous). other as
    in _sample."""
    n = 0
    while end is not None or n < SAMPLES:
        if time.monotonic() >= deadline:
            raise _Late("%s: no answer in time" % c.who)
        msg = c.recv(deadline)
        if "t1" in msg:
            _field(msg, "t1", int, c.who)
            c.send({"t2": clock()})
            n += 1
        elif end is not None and end in msg:
            return msg
        elif other is not None:
            other(msg)
        else:
            _field(msg, "t1", int, c.who)  # raises, naming it
    return None


def _serve(nhosts, digest, port, deadline, bind, launch=""):
    """Host 0: every other host joins; returns {host: (name, offset, rtt)} and the epoch."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    peers = {}
    try:
        ls.bind((bind, port))
        ls.listen(nhosts)
        while len(peers) < nhosts - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, nhosts)) - set(peers))
                raise FederationError("host(s) %s did not join host 0 at port %d in time" % (
                    ", ".join(map(str, missing)), port))
            ls.settimeout(left)
            try:
                s, addr = ls.accept()
            except socket.timeout:
                continue
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = _Lines(s, "a host at %s" % addr[0])
            try:  # a stray connection (a scanner, a stale agent) is dropped, not fatal
                hello = c.recv(min(deadline, time.monotonic() + HELLO_TIMEOUT_S))
                h = _field(hello, "host", int, c.who)
            except FederationError:
                s.close()
                continue
            c.who = "host %d (%s)" % (h, hello.get("name", "?"))
            if not 1 <= h < nhosts or h in peers:
                c.send({"error": "%s: not a host rank host 0 waits for (1..%d, once each)" % (
                    c.who, nhosts - 1)})
                s.close()
                raise FederationError("%s joined twice or out of range" % c.who)
            if hello.get("protocol") != PROTOCOL:
                why = "%s speaks the agents' protocol %r; host 0 (%s) speaks %d: run one " \
                      "simfabric version on every host" % (c.who, hello.get("protocol"),
                                                            socket.gethostname(), PROTOCOL)
                c.send({"error": why})
                s.close()
                raise FederationError(why)
            if hello.get("hash") != digest:
                why = "scenario mismatch: %s has %s; host 0 (%s) has %s" % (
                    c.who, hello.get("hash"), socket.gethostname(), digest)
                c.send({"error": why})
                s.close()
                raise FederationError(why)
            if hello.get("launch", "") != launch:
                why = "launch mismatch: %s was started with %.200r; host 0 (%s) with %r: start " \
                      "every host's agent with the same options" % (
                          c.who, hello.get("launch"), socket.gethostname(), launch)
                c.send({"error": why})
                s.close()
                raise FederationError(why)
            c.send({"ok": True})
            _answer(c, deadline)  # its clock samples, at once
            res = c.recv(deadline)
            nprobe = _field(c.recv(deadline), "probe", int, c.who)
            if not 0 < nprobe <= 1 << 30:
                raise FederationError("%s: a probe of %d bytes" % (c.who, nprobe))
            c.drain(nprobe, deadline)
            c.send({"got": nprobe})
            gb = _field(c.recv(deadline), "gbps", float, c.who)
            peers[h] = (c, str(hello.get("name", "?")), _field(res, "offset", int, c.who),
                        _field(res, "rtt", int, c.who), gb)
        epoch = time.monotonic_ns() - MARGIN_NS
        for c, *_ in peers.values():
            c.send({"epoch": epoch})
        links = {h: v[0] for h, v in peers.items()}
        peers_out = {h: v[1:] for h, v in peers.items()}
        peers = {}  # kept open: the run's trigger relay (NetRelay)
        return peers_out, epoch, links
    finally:
        for c, *_ in peers.values():
            c.sock.close()
        ls.close()


def _join(host, addr, port, digest, deadline, launch=""):
    """Host h > 0: join host 0; returns (offset, rtt, host 0's epoch)."""
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=max(0.1, deadline -
                                                                     time.monotonic()))
            break
        except OSError as e:
            if time.monotonic() >= deadline:
                raise FederationError("host %d: cannot reach host 0 at %s:%d: %s" % (
                    host, addr, port, e.strerror or e))
            time.sleep(0.05)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c = _Lines(s, "host 0 at %s:%d" % (addr, port))
    ok = False
    try:
        c.send({"host": host, "name": socket.gethostname(), "hash": digest,
                "protocol": PROTOCOL, "launch": launch})
        c.recv(deadline)
        best = _sample(c, SAMPLES, deadline)
        c.send({"offset": best[0], "rtt": best[1]})
        # the network's bandwidth to host 0: PROBE_BYTES, timed to host 0's word that it has them
        c.send({"probe": PROBE_BYTES})
        chunk = bytes(1 << 20)
        t0 = time.monotonic()
        for _ in range(PROBE_BYTES >> 20):
            s.sendall(chunk)
        c.recv(deadline)
        gbps = PROBE_BYTES * 8 / max(time.monotonic() - t0, 1e-9) / 1e9
        c.send({"gbps": gbps})
        epoch = _field(c.recv(deadline), "epoch", int, c.who)
        ok = True
        return best[0], best[1], gbps, epoch, c
    finally:
        if not ok:
            s.close()


def agree(host, nhosts, addr, port, digest, timeout=60.0, bind=None, launch=""):
    """This host's epoch (its CLOCK_MONOTONIC ns of virtual time 0), what was measured
    ({host: (name, offset_ns, rtt_ns)} on host 0, (offset_ns, rtt_ns) elsewhere) and the
    connections, kept open for NetRelay ({host: link}: host 0's to every other host, another
    host's to host 0). What was measured: on host 0 {host: (name, offset_ns, rtt_ns, Gb/s)},
    elsewhere (offset_ns, rtt_ns, Gb/s), the Gb/s of PROBE_BYTES sent from that host to host 0. One host alone: now, nothing measured, no link."""
    deadline = time.monotonic() + timeout
    if nhosts == 1:
        return time.monotonic_ns() - MARGIN_NS, {}, {}
    if host == 0:
        measured, epoch, links = _serve(nhosts, digest, port, deadline,
                                        bind if bind is not None else addr, launch)
        return epoch, measured, links
    off, rtt, gbps, epoch, link = _join(host, addr, port, digest, deadline, launch)
    return epoch - off, (off, rtt, gbps), {0: link}


def tell_daemon(sock, offset_ns, rtt_ns, say=None):
    """This host's clock against host 0's into its daemon (op=clock), for show. A daemon that
    does not answer (going) is left as it is; one that refuses the value is said (with say)."""
    try:
        sfctl.clock(sock, offset_ns, rtt_ns, timeout=2.0)
    except sfctl.CtlError as e:
        if say and e.errno == 22:  # EINVAL: the value, not the daemon's state
            say("clock: this host's daemon refused its offset to host 0: %s" % e)
    except OSError:
        pass


RELAY_PERIOD_S = 0.02


def _list(sock):
    """sock's daemon's fault list (sf.ctl.faults), or None when it does not answer (it is
    going: the run is ending)."""
    try:
        return sfctl.faults(sock, timeout=2.0)
    except (sfctl.CtlError, OSError):  # a daemon slow or going: again at the next period
        return None


def _events(fl):
    """What a host's fault list says the others must be told, in the order to tell it: per
    fault, a live spec applied there ("apply": its text and effective time), its trigger's
    origin ("fire") and a clear ("clear": when)."""
    out = []
    for f in (fl or {}).get("faults", []):
        fid, name = f["id"], f.get("name", "?")
        if isinstance(f.get("spec"), str) and _int(f.get("effective_ns")):
            out.append({"op": "apply", "id": fid, "name": name, "spec": f["spec"],
                        "at_ns": f["effective_ns"]})
        live_clock = isinstance(f.get("spec"), str) and f.get("origin_ns") == f.get(
            "effective_ns")  # a live fault of the clock: its apply carries its origin
        if _int(f.get("origin_ns")) and f["origin_ns"] > 0 and not live_clock:
            out.append({"op": "fire", "id": fid, "name": name, "at_ns": f["origin_ns"]})
        if _int(f.get("until_ns")) and f["until_ns"] >= 0:
            out.append({"op": "clear", "id": fid, "name": name, "at_ns": f["until_ns"]})
    return out


def write_hosts(run_dir, nhosts, sockets, snapshots=None, relayed=True):
    """The run's hosts for `simfabric status --run-dir` (STATUS_FILE, replaced whole): each
    host's daemon socket where it is on this machine (sockets: host -> path), else the last
    state its agent sent (snapshots: host -> (unix time, {"show", "faults"})); relayed: False
    where no agent sends this host the others' states (another host; host 0 of a run with no
    relay between the agents)."""
    hosts = {str(h): {"socket": sk} for h, sk in sockets.items()}
    for h, (at, st) in (snapshots or {}).items():
        hosts[str(h)] = {"snapshot": st, "at_unix": at}
    path = os.path.join(run_dir, STATUS_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"nhosts": nhosts, "hosts": hosts, "relayed": relayed}, f)
    os.replace(tmp, path)


def check_status(doc, host):
    """Another host's live state ({"host", "show", "faults", "stats"}), or FederationError."""
    if not isinstance(doc, dict) or doc.get("host") != host or not isinstance(
            doc.get("show"), dict) or not all(isinstance(doc["show"].get(k), list)
                                              for k in ("nodes", "chans")) or not (
            doc.get("faults") is None or isinstance(doc["faults"], dict)) or not (
            doc.get("stats") is None or isinstance(doc["stats"], dict) and all(
                str(k).isdigit() and isinstance(r, dict) for k, r in doc["stats"].items())):
        raise FederationError("a status that is not host %d's show, faults and stats" % host)
    return {"show": doc["show"], "faults": doc.get("faults"), "stats": doc.get("stats")}


def check_event(msg):
    """An event another host's agent sent (_events' form, with "from"), or FederationError."""
    if not isinstance(msg, dict) or msg.get("op") not in ("apply", "fire", "clear") or \
            not all(_int(msg.get(k)) and abs(msg[k]) < BIG for k in ("id", "at_ns", "from")) \
            or not 0 <= msg["id"] < 1 << 32 or \
            msg["at_ns"] < (1 if msg["op"] == "fire" else 0) or \
            not isinstance(msg.get("name"), str) or \
            (msg["op"] == "apply" and not isinstance(msg.get("spec"), str)):
        raise FederationError("not a fault event: %.200r" % (msg,))
    return msg


def _do(sock, ev):
    """Carry out one event on sock's daemon: ("set", at) when it took it, ("had", its own
    origin) when a fire found one there, ("no", why) when it cannot take it (it says why: a
    fault of another name at that id, another numbering, a fault on the clock), None when it
    did not answer (try again)."""
    try:
        if ev["op"] == "apply":
            sfctl.fault_apply(sock, ev["spec"], effective_ns=ev["at_ns"], first_id=ev["id"],
                              timeout=2.0)
            return ("set", ev["at_ns"])
        if ev["op"] == "clear":
            sfctl.fault_clear(sock, ev["id"], effective_ns=ev["at_ns"], name=ev["name"],
                              timeout=2.0)
            return ("set", ev["at_ns"])
        got = sfctl.fault_fire(sock, ev["id"], ev["at_ns"], name=ev["name"], timeout=2.0)
    except sfctl.CtlError as e:
        # its word (EINVAL, ESTALE, ENOSPC, ENOENT), or no answer
        return ("no", e.reason) if e.errno in (22, 116, 28, 2) else None
    except OSError:  # slow or going: again at the next period
        return None
    return ("set", ev["at_ns"]) if got[0] else ("had", got[1])


WHAT = {"apply": "live fault #%d '%s' applied on host %d (effective at %.3f ms, fabric time)",
        "fire": "fault #%d '%s' fired on host %d at %.3f ms (fabric time)",
        "clear": "fault #%d '%s' cleared on host %d (at %.3f ms, fabric time)"}
HERE = {"apply": "live fault #%d '%s' applied here (host %d), effective at %.3f ms (fabric time)",
        "fire": "fault #%d '%s' fired here (host %d) at %.3f ms (fabric time)",
        "clear": "fault #%d '%s' cleared here (host %d) at %.3f ms (fabric time)"}


def _key(ev):
    """What makes an event new: a fault's live spec and its trigger's origin are told once; a
    clear once per time (a second, earlier clear of the same fault moves its end)."""
    return (ev["op"], ev["id"]) + ((ev["at_ns"],) if ev["op"] == "clear" else ())


def _outcome(say, ev, where, res):
    """Say what an event did where it matters: another origin there, or a refusal."""
    fid, name = ev["id"], ev["name"]
    if res[0] == "had" and res[1] != ev["at_ns"]:
        say("fault #%d '%s': %s had its own origin at %.3f ms, not %.3f ms: its windows differ "
            "between hosts (a trigger counted on several hosts: docs/scale-out.md, section 5)" % (
                fid, name, where, res[1] / 1e6, ev["at_ns"] / 1e6))
    elif res[0] == "no":
        say("fault #%d '%s': %s did not take its %s: %s" % (
            fid, name, where, {"apply": "live spec", "fire": "origin", "clear": "clear"}[
                ev["op"]], res[1]))


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_counters(doc, host):
    """(stats, faults, connections, host pairs) from what host's agent sent at the end of its
    run, in sf.ctl's and the launcher's forms (stats' link ids ints again); FederationError
    naming what does not fit."""
    if not isinstance(doc, dict) or doc.get("host") != host:
        raise FederationError("not host %d's counters" % host)
    st, fl, conns = doc.get("stats"), doc.get("faults"), doc.get("connections")
    stats = {} if st is not None else None
    if st is not None and not isinstance(st, dict):
        raise FederationError("'stats' is not an object")
    for k, rec in (st or {}).items():
        if not (isinstance(k, str) and k.isdigit()) or not isinstance(rec, dict) or not all(
                _int(v) or (isinstance(v, list) and all(_int(x) for x in v))
                for v in rec.values()):
            raise FederationError("stats of link %.40r" % k)
        stats[int(k)] = rec
    if fl is not None and not (isinstance(fl, dict) and isinstance(fl.get("faults", []), list)
                               and all(isinstance(f, dict) and _int(f.get("id"))
                                       for f in fl.get("faults", []))):
        raise FederationError("'faults' is not a fault list")
    if conns is not None and not (isinstance(conns, list) and
                                  all(isinstance(x, dict) for x in conns)):
        raise FederationError("'connections' is not a list of objects")
    pairs = doc.get("pairs")
    keys = ("from", "to", "n", "late_sum_ns", "late_max_ns")
    if pairs is not None and not (isinstance(pairs, list) and all(
            isinstance(p, dict) and set(p) == set(keys) and
            all(_int(p[k]) and 0 <= p[k] < BIG for k in keys) and p["to"] == host and
            p["from"] != host for p in pairs)):
        raise FederationError("'pairs' is not a list of this host's deliveries by host")
    return stats, fl, conns, pairs, check_ranks(doc.get("ranks"))


SERIES_MAX_LINKS = 1 << 20  # a fabric's links, at most (far above any the daemon builds)


def check_series(se):
    """A host's link samples (sf.ctl.series' form) as another agent sent them, or None;
    FederationError naming what does not fit (sf.ctl.merge_series' input must be sane: its
    work and memory grow with the links and the samples' spans)."""
    if se is None:
        return None
    if not (isinstance(se, dict) and _int(se.get("period_ns")) and 0 < se["period_ns"] < BIG
            and _int(se.get("links")) and 0 <= se["links"] <= SERIES_MAX_LINKS and
            isinstance(se.get("samples"), list)):
        raise FederationError("'series' is not a series of link samples")
    for k in ("capacity", "taken", "first", "now_ns"):
        if k in se and not (_int(se[k]) and 0 <= se[k] < BIG):
            raise FederationError("'series' has %s %.40r, not a count" % (k, se[k]))
    for smp in se["samples"]:
        if not (isinstance(smp, dict) and _int(smp.get("t_ns")) and _int(smp.get("dt_ns")) and
                0 <= smp["dt_ns"] <= smp["t_ns"] < BIG and
                isinstance(smp.get("bytes"), list) and len(smp["bytes"]) == se["links"] and
                all(_int(b) and 0 <= b < BIG for b in smp["bytes"])):
            raise FederationError("'series' has a sample that is not one: %.80r" % (smp,))
    return se


HOSTNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}\Z")


def check_ready(doc, host, names=()):
    """What another host's agent of `launch --hosts-from-env --mpi` says of itself (NetRelay.
    send_ready) as {"name", "socket", "env"}, or FederationError naming what is wrong: the
    words go into the MPI wrapper's lists and the host name into mpirun's --host; env may
    hold only the variables names (sf.ranks.MPI_HOST_VARS)."""
    who = "host %d" % host
    if not isinstance(doc, dict) or doc.get("host") != host:
        raise FederationError("%s sent where its daemon is for another host: %.200r" % (
            who, doc))
    name, sock, env = doc.get("name"), doc.get("socket"), doc.get("env", {})
    if not isinstance(name, str) or not HOSTNAME.match(name):
        raise FederationError("%s: its host name %.200r is not one mpirun can take" % (who, name))
    if not isinstance(sock, str) or not sock.startswith("/"):
        raise FederationError("%s: its daemon's socket %.200r is not an absolute path" % (
            who, sock))
    if not isinstance(env, dict):
        raise FederationError("%s: its ranks' variables %.200r are not a map" % (who, env))
    for k, v in [("its daemon's socket", sock)] + sorted(env.items()):
        if k != "its daemon's socket" and k not in names:
            raise FederationError("%s: %.100r is not a variable a host sets for its ranks (%s)"
                                  % (who, k, ", ".join(names)))
        if not isinstance(v, str) or not v or len(v) > 4096 or any(c.isspace() for c in v):
            raise FederationError("%s: %s %.200r is not a word without spaces (the MPI "
                                  "wrapper's lists cannot carry it)" % (who, k, v))
    return {"name": name, "socket": sock, "env": dict(env)}


def check_ranks(ranks):
    """What another host's agent of `simfabric run` says of its ranks (None, or {"procs": [rank
    summaries], "stacks": text or None, "files": {name: base64}}), or FederationError."""
    if ranks is None:
        return None
    if not isinstance(ranks, dict) or not isinstance(ranks.get("procs"), list):
        raise FederationError("'ranks' is not an object with a list of procs")
    try:
        for d in ranks["procs"]:
            check_summary(d)
    except ValueError as e:
        raise FederationError(str(e))
    if not isinstance(ranks.get("timed_out", False), bool):
        raise FederationError("'ranks': 'timed_out' is not true or false")
    for k in ("interrupted", "daemon_rc", "t_start_ns"):
        v = ranks.get(k)
        if v is not None and not (_int(v) and abs(v) < BIG):
            raise FederationError("'ranks': '%s' is %.40r" % (k, v))
    w = ranks.get("withheld") or []
    if not isinstance(w, list) or not all(isinstance(x, str) and len(x) < 256 for x in w):
        raise FederationError("'ranks': 'withheld' is not a list of file names")
    if not isinstance(ranks.get("stacks"), (str, type(None))):
        raise FederationError("'ranks': 'stacks' is not text")
    files = ranks.get("files") or {}
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and "/" not in k and
            "\0" not in k and not k.startswith(".") and len(k.encode("utf-8", "replace")) < 256
            for k, v in files.items()):
        raise FederationError("'ranks': 'files' is not {file name: base64 text}")
    for k, v in files.items():
        try:
            base64.b64decode(v, validate=True)
        except ValueError:
            raise FederationError("'ranks': file %.60r is not base64" % k)
    return ranks


class TriggerRelay(threading.Thread):
    """What happens to a fault on one host of a run, the others must do at the same fabric
    time (docs/scale-out.md, section 5): a trigger that fires in the fabric state of the host
    that owns the link it counts, while its action may be another host's (a node_freeze of a
    node there, a link down on a link there); a live fault (`simfabric fault apply`) or a clear
    sent to one host's daemon. While the run lasts, this thread watches every local host's
    daemon (--local-hosts: they are all on this machine) every RELAY_PERIOD_S and carries each
    new event to the others, in order: a live spec applied with the same effective time and
    fault ids (op=fault verb=apply effective_ns first_id: another numbering is refused, not
    followed), a trigger's origin (verb=fire, with the fault's name, which the daemon checks:
    the first publication wins), a clear at the same time (verb=clear effective_ns). A daemon
    that does not answer is asked again at the next period. The action starts up to one period
    late on the other hosts; the windows are exact."""

    def __init__(self, sockets, say):
        super().__init__(name="sf-trigger-relay", daemon=True)
        self.sockets, self.say = list(sockets), say
        self.done = threading.Event()
        self.seen = {}  # _key -> (event, from host): events told (or being told) everywhere
        self.clashed = set()  # _keys whose clash is said
        self.queue = {k: [] for k in range(len(self.sockets))}  # host -> [(event, from)]
        self.told = {}  # _key -> (from host, hosts that took it, hosts still to tell)

    def _note(self, h, ev):
        """Is ev (from host h) new? A live spec another host applied at the same id first is
        not new, and not carried: the hosts' faults differ from there on, which is said."""
        key = _key(ev)
        if key not in self.seen:
            self.seen[key] = (ev, h)
            return True
        first, fh = self.seen[key]
        if ev["op"] == "apply" and fh != h and key not in self.clashed and (
                first["spec"], first["at_ns"]) != (ev["spec"], ev["at_ns"]):
            self.clashed.add(key)
            self.say("fault #%d: host %d applied the live spec %.200r at the id host %d gave "
                     "%.200r: host %d's is not carried to the other hosts, and their faults "
                     "differ from here on (send live faults of a run to one host's daemon)" % (
                         ev["id"], h, ev["spec"], fh, first["spec"], h))
        return False

    def _host_name(self, k):
        """How the outcome of an event on host k's daemon (self.sockets[k]) names it."""
        return "host %d" % k

    def poll(self):
        n = len(self.sockets)
        for h, sock in enumerate(self.sockets):
            for ev in _events(_list(sock)):
                if self._note(h, ev):
                    self.told[_key(ev)] = (h, [], set(range(n)) - {h})
                    for k in range(n):
                        if k != h:
                            self.queue[k].append((ev, h))
        for k in range(n):
            self._drain(k)

    def _drain(self, k):
        """Host k's events, in order, until its daemon does not answer."""
        q = self.queue[k]
        while q:
            ev, h = q[0]
            res = _do(self.sockets[k], ev)
            if res is None:
                return  # again at the next period, in the same order
            q.pop(0)
            frm, took, left = self.told[_key(ev)]
            left.discard(k)
            if res[0] == "set":
                took.append(k)
            _outcome(self.say, ev, self._host_name(k), res)
            if not left and took:
                self.say((WHAT[ev["op"]] + ": published %s") % (
                    ev["id"], ev["name"], frm, ev["at_ns"] / 1e6, self._where(took)))

    def _where(self, hosts):
        return "to host(s) %s" % ", ".join(map(str, hosts))

    def run(self):
        while not self.done.wait(RELAY_PERIOD_S):
            try:
                self.poll()
            except Exception as e:  # noqa: BLE001 - the relay must outlive one bad period
                self.say("fault relay: %s: %s (carrying on at the next period)" % (
                    type(e).__name__, e))

    def stop(self):
        self.done.set()
        self.join(timeout=5)


class NetRelay(TriggerRelay):
    """The same across real hosts (--hosts-from-env): each agent watches its own daemon and
    sends each new event to host 0's agent over the connection the rendezvous left open; host
    0's carries it out on its daemon and forwards it to every other host's agent, which
    carries it out on its own. A line from a peer that is neither an event nor one of the
    messages below ends that peer's link with a note.

    Also over those connections: every CLOCK_EVERY_S host 0 asks each host to measure its
    clock again ("clock": the host takes CLOCK_SAMPLES samples as at the rendezvous, host 0
    answering each at once while it waits, and sends back "clock_offset"); at the end of the
    run each other host sends its daemon's counters ("counters"), which host 0 acknowledges
    ("counters_ok") before either side closes. With --mpi, where host 0's mpirun starts every
    host's ranks: each other host says its name, where its daemon is and what its ranks need
    ("ready"), and host 0 says when mpirun starts ("start") and ends, with its status
    ("end")."""

    def __init__(self, sock, host, links, say, offsets=None):
        super().__init__([sock], say)
        self.host, self.links = host, dict(links)
        # host 0: each host's clock offset at the rendezvous (host 0's clock less its), and
        # what the checks every CLOCK_EVERY_S found since: host -> [offset, rtt, checks, said]
        self.offsets = dict(offsets or {})
        self.clocks = {}
        self.clock_every = CLOCK_EVERY_S
        self.next_clock = time.monotonic() + self.clock_every
        self.now = time.monotonic_ns  # the clock the checks read (a test's may be another)
        self.counters = {}  # host 0: host -> its counters at the end of its run (check_counters)
        self.got = threading.Condition()
        self.acked = threading.Event()  # another host: host 0 has its counters
        self.verdict, self.verdict_got = None, threading.Event()  # ... and host 0's checks
        # --mpi across hosts: each other host's daemon and MPS (host 0: host -> ready() or the
        # FederationError of what it sent), and host 0's mpirun's end (another host: its status)
        self.ready = {}
        self.host_vars = ()  # the variables a host's "ready" may set (sf.ranks.MPI_HOST_VARS)
        # another host of a modelled fabric: give its daemon each clock check's reading
        # (op=clock; a daemon of the ideal fabric has no --hosts and takes none)
        self.tell, self.clock_reading = False, None
        self.started = threading.Event()  # another host: host 0 has started mpirun
        self.end, self.end_got = None, threading.Event()
        self.outbox = []  # (message, threading.Event): sent by the relay's thread, the links'
        self.pending = []  # (host, message): read during a clock exchange, handled after it
        # `simfabric status --run-dir`: each other host's agent sends its daemon's show and
        # faults every STATUS_EVERY_S; host 0's writes them into its run directory (status_dir,
        # set by its launcher: write_hosts) with its own daemon's socket
        self.status_every, self.next_status = STATUS_EVERY_S, 0.0
        self.status_dir, self.nhosts, self.snapshots = None, 0, {}
        for c in self.links.values():  # only user
            c.limit = COUNTERS_LIMIT

    def _send(self, msg, skip=None):
        for h, c in list(self.links.items()):
            if h == skip:
                continue
            try:
                c.send(msg)
            except OSError:  # that host's agent is gone (its run has ended), or stuck
                self.links.pop(h, None)
                c.sock.close()

    def _post(self, msg, timeout):
        """msg to the other agents, by the relay's thread (which owns the links' writes): True
        once it went out and a link is left, False if not within timeout."""
        sent = threading.Event()
        with self.got:
            self.outbox.append((msg, sent))
        return sent.wait(timeout) and bool(self.links)

    def send_counters(self, stats, faults, connections, pairs=None, ranks=None, timeout=10.0,
                      series=None):
        """Another host's agent, at the end of its run: its daemon's counters (and its link
        samples, sf.ctl.series' form) to host 0's agent, which merges every host's into its
        run's stats.json, faults.json and series.json. True once host 0's agent said it has
        them (False: not within timeout, or no link left)."""
        deadline = time.monotonic() + timeout
        msg = {"counters": {"host": self.host, "stats": stats, "faults": faults,
                            "connections": connections, "pairs": pairs, "ranks": ranks}}
        if series is not None:
            # the samples take what room the line has left: the counters must go whole
            room = COUNTERS_LIMIT - len(json.dumps(msg)) - (64 << 10)
            size = len(json.dumps(series))
            if size <= room:
                msg["counters"]["series"] = series
            else:
                self.say("series: this host's samples (%.1f MiB encoded) do not fit what the "
                         "counters leave of the line to host 0 (%.1f MiB): not sent (this run "
                         "directory's series.json has them)" % (size / 2**20,
                                                                 max(0, room) / 2**20))
        if not self._post(msg, timeout):
            return False
        return self.acked.wait(max(0.0, deadline - time.monotonic()))

    def send_verdict(self, status, report, timeout=10.0):
        """Host 0's agent of `simfabric run --hosts-from-env`, once it has checked the run: its
        exit status and report to every other host's agent (each exits with the same). True
        once sent."""
        return self._post({"verdict": {"status": status, "report": report}}, timeout)

    def wait_verdict(self, timeout=VERDICT_WAIT_S):
        """Another host's agent: host 0's {"status", "report"}, or None and why not (host 0's
        agent closed the connection first, or said nothing within timeout)."""
        deadline = time.monotonic() + timeout
        while not self.verdict_got.wait(0.1):
            if not self.links:
                return None, "host 0's agent closed its connection without a verdict (its " \
                    "output says why)"
            if time.monotonic() >= deadline:
                return None, "host 0's agent said nothing of the run within %d s" % timeout
        return self.verdict, "host 0 sent a verdict that does not parse" if \
            self.verdict is None else None

    def send_ready(self, info, timeout=10.0):
        """Another host's agent of `launch --hosts-from-env --mpi`, its daemon up: where it
        is ({"name": host name, "socket": the daemon's, "env": what its ranks need there,
        sf.ranks.MPI_HOST_VARS}), for host 0's mpirun, which starts every rank. True once
        sent."""
        return self._post({"ready": dict(info, host=self.host)}, timeout)

    def wait_ready(self, nhosts, timeout):
        """Host 0's agent of `launch --hosts-from-env --mpi`: {host: ready()} of every other
        host, or FederationError naming the hosts that said nothing within timeout, or what
        one sent that does not parse."""
        deadline = time.monotonic() + timeout
        with self.got:
            while len(self.ready) < nhosts - 1:
                left = deadline - time.monotonic()
                gone = [h for h in range(1, nhosts) if h not in self.ready and
                        h not in self.links]
                if left <= 0 or gone:
                    missing = gone or [h for h in range(1, nhosts) if h not in self.ready]
                    raise FederationError(
                        "--mpi: host(s) %s did not say where their daemon is %s" % (
                            ", ".join(map(str, missing)), "(their agent closed its connection: "
                            "its output says why)" if gone else "within %.0f s" % timeout))
                self.got.wait(min(left, 0.1))
            bad = [v for v in self.ready.values() if isinstance(v, FederationError)]
            if bad:
                raise bad[0]
            return dict(self.ready)

    def send_start(self, timeout=10.0):
        """Host 0's agent of `launch --hosts-from-env --mpi`: mpirun is starting; the other
        agents count the job's timeout from now. True once sent."""
        return self._post({"start": True}, timeout)

    def send_end(self, status, timeout=10.0):
        """Host 0's agent of `launch --hosts-from-env --mpi`: mpirun has ended with status;
        the other agents, whose ranks it started, end their wait with it. True once sent."""
        return self._post({"end": {"status": status}}, timeout)

    def mpi_ended(self):
        """Another host's agent of `launch --hosts-from-env --mpi`: (host 0's mpirun's exit
        status, None), (None, why there is none), or None while the MPI job runs."""
        if self.end_got.is_set():
            return (self.end, None) if self.end is not None else (
                None, "host 0 sent an end of the MPI job that does not parse")
        if not self.links:
            return None, "host 0's agent closed its connection before its mpirun ended (its " \
                "output says why)"
        return None

    def wait_counters(self, nhosts, timeout=COUNTERS_WAIT_S):
        """Host 0's agent, at the end of its run: {host: (stats, faults, connections)} of the
        other hosts that sent theirs within timeout (the relay's thread takes them)."""
        deadline = time.monotonic() + timeout
        with self.got:
            while len(self.counters) < nhosts - 1 and self.links:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.got.wait(min(left, 0.1))
            return dict(self.counters)

    def _clock_check(self):
        """Host 0: every host measures its clock against host 0's again (the drift between
        CLOCK_MONOTONICs of different machines, which NTP slews, moves every stamp between them
        and every window a trigger opens there; docs/scale-out.md, section 4). Host 0 waits
        for each host in turn, answering its samples at once: an answer left to the next
        period would be off by up to a period."""
        self.next_clock = time.monotonic() + self.clock_every
        for h, c in list(self.links.items()):
            if h not in self.offsets:
                continue
            try:
                c.send({"clock": CLOCK_SAMPLES})
                msg = _answer(c, time.monotonic() + CLOCK_WAIT_S, self.now,
                              other=lambda m, h=h: self._stash(h, m), end="clock_offset")
            except _Late:
                continue  # busy: its answer, when it comes, is taken by _handle
            except (FederationError, OSError) as e:
                self._lost(h, e)
                continue
            self._clock_back(h, msg)

    def _clock_back(self, h, msg):
        """Host 0: a host's offset measured again (the best of its samples: within half its
        round trip); its move since the rendezvous, said when it is large beyond that."""
        off, rtt = msg.get("clock_offset"), msg.get("rtt")
        if not (_int(off) and _int(rtt)) or h not in self.offsets or not (
                0 <= rtt < BIG and abs(off) < BIG):
            return
        rec = self.clocks.setdefault(h, [off, rtt, 0, 0])
        rec[0], rec[1] = off, rtt
        rec[2] += 1
        moved = rec[0] - self.offsets[h]
        if abs(moved) - rtt // 2 >= CLOCK_SAY_NS and abs(moved - rec[3]) >= CLOCK_SAY_NS:
            rec[3] = moved
            self.say("clock: host %d's clock has moved %+.1f us against host 0's since the "
                     "rendezvous (round trip %.1f us): stamps between them and the windows of "
                     "triggers counted there are off by as much (docs/scale-out.md, section 4)"
                     % (h, moved / 1e3, rec[1] / 1e3))

    def clock_summary(self):
        """Host 0, at the end: one line per host checked, or []."""
        return ["clock: host %d's clock moved %+.1f us against host 0's over the run (%d "
                "check(s), every %g s; round trip %.1f us)" % (
                    h, (r[0] - self.offsets[h]) / 1e3, r[2], self.clock_every, r[1] / 1e3)
                for h, r in sorted(self.clocks.items())]

    def _lost(self, h, e):
        c = self.links.pop(h, None)
        if c is not None:
            c.sock.close()
            if "closed" not in str(e):
                self.say("fault relay: %s" % e)

    def _stash(self, h, msg):
        """A line read during a clock exchange: handled after it, in order (_flush)."""
        if len(self.pending) >= PENDING_MAX:
            raise FederationError("host %d sent more than %d lines during a clock check" % (
                h, PENDING_MAX))
        self.pending.append((h, msg))

    def _flush(self):
        """The lines kept during a clock exchange, before any line read after them."""
        while self.pending:
            h, msg = self.pending.pop(0)
            if h in self.links:
                self._handle(h, self.links[h], msg)

    def _take(self, h, c):
        try:
            msg = c.recv(time.monotonic() + 1.0)
        except _Late:
            return  # a long line (a host's counters) still coming: the rest at the next period
        except FederationError as e:
            self._lost(h, e)
            return
        self._handle(h, c, msg)

    def _word(self, v, what, report=False):
        """Host 0's word ({"status": an exit status} and, with report, {"report": text}), or
        None, said, where it does not parse."""
        if isinstance(v, dict) and _int(v.get("status")) and 0 <= v["status"] < 256 and (
                not report or isinstance(v.get("report"), str)):
            return v
        self.say("host 0 sent %s that does not parse: %.200r" % (what, v))
        return None

    def _handle(self, h, c, msg):
        if "clock" in msg and self.host != 0 and _int(msg["clock"]):
            try:  # host 0 waits, answering at once
                best = _sample(c, max(1, min(msg["clock"], SAMPLES)),
                               time.monotonic() + CLOCK_WAIT_S, self.now,
                               other=lambda m: self._stash(h, m))
                c.send({"clock_offset": best[0], "rtt": best[1]})
                if self.tell:  # after what came meanwhile (poll), not holding this thread
                    self.clock_reading = best[0], best[1]
            except _Late:
                pass  # host 0 gave up waiting: the next check
            except (FederationError, OSError) as e:
                self._lost(h, e)
            self._flush()  # what came during it, before what comes after
            return
        if self.host == 0 and ("t1" in msg or "clock_offset" in msg):
            if "t1" in msg:  # a host's samples after host 0 stopped waiting: answered still
                try:
                    c.send({"t2": self.now()})
                except OSError as e:
                    self._lost(h, e)
            else:
                self._clock_back(h, msg)
            return
        if "t2" in msg and self.host != 0:
            return  # the answer to a sample given up on
        if "start" in msg and self.host != 0:
            self.started.set()
            return
        if "end" in msg and self.host != 0:
            w = self._word(msg["end"], "an end of the MPI job")
            self.end = w["status"] if w else None
            self.end_got.set()
            return
        if "ready" in msg and self.host == 0:
            try:
                got = check_ready(msg["ready"], h, self.host_vars)
            except FederationError as e:
                got = e
            with self.got:
                self.ready[h] = got
                self.got.notify_all()
            return
        if "counters_ok" in msg and self.host != 0:
            self.acked.set()
            return
        if "verdict" in msg and self.host != 0:
            self.verdict = self._word(msg["verdict"], "a verdict", report=True)
            self.verdict_got.set()
            return
        if "status" in msg and self.host == 0:
            try:
                self.snapshots[h] = (time.time(), check_status(msg["status"], h))
            except FederationError as e:
                self.say("status: %s sent %s: left out of simfabric status" % (c.who, e))
                return
            self.write_hosts()
            return
        if "counters" in msg and self.host == 0:
            try:
                got = check_counters(msg["counters"], h)
            except FederationError as e:
                self.say("counters: %s sent counters that do not parse (%s): stats.json has "
                         "the other hosts' only" % (c.who, e))
                return
            try:  # samples that do not parse cost only themselves, not the counters
                got += (check_series(msg["counters"].get("series")),)
            except FederationError as e:
                self.say("series: %s sent samples that do not parse (%s): series.json has the "
                         "other hosts' only" % (c.who, e))
                got += (None,)
            with self.got:
                self.counters[h] = got
                self.got.notify_all()
            try:
                c.send({"counters_ok": True})
            except OSError:
                pass  # it has gone: it closes without the word, having sent them
            return
        try:
            ev = check_event(msg)
        except FederationError as e:
            self.links.pop(h, None)
            self.say("fault relay: %s sent %s: that link is dropped" % (c.who, e))
            return
        if self._note(ev["from"], ev):
            self.told[_key(ev)] = (ev["from"], [], {0})
            self.queue[0].append((ev, ev["from"]))
            if self.host == 0:
                self._send(msg, skip=h)

    def poll(self):
        with self.got:
            out, self.outbox = self.outbox, []
        for msg, sent in out:
            self._send(msg)
            sent.set()
        if self.host == 0 and self.offsets and time.monotonic() >= self.next_clock:
            self._clock_check()
        self._flush()
        if self.clock_reading:
            reading, self.clock_reading = self.clock_reading, None
            tell_daemon(self.sockets[0], *reading, say=self.say)
        fl = _list(self.sockets[0])
        if self.host != 0 and time.monotonic() >= self.next_status:
            self.next_status = time.monotonic() + self.status_every
            self._send_status(fl)
        for ev in _events(fl):
            if self._note(self.host, ev):
                self._send(dict(ev, **{"from": self.host}))
                self.say((HERE[ev["op"]] + ": sent to the other hosts") % (
                    ev["id"], ev["name"], self.host, ev["at_ns"] / 1e6))
        while self.links:
            ready = select.select([c.sock for c in self.links.values()], [], [], 0)[0]
            if not ready and not any(b"\n" in c.buf for c in self.links.values()):
                break  # nothing to read, and no whole line left in a buffer
            for h, c in list(self.links.items()):
                if c.sock in ready or b"\n" in c.buf:
                    self._take(h, c)
        self._drain(0)

    def _send_status(self, fl):
        """Another host: its daemon's show and fault list (fl) to host 0's agent."""
        try:
            show = sfctl.show(self.sockets[0], timeout=2.0)
            st = sfctl.stats(self.sockets[0], timeout=2.0)
        except (sfctl.CtlError, OSError):
            return  # the daemon is going: the run is ending
        self._send({"status": {"host": self.host, "show": show, "faults": fl, "stats": st}})

    def write_hosts(self):
        """Host 0: the run's hosts file (write_hosts), its own daemon's socket and the others'
        last states."""
        if self.status_dir:
            try:
                write_hosts(self.status_dir, self.nhosts, {0: self.sockets[0]},
                            dict(self.snapshots))
            except OSError as e:  # the run directory went: say it once, write no more
                self.say("status: cannot write %s in %s: %s" % (STATUS_FILE, self.status_dir,
                                                                 e))
                self.status_dir = None

    def _where(self, hosts):
        return "here"

    def _host_name(self, k):
        return "here (host %d)" % self.host

    def stop(self):
        super().stop()
        for c in list(self.links.values()):
            try:  # our last lines go before the close (host 0's word on the counters is what
                c.sock.shutdown(socket.SHUT_WR)  # says they arrived)
            except OSError:
                pass
            c.sock.close()
