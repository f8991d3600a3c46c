# SPDX-License-Identifier: MIT
"""The randomized fault soak (issue 15; tools/scripts/soak.py, `make soak` runs 10^6 messages):
its 10^4-message version, and proof that it sees a message lost to a fault."""
import os
import re
import subprocess
import sys

import pytest

from test_22_daemon_limits import _read_reply, _rss_kib

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
SOAK = os.path.join(ROOT, "tools", "scripts", "soak.py")
SUMMARY = re.compile(r"soak: (\d+) messages .* (\d+) faults, (\d+) hit, (\d+) delayed .*; "
                     r"lost (\d+), wrong (\d+), early (\d+), failed by a fault (\d+)")


def soak(sf_env, tmp_path, *args):
    if sf_env.prefix:
        pytest.skip("the soak drives a build directory's programs, not an installed simfabric")
    cp = subprocess.run([sys.executable, SOAK, "--build", sf_env.build, "--work", str(tmp_path)]
                        + list(args), capture_output=True, text=True, timeout=300)
    m = SUMMARY.search(cp.stdout)
    assert m, cp.stdout + cp.stderr
    return cp, [int(x) for x in m.groups()]


def test_33_01_ten_thousand_messages_under_delay_only_faults(sf_env, tmp_path):
    """Random delay-only faults (each window under the retry budget, in a slot of its own),
    2 to 8 ranks, a seed per iteration: every message arrives, exact, never early, no fault
    fails one, and the daemon's fds come back and its RSS stays put between iterations."""
    cp, (msgs, faults, _, _, lost, wrong, early, failed) = soak(
        sf_env, tmp_path, "--messages", "10000", "--seed", "1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert msgs >= 10000 and (lost, wrong, early, failed) == (0, 0, 0, 0), cp.stdout
    # Not hit > 0: the windows count from node0's first post, but on a starved machine the
    # ranks may post nothing inside them (one message per 8 ms seen beside two CPU hogs);
    # `make soak` requires hits over 10^6 messages, and test_33_02 shows faults are seen.
    assert faults > 0, cp.stdout


def test_33_02_the_soak_reports_a_message_a_fault_lost(sf_env, tmp_path):
    """A link_down on node0's or node1's link from 1 ms after rank 0's first post to past the
    job, far over the 29.4 ms budget: rank 0's sends cross it, and its last post comes at least
    (msgs - 1) x the gap (79 ms) after its first, however loaded the machine. That message
    cannot get through; the soak must say so and exit 1, not pass."""
    cp, (_, _, _, _, lost, _, _, failed) = soak(
        sf_env, tmp_path, "--messages", "10000", "--seed", "1", "--ranks", "2", "--kinds",
        "link_down", "--window-us", "60000000")
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert lost > 0 and failed > 0 and "soak: FAIL iteration 0 (seed 1)" in cp.stderr, (
        cp.stdout + cp.stderr)


def test_33_03_unfinished_requests_held_open_give_their_memory_back(fabric_factory):
    """Red-team finding 11 as reproduced: connections each holding a partial 64 KiB request and
    never closed. They cost the daemon 96 KiB each and kept it for good (178 MB for 2000). Now
    the daemon itself cuts each one --partial-timeout-ms after its first byte, with ETIMEDOUT,
    and its heap shrinks back while the clients still hold their ends (test_22_05: after the
    clients close)."""
    import socket
    import time
    f = fabric_factory(args=["--partial-timeout-ms", "500"])
    part = b"op=show\n" + (b"k" * 30 + b"=" + b"v" * 1000 + b"\n") * 63  # < 64 KiB, unfinished
    base = _rss_kib(f.proc.pid)
    cs = []
    for _ in range(300):
        s = socket.socket(socket.AF_UNIX)
        s.connect(f.socket)
        s.sendall(part)
        cs.append(s)
    f.request("ping")  # the daemon has read what came before (one loop, in order)
    high = _rss_kib(f.proc.pid)
    assert high - base > 15000, (base, high)  # 300 x (16 KiB buffer + 80 KiB message)
    try:
        for s in cs:  # every one is answered and closed by the daemon, not by us
            r = _read_reply(s)
            assert "errno=110" in r and s.recv(1) == b"", r
        deadline = time.monotonic() + 10
        while True:
            f.request("ping")
            low = _rss_kib(f.proc.pid)
            if low - base < (high - base) // 4 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert low - base < (high - base) // 4, (base, high, low)
    finally:
        for s in cs:
            s.close()
