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
import socket
import subprocess
import time

DEFAULT_TIMEOUT_S = 120  # for every host's agent to join host 0's
SAMPLES = 16
MARGIN_NS = 1000000  # virtual time 0 is a millisecond before host 0 decided it


class FederationError(Exception):
    pass


def scenario_hash(daemon, scenario, seed=None):
    """sha256 (16 hex digits) of the resolved fabric, as `simfabricd --dump-fabric` prints it
    (byte-stable by HACKING.md's rule; the seed and the faults are in it)."""
    argv = [daemon, "--dump-fabric", "--scenario", scenario] + (
        ["--seed", str(seed)] if seed is not None else [])
    p = subprocess.run(argv, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise FederationError("cannot resolve the scenario %s: %s" % (
            scenario, p.stderr.decode(errors="replace").strip()[-500:]))
    return hashlib.sha256(p.stdout).hexdigest()[:16]


class _Lines:
    """JSON lines over a socket, with a deadline for every read."""

    def __init__(self, sock, who):
        self.sock, self.who, self.buf = sock, who, b""

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def recv(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FederationError("%s: no answer in time" % self.who)
            self.sock.settimeout(left)
            try:
                got = self.sock.recv(4096)
            except socket.timeout:
                raise FederationError("%s: no answer in time" % self.who)
            except OSError as e:
                raise FederationError("%s: %s" % (self.who, e.strerror or e))
            if not got:
                raise FederationError("%s: the connection closed" % self.who)
            self.buf += got
            if len(self.buf) > 65536:
                raise FederationError("%s: a line longer than 64 KiB" % self.who)
        line, self.buf = self.buf.split(b"\n", 1)
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
            hello = c.recv(deadline)
            h = _field(hello, "host", int, c.who)
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
            peers[h] = (c, str(hello.get("name", "?")), _field(res, "offset", int, c.who),
                        _field(res, "rtt", int, c.who))
        epoch = time.monotonic_ns() - MARGIN_NS
        for h, (c, _, _, _) in peers.items():
            c.send({"epoch": epoch})
        return {h: v[1:] for h, v in peers.items()}, epoch
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
        epoch = _field(c.recv(deadline), "epoch", int, c.who)
        return best[0], best[1], epoch
    finally:
        s.close()


def agree(host, nhosts, addr, port, digest, timeout=60.0, bind=None):
    """This host's epoch (its CLOCK_MONOTONIC ns of virtual time 0) and what was measured:
    (epoch, {host: (name, offset_ns, rtt_ns)} on host 0, or (offset_ns, rtt_ns) elsewhere).
    One host alone: now, nothing measured."""
    deadline = time.monotonic() + timeout
    if nhosts == 1:
        return time.monotonic_ns() - MARGIN_NS, {}
    if host == 0:
        return _serve(nhosts, digest, port, deadline, bind if bind is not None else addr)[::-1]
    off, rtt, epoch = _join(host, addr, port, digest, deadline)
    return epoch - off, (off, rtt)
