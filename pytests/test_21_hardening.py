# SPDX-License-Identifier: MIT
"""The red-team findings of December 2026 (issue 15), each held by a test that failed before
its fix: who serves the socket, `simfabric up` over a running daemon, half-closed clients, the
ideal fabric's node table, pid namespaces, refused hellos, and the low ones."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import sfctl

NOBODY = 65534


def _need_second_uid():
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a daemon as a second uid (%d) with setpriv" % NOBODY)
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv (util-linux) to run a daemon as a second uid")


# The attacker's "daemon": it serves anyone and logs every byte a victim sends it (the real
# simfabricd would refuse a client of another uid; the red team's was patched not to).
FAKE = r"""
import os, socket, sys
l = socket.socket(socket.AF_UNIX); l.bind(sys.argv[1]); l.listen(16)
log = open(sys.argv[2], "a", buffering=1)
log.write("listening\n")
while True:
    c, _ = l.accept(); c.settimeout(2)
    try:
        d = c.recv(65536)
    except OSError:
        d = b""
    log.write("got %d bytes %r\n" % (len(d), d[:40]))
    try:
        c.sendall(b"errno=0\ninstance=0xbad\nnics=1\nnic.0.name=evil0\n\n")
    except OSError:
        pass
    c.close()
"""


class At:
    """A fabric for the harness fixture that is only a socket path (a daemon started here)."""

    def __init__(self, sock):
        self.socket = sock

    def env_vars(self):
        return {"SIMFABRIC_SOCKET": self.socket}


@pytest.fixture
def foreign_daemon(sf_env):
    """A server run by uid 65534 (the attacker) at a socket in its own 0700 directory, in a
    scratch directory that uid can reach; removed afterwards. Yields (proc, dir, socket, log)."""
    _need_second_uid()
    top = tempfile.mkdtemp(prefix="sf-redteam-")
    os.chmod(top, 0o711)
    d = os.path.join(top, "d")
    os.mkdir(d, 0o700)
    os.chown(d, NOBODY, NOBODY)
    sock, log = os.path.join(d, "ctl.sock"), os.path.join(top, "fake.log")
    open(log, "w").close()
    os.chown(log, NOBODY, NOBODY)
    p = subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                          "--clear-groups", sys.executable, "-c", FAKE, sock, log],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if "listening" in open(log).read() or p.poll() is not None:
                break
            time.sleep(0.02)
        if not os.path.exists(sock):
            pytest.fail("the uid-%d server did not start (status %s)" % (NOBODY, p.poll()),
                        pytrace=False)
        yield p, d, sock, log
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(top, ignore_errors=True)


def test_21_01_clients_refuse_another_users_daemon(sf_env, foreign_daemon, harness, tmp_path):
    """Finding 1: the CLI and the plugin check who serves the socket before they send it a
    byte. Its directory first (owned by uid 65534: refused, as ssh-agent would), then, with
    the directory made ours, the server's uid by SO_PEERCRED. Before, both sent the other
    user's server their requests (and the plugin its hello, then its payload)."""
    p, d, sock, log = foreign_daemon
    env = dict(os.environ, SIMFABRIC_SOCKET=sock)
    cp = subprocess.run([sf_env.cli, "status"], env=env, capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode != 0 and "owned by uid %d" % NOBODY in cp.stderr, cp
    os.chown(d, 0, 0)  # now only the server's uid tells
    cp = subprocess.run([sf_env.cli, "status"], env=env, capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode != 0 and "served by uid %d" % NOBODY in cp.stderr, cp
    assert "Traceback" not in cp.stderr, cp.stderr
    r = harness(nranks=2, tests="connect", fabric=At(sock), timeout=60)
    assert r.rc != 0, r.report()
    assert "served by uid %d" % NOBODY in r.stderr, r.report()
    assert p.poll() is None, "the foreign server should still run"
    with open(log) as f:
        seen = f.read()
    # Connecting is how a client learns the server's uid; sending anything is the leak.
    sent = [l for l in seen.splitlines() if l.startswith("got ") and not l.startswith("got 0 ")]
    assert not sent, "the other user's server was sent:\n" + seen


def test_21_02_daemon_refuses_a_symlinked_socket_directory(sf_env, tmp_path):
    """Finding 1: check_dir used stat(), so a symlink to a good directory passed, and whoever
    owned the link could later swap the directory under the daemon."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    cp = subprocess.run([sf_env.daemon, "--socket", str(link / "ctl.sock")],
                        capture_output=True, text=True, timeout=10)
    assert cp.returncode != 0 and "symbolic link" in cp.stderr, cp
    assert not os.path.exists(str(real / "ctl.sock"))


def test_21_03_up_over_a_running_daemon_fails_naming_it(sf_env, fabric):
    """Finding 2: `simfabric up` where a daemon already serves the socket printed the new
    (already exited) daemon's pid and exited 0; with --scenario, jobs then ran on the old
    fabric. It must exit non-zero naming the running daemon's pid and what it serves, and the
    running daemon must stay as it was."""
    before = fabric.show()["instance"]
    env = dict(os.environ, SIMFABRIC_SOCKET=fabric.socket)
    cp = subprocess.run([sf_env.cli, "up", "--scenario",
                         os.path.join(sf_env.root, "scenarios", "hdr-2node.yaml")],
                        env=env, capture_output=True, text=True, timeout=60)
    assert cp.returncode != 0, cp
    assert "pid %d" % fabric.proc.pid in cp.stderr and "ideal fabric" in cp.stderr, cp
    assert "fabric up" not in cp.stdout, cp
    assert fabric.alive() and fabric.show()["instance"] == before


def test_21_04_wait_ready_wants_the_daemon_it_started(sf_env, fabric):
    """Finding 2, the race behind it: a second daemon started on a served socket exits
    ("already running"), but the old daemon answered the ping first, so the start looked fine.
    wait_ready(proc=...) must only accept an answer from proc itself."""
    p = subprocess.Popen([sf_env.daemon, "--socket", fabric.socket], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        with pytest.raises(sfctl.CtlError) as ei:
            sfctl.wait_ready(fabric.socket, timeout=10, proc=p)
        assert "exited" in str(ei.value) or "not the daemon just started" in str(ei.value)
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("op", ["ping", "show", "fabric"])
def test_21_05_a_half_closed_client_gets_its_reply(fabric, op):
    """Finding 3: `printf 'op=ping\\n\\n' | socat - UNIX-CONNECT:...` (the documented usage)
    printed nothing: the daemon read the request, then EOF, and freed the queued reply unsent.
    Twenty tries each, since the reply could win the race now and then."""
    got = 0
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(fabric.socket)
        s.sendall(b"op=%s\n\n" % op.encode())
        s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        s.close()
        got += b"errno=0\n" in buf and buf.endswith(b"\n\n")
    assert got == 20, "%d replies in 20" % got
    assert fabric.alive()


def test_21_06_a_refused_hello_is_reported_in_the_daemons_words(fabric_factory, harness, sf_env):
    """Finding 6: rank 2 of 3 on a 2-node scenario was told "no fabric daemon answers at ...
    start one with simfabricd" while the daemon ran and refused its hello with ENOENT, the same
    errno as a missing socket. The plugin must say what the daemon said."""
    f = fabric_factory(args=["--scenario", os.path.join(sf_env.root, "scenarios",
                                                        "hdr-2node.yaml")])
    r = harness(nranks=3, tests="connect", fabric=f, timeout=60)
    assert r.rc != 0, r.report()
    assert "node 'node2' is not in scenario" in r.stderr, r.report()
    assert "no fabric daemon answers" not in r.stderr, r.report()


def test_21_07_a_relative_socket_path_survives_chdir(sf_env, fabric):
    """Finding 10: a relative SIMFABRIC_SOCKET was resolved again at every connect, so after
    the process's chdir() every listen failed with ncclSystemError. It is made absolute once,
    at init."""
    here = os.path.dirname(os.path.realpath(__file__))
    e = dict(os.environ, SIMFABRIC_SOCKET="ctl.sock", SIMFABRIC_NODE="rel")
    p = subprocess.run([sys.executable, os.path.join(here, "apidrv.py"), sf_env.plugin,
                        "chdir_after_init"], env=e, cwd=os.path.dirname(fabric.socket),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)

    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["init"] == 0 and r["listen"] == 0 and r["close"] == [0, 0], r


def test_21_08_a_daemon_that_cannot_see_pids_serves_every_rank(sf_env, harness, tmp_path):
    """Finding 5: a daemon in its own pid namespace gets pid 0 from SO_PEERCRED for every
    client; sessions were per pid, so rank 0 got a session and rank 1 EEXIST ("pid 0 already
    has a session"), and later every such hello was refused. Sessions now go by the token of
    their hello's reply, so 3 ranks run the whole CPU suite through such a daemon."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) to start a daemon in a pid namespace of its own")
    d = tmp_path / "ns"
    d.mkdir(mode=0o700)
    sock = str(d / "ctl.sock")
    log = open(str(d / "d.log"), "wb")
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sf_env.daemon,
                          "--socket", sock], stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        sfctl.wait_ready(sock, timeout=10)
        r = harness(nranks=3, tests="connect,sizes,listen_reuse", fabric=At(sock), timeout=120)
        assert r.rc == 0, r.report()
        text = open(str(d / "d.log")).read()
        # the premise: the daemon did not see the ranks' pids (else this tests nothing)
        assert text.count("the socket says pid 0") == 3, text[-4000:]
    finally:
        p.kill()  # --kill-child: the daemon, pid 1 of its namespace, goes with it
        p.wait()
        log.close()


def test_21_09_the_suite_leaves_nothing_in_tmp(tmp_path_factory):
    """Issue 15: test_10 left simfabric-sleep-* run directories in /tmp. Launches without
    --run-dir put them under SIMFABRIC_RUNS, which the suite points into pytest's own tree."""
    runs = os.environ.get("SIMFABRIC_RUNS", "")
    assert runs.startswith(str(tmp_path_factory.getbasetemp())), runs
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(
        __file__))), "tools"))
    import sflaunch
    d = sflaunch.make_run_dir(None, "sleep")
    assert d.startswith(runs), d
    os.rmdir(d)
