# SPDX-License-Identifier: MIT
"""Every failure the foundation promises: a clear error, in bounded time, never a hang."""
import os
import signal
import time

import simfabric_pytest


def test_04_01_truncation_fails_both_ends_naming_both_sizes(harness):
    r = harness(nranks=2, tests="truncate", timeout=60)
    r.check_ok()
    assert "4096" in r.stderr and "1024" in r.stderr, r.report()


def test_04_02_peer_death_gives_remote_error_within_bound(harness):
    r = harness(nranks=3, tests="peer_death", extra=["--bound", "10"], timeout=60)
    r.check_ok()
    assert r.seconds < 60


LIVENESS_S = 0.1  # SIMFABRIC_LIVENESS_MS's default (plugin/net_int.h)


def test_04_03_daemon_death_gives_system_error(harness, fabric):
    """Each rank fails with ncclSystemError within SIMFABRIC_LIVENESS_MS of the daemon's death
    (docs/usage.md): its ring keeps calling test, and the plugin looks for the daemon at most once a
    period. Both clocks are CLOCK_MONOTONIC (the harness's failed_at_s, time.monotonic here).
    0.4 s more for a loaded machine, where a rank waits for its CPU a few scheduler slices;
    a check that ran once a second, or only at the next connect, would fail this (it allowed
    30 s)."""
    p = harness(nranks=2, tests="daemon_death", fabric=fabric, timeout=60, popen=True)
    line = _wait_ready(p)
    assert "READY" in line, "harness never got traffic going: %r" % line
    t0 = time.monotonic()
    fabric.kill(signal.SIGKILL)
    r = simfabric_pytest.finish(p, timeout=60)
    r.check_ok()
    after = [t["metrics"]["failed_at_s"] - t0 for t in r.tests("daemon_death")]
    print("noticed %s s after the kill" % ["%.4f" % a for a in after])
    assert len(after) == 2 and all(0 <= a <= LIVENESS_S + 0.4 for a in after), (after, r.report())


def test_04_04_no_daemon_fails_init_with_the_socket_and_the_fix(harness, fabric, tmp_path):
    missing = str(tmp_path / "nowhere" / "ctl.sock")
    r = harness(nranks=2, tests="connect", env={"SIMFABRIC_SOCKET": missing}, timeout=60)
    assert r.rc == 1, r.report()
    assert missing in r.stderr and "simfabricd" in r.stderr, r.report()


def _wait_ready(p):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if "READY" in line or not line:
            return line
    return ""


def test_04_05_daemon_stopped_cleanly_mid_run(harness, fabric):
    p = harness(nranks=2, tests="daemon_death", fabric=fabric, timeout=60, popen=True)
    line = _wait_ready(p)
    assert "READY" in line, line
    assert fabric.stop(signal.SIGTERM) == 0, fabric.log()
    r = simfabric_pytest.finish(p, timeout=60)
    r.check_ok()


INIT_SCRIPT = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
table = ctypes.c_void_p.in_dll(lib, "ncclNetPlugin_v8")
slots = (ctypes.c_void_p * 19).from_address(ctypes.addressof(table))
init = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(slots[1])
print(init(None))
"""


def test_04_06_bad_node_name_fails_init(sf_env, fabric):
    import subprocess
    import sys
    env = dict(os.environ, SIMFABRIC_SOCKET=fabric.socket, SIMFABRIC_NODE="bad name/")
    p = subprocess.run([sys.executable, "-c", INIT_SCRIPT, sf_env.plugin], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() not in ("", "0"), "init accepted a bad node name: %r" % p.stdout
    assert "bad name/" in fabric.log(), fabric.log()
    env["SIMFABRIC_NODE"] = "good-node"
    p = subprocess.run([sys.executable, "-c", INIT_SCRIPT, sf_env.plugin], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "0", (p.stdout, p.stderr, fabric.log())


def test_04_07_a_fabric_state_of_another_build_is_refused_naming_both_versions(
        harness, fabric_factory):
    """A plugin and a daemon of different builds: the shared fabric state's layout version
    (sim/core/fstate.h FST_VERSION) differs, and init fails naming both versions and what to do,
    not with strerror(EPROTONOSUPPORT). Played by rewriting the version in the daemon's region
    (the memfd every hello gets) to one this plugin does not know."""
    import mmap
    import socket
    import struct
    f = fabric_factory(args=["--scenario", os.path.join(simfabric_pytest.ROOT, "scenarios",
                                                        "hdr-2node.yaml")])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(f.socket)
    s.sendall(("op=hello\nnode=node0\npid=%d\nversion=1\nclient=plugin\n\n"
               % os.getpid()).encode())
    msg, fds, _, _ = socket.recv_fds(s, 65536, 1)
    reply = dict(ln.split("=", 1) for ln in msg.decode().split("\n\n")[0].split("\n"))
    assert reply["errno"] == "0" and len(fds) == 1, (reply, fds)
    region = mmap.mmap(fds[0], int(reply["fabric_bytes"]))
    magic, ours = struct.unpack_from("<QI", region, 0)  # struct fst_shm: magic, version
    struct.pack_into("<I", region, 8, ours + 7)
    region.close()
    os.close(fds[0])
    s.close()
    r = harness(nranks=2, tests="sizes", fabric=f, extra=["--max-bytes", "1K"])
    assert r.rc != 0, r.report()
    want = "the fabric state has layout version %d, this plugin's is %d" % (ours + 7, ours)
    assert want in r.stderr + r.stdout and "different builds" in r.stderr + r.stdout, \
        r.report()
