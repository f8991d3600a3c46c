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
import hashlib
import json
import select
import socket
import threading
import time

from . import ctl as sfctl

DEFAULT_TIMEOUT_S = 120  # for every host's agent to join host 0's
SAMPLES = 16
HELLO_TIMEOUT_S = 5  # a connection to host 0 that says nothing valid this long is dropped
PROBE_BYTES = 32 << 20  # each host sends this much to host 0: the network's bandwidth
MARGIN_NS = 1000000  # virtual time 0 is a millisecond before host 0 decided it
LINE_LIMIT = 65536  # a line of the rendezvous, at most
COUNTERS_LIMIT = 64 << 20  # ... and of a host's counters at the end of the run (NetRelay)
COUNTERS_WAIT_S = 30  # host 0's agent waits this long for the others' counters


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
        except ValueError:
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


def _serve(nhosts, digest, port, deadline, bind):
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
            if hello.get("hash") != digest:
                why = "scenario mismatch: %s has %s; host 0 (%s) has %s" % (
                    c.who, hello.get("hash"), socket.gethostname(), digest)
                c.send({"error": why})
                s.close()
                raise FederationError(why)
            c.send({"ok": True})
            for _ in range(SAMPLES):  # answer its clock samples at once
                _field(c.recv(deadline), "t1", int, c.who)
                c.send({"t2": time.monotonic_ns()})
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


def _join(host, addr, port, digest, deadline):
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
        c.send({"host": host, "name": socket.gethostname(), "hash": digest})
        c.recv(deadline)
        best = None
        for _ in range(SAMPLES):
            t1 = time.monotonic_ns()
            c.send({"t1": t1})
            t2 = _field(c.recv(deadline), "t2", int, c.who)
            t3 = time.monotonic_ns()
            if best is None or t3 - t1 < best[1]:
                best = (t2 - (t1 + t3) // 2, t3 - t1)
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


def agree(host, nhosts, addr, port, digest, timeout=60.0, bind=None):
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
                                        bind if bind is not None else addr)
        return epoch, measured, links
    off, rtt, gbps, epoch, link = _join(host, addr, port, digest, deadline)
    return epoch - off, (off, rtt, gbps), {0: link}


RELAY_PERIOD_S = 0.02


def _fired(sock):
    """{fault id: (origin_ns, name)} of the faults whose trigger has fired, by sock's daemon;
    None when it does not answer (it is going: the run is ending)."""
    try:
        fl = sfctl.faults(sock, timeout=2.0)
    except sfctl.CtlError:
        return None
    return {f["id"]: (f["origin_ns"], f.get("name", "?")) for f in fl.get("faults", [])
            if isinstance(f.get("origin_ns"), int) and f["origin_ns"] > 0}


def _fire(sock, fid, origin, name):
    """Publish one origin to sock's daemon: ("set", origin) when it took it, ("had", its own)
    when it had one, ("no", why) when it cannot take it (another fault has that id there, or
    its fault runs on the clock), None when it did not answer (try again)."""
    try:
        got = sfctl.fault_fire(sock, fid, origin, name=name, timeout=2.0)
    except sfctl.CtlError as e:
        return ("no", e.reason) if e.errno == 22 else None  # EINVAL: its word
    return ("set", origin) if got[0] else ("had", got[1])


def _outcome(say, fid, name, origin, where, res):
    """Say what a publication did where it matters: another origin there, or a refusal."""
    if res[0] == "had" and res[1] != origin:
        say("fault #%d '%s': %s had its own origin at %.3f ms, not %.3f ms: its windows differ "
            "between hosts (a trigger counted on several hosts: docs/scale-out.md, section 5)" % (
                fid, name, where, res[1] / 1e6, origin / 1e6))
    elif res[0] == "no":
        say("fault #%d '%s': %s did not take its origin: %s" % (fid, name, where, res[1]))


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_counters(doc, host):
    """(stats, faults, connections) from what host's agent sent at the end of its run, in
    sf.ctl's forms (stats' link ids ints again); FederationError naming what does not fit."""
    if not isinstance(doc, dict) or doc.get("host") != host:
        raise FederationError("not host %d's counters" % host)
    st, fl, conns = doc.get("stats"), doc.get("faults"), doc.get("connections")
    stats = {}
    if not isinstance(st, dict):
        raise FederationError("'stats' is not an object")
    for k, rec in st.items():
        if not (isinstance(k, str) and k.isdigit()) or not isinstance(rec, dict) or not all(
                _int(v) or (isinstance(v, list) and all(_int(x) for x in v))
                for v in rec.values()):
            raise FederationError("stats of link %.40r" % k)
        stats[int(k)] = rec
    if fl is not None and not (isinstance(fl, dict) and isinstance(fl.get("faults", []), list)
                               and all(isinstance(f, dict) for f in fl.get("faults", []))):
        raise FederationError("'faults' is not a fault list")
    if conns is not None and not (isinstance(conns, list) and
                                  all(isinstance(x, dict) for x in conns)):
        raise FederationError("'connections' is not a list of objects")
    return stats, fl, conns


class TriggerRelay(threading.Thread):
    """A fault's trigger fires in the fabric state of the host that owns the link it counts
    (docs/scale-out.md, section 5); its action may be another host's (a node_freeze of a node
    there, a link down on a link there). While the run lasts, this thread watches every local
    host's daemon (--local-hosts: they are all on this machine) every RELAY_PERIOD_S and
    publishes a newly fired trigger's origin to the others (op=fault verb=fire, with the
    fault's name, which the daemon checks: the first publication wins, so the fault's windows
    are the same everywhere). A daemon that does not answer is asked again at the next period.
    The action starts up to one period late on the other hosts; the origin, and so every
    window, is exact."""

    def __init__(self, sockets, say):
        super().__init__(name="sf-trigger-relay", daemon=True)
        self.sockets, self.say = list(sockets), say
        self.done = threading.Event()
        self.relayed = set()  # fault ids published everywhere (or refused with a word)
        self.pending = {}  # fault id -> (origin, name, from host, hosts still to tell)

    def poll(self):
        for h, sock in enumerate(self.sockets):
            for fid, (origin, name) in (_fired(sock) or {}).items():
                if fid not in self.relayed and fid not in self.pending:
                    self.pending[fid] = (origin, name, h, set(range(len(self.sockets))) - {h})
        for fid, (origin, name, h, left) in list(self.pending.items()):
            to = []
            for k in sorted(left):
                res = _fire(self.sockets[k], fid, origin, name)
                if res is None:
                    continue  # again at the next period
                left.discard(k)
                if res[0] == "set":
                    to.append(k)
                _outcome(self.say, fid, name, origin, "host %d" % k, res)
            if to:
                self.say("fault #%d '%s' fired on host %d at %.3f ms (fabric time): "
                         "published to host(s) %s" % (fid, name, h, origin / 1e6,
                                                      ", ".join(map(str, to))))
            if not left:
                del self.pending[fid]
                self.relayed.add(fid)

    def run(self):
        while not self.done.wait(RELAY_PERIOD_S):
            self.poll()

    def stop(self):
        self.done.set()
        self.join(timeout=5)


class NetRelay(TriggerRelay):
    """The same across real hosts (--hosts-from-env): each agent watches its own daemon and
    sends what fired (id, origin, name) to host 0's agent over the connection the rendezvous
    left open; host 0's publishes it to its daemon and forwards it to every other host's agent,
    which publishes it to its own. A line from a peer that is not a fired trigger ends that
    peer's link with a note."""

    def __init__(self, sock, host, links, say):
        super().__init__([sock], say)
        self.host, self.links = host, dict(links)
        self.local = {}  # fault id -> (origin, name, from host): to publish to our daemon
        self.counters = {}  # host 0: host -> its counters at the end of its run (check_counters)
        self.got = threading.Condition()
        self.outbox = []  # (message, threading.Event): sent by the relay's thread, the links'
        for c in self.links.values():  # only user
            c.limit = COUNTERS_LIMIT

    def _send(self, msg, skip=None):
        for h, c in list(self.links.items()):
            if h == skip:
                continue
            try:
                c.send(msg)
            except OSError:
                self.links.pop(h, None)  # that host's agent is gone: its run has ended

    def send_counters(self, stats, faults, connections, timeout=10.0):
        """Another host's agent, at the end of its run: its daemon's counters to host 0's
        agent, which merges every host's into its run's stats.json and faults.json. True once
        the relay's thread has sent them (False: not within timeout, or no link left)."""
        sent = threading.Event()
        with self.got:
            self.outbox.append(({"counters": {"host": self.host, "stats": stats,
                                              "faults": faults, "connections": connections}},
                                sent))
        return sent.wait(timeout) and bool(self.links)

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

    def _take(self, h, c):
        try:
            msg = c.recv(time.monotonic() + 1.0)
        except _Late:
            return  # a long line (a host's counters) still coming: the rest at the next period
        except FederationError as e:
            self.links.pop(h)
            if "closed" not in str(e):
                self.say("trigger relay: %s" % e)
            return
        if "counters" in msg and self.host == 0:
            try:
                got = check_counters(msg["counters"], h)
            except FederationError as e:
                self.say("counters: %s sent counters that do not parse (%s): stats.json has "
                         "the other hosts' only" % (c.who, e))
                return
            with self.got:
                self.counters[h] = got
                self.got.notify_all()
            return
        fid, origin, name, frm = (msg.get("fire"), msg.get("origin_ns"), msg.get("name"),
                                  msg.get("from"))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (fid, origin, frm)) \
                or origin <= 0 or not isinstance(name, str):
            self.links.pop(h)
            self.say("trigger relay: %s sent %.200r, not a fired trigger: that link is dropped"
                     % (c.who, msg))
            return
        if fid in self.relayed or fid in self.local:
            return
        self.local[fid] = (origin, name, frm)
        if self.host == 0:
            self._send(msg, skip=h)

    def poll(self):
        with self.got:
            out, self.outbox = self.outbox, []
        for msg, sent in out:
            self._send(msg)
            sent.set()
        for fid, (origin, name) in (_fired(self.sockets[0]) or {}).items():
            if fid not in self.relayed and fid not in self.local:
                self.relayed.add(fid)
                self._send({"fire": fid, "origin_ns": origin, "name": name, "from": self.host})
                self.say("fault #%d '%s' fired here (host %d) at %.3f ms (fabric time): sent "
                         "to the other hosts" % (fid, name, self.host, origin / 1e6))
        while self.links:
            ready = select.select([c.sock for c in self.links.values()], [], [], 0)[0]
            if not ready:
                break
            for h, c in list(self.links.items()):
                if c.sock in ready or b"\n" in c.buf:
                    self._take(h, c)
        for fid, (origin, name, frm) in list(self.local.items()):
            res = _fire(self.sockets[0], fid, origin, name)
            if res is None:
                continue  # our daemon did not answer: again at the next period
            del self.local[fid]
            self.relayed.add(fid)
            if res[0] == "set":
                self.say("fault #%d fired on host %d at %.3f ms (fabric time): published "
                         "here" % (fid, frm, origin / 1e6))
            _outcome(self.say, fid, name, origin, "this host", res)

    def stop(self):
        super().stop()
        for c in self.links.values():
            c.sock.close()
