# SPDX-License-Identifier: MIT
"""simfabricd's lifecycle and its control protocol, including bad input of every kind."""
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

import sfctl


def raw(path, data, timeout=5.0):
    """Send raw bytes, return everything the daemon sends until it closes or goes quiet."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    s.sendall(data)
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            if buf.endswith(b"\n\n") and b"errno=" in buf:
                s.settimeout(0.3)
    except socket.timeout:
        pass
    s.close()
    return buf.decode("ascii", "replace")


def test_02_01_start_show_stop_sigterm(fabric):
    st = fabric.show()
    assert st["fabric"] == "ideal"
    assert st["nodes"] == [] and st["chans"] == []
    mode = stat.S_IMODE(os.stat(os.path.dirname(fabric.socket)).st_mode)
    assert mode == 0o700
    assert fabric.stop(signal.SIGTERM) == 0, fabric.log()
    assert not os.path.exists(fabric.socket), "socket left behind"


def test_02_02_sigint_and_op_stop(fabric_factory):
    f = fabric_factory(name="a")
    assert f.stop(signal.SIGINT) == 0, f.log()
    assert not os.path.exists(f.socket)
    g = fabric_factory(name="b")
    g.request("stop")
    g.proc.wait(10)
    assert g.proc.returncode == 0, g.log()
    assert not os.path.exists(g.socket)


def test_02_03_refuses_a_second_daemon_and_replaces_a_stale_socket(fabric, sf_env):
    p = subprocess.run([sf_env.daemon, "--socket", fabric.socket], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode != 0
    assert "already running" in p.stderr and fabric.socket in p.stderr, p.stderr
    assert fabric.show()["fabric"] == "ideal"  # the first one is untouched
    fabric.kill(signal.SIGKILL)
    fabric.proc.wait(5)
    assert os.path.exists(fabric.socket)  # stale after SIGKILL
    f2 = type(fabric)(sf_env, fabric.rundir).start()
    try:
        assert f2.show()["fabric"] == "ideal"
    finally:
        assert f2.stop() == 0


def test_02_04_refuses_an_unsafe_socket_directory(sf_env, tmp_path):
    d = tmp_path / "open"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    p = subprocess.run([sf_env.daemon, "--socket", str(d / "ctl.sock")], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode != 0
    assert str(d) in p.stderr and "0755" in p.stderr, p.stderr


def test_02_05_creates_a_missing_directory_0700(sf_env, fabric_factory, tmp_path):
    f = fabric_factory(name="fresh/deeper")
    assert stat.S_IMODE(os.stat(os.path.dirname(f.socket)).st_mode) == 0o700


def test_02_06_bad_arguments(sf_env, tmp_path):
    for args, needle in ((["--nics", "0"], "--nics"), (["--nics", "abc"], "abc"),
                         (["--conn-mem", "12"], "--conn-mem"), (["--bogus"], "--bogus")):
        p = subprocess.run([sf_env.daemon, "--socket", str(tmp_path / "x" / "s")] + args,
                           capture_output=True, text=True, timeout=10)
        assert p.returncode != 0 and needle in p.stderr, (args, p.stderr)


@pytest.mark.parametrize("data,needle", [
    (b"op=nosuchop\n\n", "nosuchop"),
    (b"nonsense without equals\n\n", "1:"),
    (b"op=hello\nBAD KEY=1\n\n", "2:"),
    (b"op=show\nk=\x01\n\n", "2:"),
    (b"op=hello\nnode=ok\npid=1\nversion=99\nclient=t\n\n", "version"),
    (b"op=hello\nnode=bad/name\npid=1\nversion=1\nclient=t\n\n", "bad/name"),
    (b"op=hello\nnode=ok\npid=1\nversion=1\nclient=t\ngpu=maybe\n\n", "gpu='maybe' is not on or off"),
    (b"op=connect\nlistener=0x1\nnic=0\n\n", "hello"),
    (b"op=close\nchan=zz\nside=send\n\n", "hello first"),
    (b"op=show\nskip=zz\n\n", "zz"),
    (b"op=" + b"x" * 2000 + b"\n\n", "1:"),
])
def test_02_07_bad_control_messages_get_a_reason(fabric, data, needle):
    reply = raw(fabric.socket, data)
    assert "errno=" in reply and "errno=0\n" not in reply, reply
    assert needle in reply, reply
    assert fabric.show()["fabric"] == "ideal"  # still serving


def test_02_08_oversized_message_is_cut_off(fabric):
    reply = raw(fabric.socket, b"op=show\n" + b"k=v\n" * 20000)
    assert "errno=" in reply and "errno=0\n" not in reply, reply
    assert fabric.alive()


def test_02_09_garbage_and_abrupt_disconnects(fabric):
    import random
    rnd = random.Random(7)
    for i in range(200):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(fabric.socket)
        s.sendall(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300))))
        s.close()
    assert fabric.show()["fabric"] == "ideal"
    assert fabric.alive()


def test_02_10_hello_creates_a_node_and_eof_removes_its_pid(fabric):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(fabric.socket)
    s.sendall(b"op=hello\nnode=alpha\npid=%d\nversion=1\nclient=test\n\n" % os.getpid())
    reply = sfctl._read_message(s, time.monotonic() + 5)
    d = dict(reply)
    assert d["errno"] == "0" and d["node"] == "alpha" and d["nics"] == "1", reply
    assert d["nic.0.name"] and int(d["nic.0.speed_mbps"]) > 0
    st = fabric.show()
    assert [n["name"] for n in st["nodes"]] == ["alpha"]
    s.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        n = fabric.show()["nodes"]
        if not n or not str(n[0].get("pids", "")):
            break
        time.sleep(0.02)
    assert not n or not str(n[0].get("pids", "")), n


HOLD_HELLO = r'''
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
gpu = ("gpu=%s\n" % sys.argv[3]) if sys.argv[3] != "-" else ""
s.sendall(("op=hello\nnode=%s\npid=%d\nversion=1\nclient=test\n%s\n" % (
    sys.argv[2], os.getpid(), gpu)).encode())
print(s.recv(4096).decode().count("errno=0"), flush=True)
sys.stdin.read()  # hold the session until the test closes our stdin
'''


def test_02_10a_status_says_which_nodes_use_the_gpu_path(fabric):
    # the plugin says gpu=on|off in its hello (SIMFABRIC_GPU); status shows it per node
    procs = []
    for node, gpu in (("g0", "on"), ("g1", "off"), ("g1", "on"), ("h", "-")):
        p = subprocess.Popen([sys.executable, "-c", HOLD_HELLO, fabric.socket, node, gpu],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "1", (node, gpu)
        procs.append(p)
    try:
        st = fabric.show()
        gpu = {n["name"]: n.get("gpu") for n in st["nodes"]}
        assert gpu == {"g0": "on", "g1": "on,off", "h": None}, st["nodes"]
        text = sfctl.format_status(st)
        assert re.search(r"^g0 +1 +on ", text, re.M) and re.search(r"^h +1 +- ", text, re.M), \
            text
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=10)


def test_02_11_nics_per_node(fabric_factory):
    f = fabric_factory(args=["--nics", "3"])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(f.socket)
    s.sendall(b"op=hello\nnode=n0\npid=%d\nversion=1\nclient=test\n\n" % os.getpid())
    d = dict(sfctl._read_message(s, time.monotonic() + 5))
    s.close()
    assert d["nics"] == "3"
    names = {d["nic.%d.name" % i] for i in range(3)}
    guids = {d["nic.%d.guid" % i] for i in range(3)}
    assert len(names) == 3 and len(guids) == 3, d


def test_02_12_scenario_errors_name_the_file_and_place(sf_env, tmp_path):
    sc = tmp_path / "bad.yaml"
    sc.write_text("fabric:\n  nodes: {count: 2, name: \"n{i}\"}\n  bogus: 1\n")
    p = subprocess.run([sf_env.daemon, "--socket", str(tmp_path / "d" / "s"), "--scenario",
                        str(sc)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert "%s:3:" % sc in p.stderr and "bogus" in p.stderr, p.stderr
    missing = tmp_path / "missing.yaml"
    p = subprocess.run([sf_env.daemon, "--socket", str(tmp_path / "d" / "s"), "--scenario",
                        str(missing)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and str(missing) in p.stderr, p.stderr


LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d)\] simfabricd\[(\d+)\] "
                      r"(error|warn|info|debug): \S")


@pytest.mark.parametrize("level", ["info", "error"])
def test_02_13_every_log_line_has_one_format_and_wall_clock_time(fabric_factory, level):
    """Every line the daemon logs, "listening on" included and at every level, is
    "[<local ISO 8601 time, microseconds, UTC offset>] simfabricd[<pid>] <level>: ...", and the time
    is the wall clock (it lines up with NCCL's and the ranks' logs)."""
    import datetime
    before = datetime.datetime.now(datetime.timezone.utc)
    f = fabric_factory(args=["--log-level", level])
    f.request("stop")
    f.proc.wait(10)
    after = datetime.datetime.now(datetime.timezone.utc)
    lines = [ln for ln in f.log().splitlines() if ln.strip()]
    assert lines and "listening on %s (fabric ideal" % f.socket in lines[0], lines
    for ln in lines:
        m = LOG_LINE.match(ln)
        assert m and int(m.group(2)) == f.proc.pid, ln
        t = datetime.datetime.fromisoformat(m.group(1))
        assert before - datetime.timedelta(seconds=1) <= t <= after, (ln, before, after)
        # The offset is the local one, as NCCL's local times have it.
        assert t.utcoffset() == t.astimezone().utcoffset(), ln
    if level == "error":
        assert len(lines) == 1, lines  # only the "listening on" line
