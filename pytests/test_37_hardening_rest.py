# SPDX-License-Identifier: MIT
"""What issue 15 still lacked: red-team finding 5 at the protocol's level. A daemon that cannot
see its clients' pids (another pid namespace: SO_PEERCRED says 0) keeps one session per hello,
tied to its connection; listen and connect name theirs by the token of the hello's reply, and a
fault that would signal such a session says it cannot, and never signals pid 0 (the daemon's
own process group)."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

import sfctl

SCN = "scenarios/hdr-2node.yaml"


@pytest.fixture
def blind_daemon(sf_env, tmp_path):
    """A daemon in a pid namespace of its own, over SCN (nodes node0 and node1), in a session
    of its own: a kill(0, ...) of the daemon's reaches only it and unshare. Yields (sock, log)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) to start a daemon in a pid namespace of its own")
    d = tmp_path / "ns"
    d.mkdir(mode=0o700)
    sock, logp = str(d / "ctl.sock"), str(d / "d.log")
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    with open(logp, "wb") as log:
        p = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sf_env.daemon,
                              "--socket", sock, "--scenario", os.path.join(root, SCN)],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        sfctl.wait_ready(sock, timeout=10)
        yield sock, logp
    finally:
        p.kill()  # --kill-child: the daemon, pid 1 of its namespace, goes with it
        p.wait()


class Conn:
    """One raw protocol connection: request() sends key=value lines and reads one reply."""

    def __init__(self, sock):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(10)
        self.s.connect(sock)
        self.buf = b""

    def request(self, **kv):
        self.s.sendall("".join("%s=%s\n" % kv_ for kv_ in kv.items()).encode() + b"\n")
        while b"\n\n" not in self.buf:
            d = self.s.recv(65536)
            assert d, "the daemon closed the connection"
            self.buf += d
        msg, self.buf = self.buf.split(b"\n\n", 1)
        return dict(l.split("=", 1) for l in msg.decode().splitlines())

    def close(self):
        self.s.close()


def hello(sock, node):
    c = Conn(sock)
    r = c.request(op="hello", node=node, pid=os.getpid(), version=1, client="test37")
    return c, r


def test_37_01_sessions_without_visible_pids_go_by_their_token(blind_daemon):
    """Finding 5: every peer was pid 0, so the second hello got EEXIST and any pid-0
    connection acted for the first session. Now two hellos from processes the daemon cannot
    see both hold sessions, a listen names its session by token, a token that is no live
    session's is refused by value, and a listen that names none is told what to send."""
    sock, logp = blind_daemon
    a, ra = hello(sock, "node0")
    b, rb = hello(sock, "node1")
    try:
        assert ra["errno"] == "0" and rb["errno"] == "0", (ra, rb)
        assert ra["session"] != rb["session"], (ra, rb)
        assert "the socket says pid 0" in open(logp).read()  # the premise
        # a listen acts for the session it names, whichever that is
        listens = []
        for i, r in enumerate((ra, rb)):
            listens.append(Conn(sock))
            rep = listens[-1].request(op="listen", listener="0x%x" % (0x3700 + i), nic=0,
                                      session=r["session"])
            assert rep["errno"] == "0", rep
        show = sfctl.show(sock)
        assert show["sessions"] == 2 and show["listeners"] == 2, show
        for lc in listens:
            lc.close()
        bad = Conn(sock).request(op="listen", listener="0x37ff", nic=0,
                                 session="0x1234567890abcdef")
        assert bad["errno"] != "0" and "session='0x1234567890abcdef'" in bad["error"], bad
        none = Conn(sock).request(op="listen", listener="0x37fe", nic=0)
        assert none["errno"] != "0" and "session=" in none["error"], none
        # the session ends with its connection: its token is then refused
        a.close()
        for _ in range(200):
            late = Conn(sock).request(op="listen", listener="0x37fd", nic=0,
                                      session=ra["session"])
            if late["errno"] != "0":
                break
            time.sleep(0.02)
        assert late["errno"] != "0" and "no live session" in late["error"], late
    finally:
        a.close()
        b.close()


def test_37_02_a_token_cannot_act_for_another_visible_pid(fabric):
    """A daemon that sees pids keeps them: a connection of pid P that names pid Q's session is
    refused, naming both (the token alone is not a key to another process's session)."""
    c, r = hello(fabric.socket, "t37-a")
    try:
        assert r["errno"] == "0" and r["session"].startswith("0x"), r
        # this process's own token works ...
        ok = Conn(fabric.socket).request(op="listen", listener="0x3710", nic=0,
                                          session=r["session"])
        assert ok["errno"] == "0", ok
        # ... and a child process presenting it is refused
        code = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]);"
                "s.sendall(b'op=listen\\nlistener=0x3711\\nnic=0\\nsession=%s\\n\\n');"
                "print(s.recv(4096).decode())" % r["session"])
        out = subprocess.run(["/usr/bin/python3", "-c", code, fabric.socket],
                             capture_output=True, text=True, timeout=30).stdout
        assert "errno=1\n" in out and ("is pid %d's" % os.getpid()) in out, out
    finally:
        c.close()


def test_37_03_a_fault_never_signals_a_session_it_cannot_see(blind_daemon):
    """Finding 5: signalling a session of pid 0 would be kill(0, ...): the daemon's own process
    group. A process that joins a frozen node, and a node_kill of its node, are logged as
    impossible, and the daemon keeps serving."""
    sock, logp = blind_daemon
    ids, _ = sfctl.fault_apply(sock, "{name: ice, action: node_freeze, node: node1}")
    c, r = hello(sock, "node1")
    try:
        assert r["errno"] == "0", r
        sfctl.fault_apply(sock, "{name: axe, action: node_kill, node: node1}")
        assert dict(sfctl.request(sock, "ping", timeout=5))["errno"] == "0"
        text = open(logp).read()
        assert "cannot see its pid to stop it" in text, text[-3000:]
        assert "cannot send SIGKILL to the session of hello pid %d" % os.getpid() in text, \
            text[-3000:]
    finally:
        c.close()


VICTIM = """import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'op=hello\\nnode=node1\\npid=%d\\nversion=1\\nclient=victim\\n\\n' % os.getpid())
print(s.recv(4096).decode().replace("\\n", " "), flush=True)
time.sleep(60)
"""


def test_37_04_a_killed_mps_client_stays_stopped_until_its_kill(sf_env, tmp_path):
    """node_kill of an MPS client stops it at once and kills it after MPS's terminate_client
    (sim/mpskill.h); MPS here never answers, so the kill comes at the helper's bound (5 s).
    Meanwhile a node_freeze of the same node ends, and its SIGCONT must not wake the victim
    (it would see MPS end its work and die of that first)."""
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    mps = tmp_path / "mps"
    mps.mkdir()
    ctl = socket.socket(socket.AF_UNIX)  # the control socket MPS would have
    ctl.bind(str(mps / "control"))
    tool = mps / "nvidia-cuda-mps-control"
    tool.write_text("#!/bin/sh\nread cmd\ncase $cmd in get_server_list) echo 4242;;\n"
                    "terminate_client*) exec sleep 8;;\nesac\n")
    tool.chmod(0o755)
    sock, logp = str(d / "ctl.sock"), str(d / "d.log")
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    env = dict(os.environ, PATH="%s:%s" % (mps, os.environ.get("PATH", "/usr/bin:/bin")))
    with open(logp, "wb") as log:
        daemon = subprocess.Popen([sf_env.daemon, "--socket", sock, "--scenario",
                                   os.path.join(root, SCN)], stdout=log,
                                  stderr=subprocess.STDOUT, env=env, start_new_session=True)
    victim = None
    try:
        sfctl.wait_ready(sock, timeout=10)
        victim = subprocess.Popen(["/usr/bin/python3", "-c", VICTIM, sock],
                                  env=dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(mps)),
                                  stdout=subprocess.PIPE, text=True)
        assert "errno=0" in victim.stdout.readline(), open(logp).read()[-3000:]
        sfctl.fault_apply(sock, "{name: axe, action: node_kill, node: node1}")
        sfctl.fault_apply(sock, "{name: ice, action: node_freeze, node: node1, for: 200ms}")
        time.sleep(1.0)  # the freeze has ended: its SIGCONT was due 800 ms ago
        with open("/proc/%d/stat" % victim.pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        assert state == "T", ("the victim is %s, not stopped" % state,
                              open(logp).read()[-3000:])
        t0 = time.monotonic()
        rc = victim.wait(timeout=15)
        assert rc == -signal.SIGKILL and time.monotonic() - t0 < 10, rc
        text = open(logp).read()
        assert "MPS did not answer within 5 s: SIGKILL without it" in text, text[-3000:]
    finally:
        if victim and victim.poll() is None:
            victim.kill()
            victim.wait()
        daemon.terminate()
        daemon.wait(timeout=10)
        ctl.close()
