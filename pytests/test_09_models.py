# SPDX-License-Identifier: MIT
"""The harness over the shipped scenarios' modelled fabrics: data exact, nothing early, and the
fidelity monitor and impairment counters filled. Parameters come from the daemon (op=fabric)."""
import os

import pytest

import sfctl
import simfabric_pytest

SCEN = os.path.join(simfabric_pytest.ROOT, "scenarios")

# (scenario, harness tests); ranks = the scenario's node count (at most 8).
CASES = [
    ("hdr-2node.yaml", "connect,sizes,tags,inflight,allreduce,close_inflight"),
    ("model-latency.yaml", "sizes,allreduce"),
    ("model-bandwidth.yaml", "sizes,allreduce"),
    ("model-contention.yaml", "sizes,alltoall"),
    ("model-multihop.yaml", "sizes,allreduce"),
    ("model-multirail.yaml", "connect,sizes"),
    ("model-hostlimit.yaml", "sizes"),
    ("model-jitter-normal.yaml", "sizes,allreduce"),
    ("model-jitter-table.yaml", "sizes"),
    ("model-reorder.yaml", "sizes,allreduce"),
    ("model-duplicate.yaml", "sizes"),
    ("model-loss-bernoulli.yaml", "sizes,allreduce"),
    ("model-loss-ge.yaml", "sizes"),
    ("model-loss-4state.yaml", "sizes"),
    ("roce-4node-jitter.yaml", "sizes,allreduce,alltoall"),
    pytest.param("leafspine-8node-2to1.yaml", "sizes,alltoall", marks=pytest.mark.slow,
                 id="leafspine-8node-2to1.yaml"),
]


@pytest.mark.parametrize("scenario,tests", CASES,
                         ids=[c[0] if isinstance(c, tuple) else None for c in CASES])
def test_09_01_exact_data_and_never_early(harness, fabric_factory, scenario, tests):
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, scenario)])
    fb = sfctl.fabric(f.socket)
    nranks = min(8, len(fb["nodes"]))
    prefix = fb["nodes"][0]["name"].rstrip("0123456789")
    assert [n["name"] for n in fb["nodes"][:nranks]] == ["%s%d" % (prefix, i)
                                                         for i in range(nranks)], fb["nodes"]
    r = harness(nranks=nranks, tests=tests, fabric=f,
                extra=["--max-bytes", "1048576", "--node-prefix", prefix], timeout=300)
    r.check_ok()
    st = sfctl.stats(f.socket)
    assert st, "a modelled fabric reports its links"
    assert sum(l["msgs"] for l in st.values()) > 0
    assert all(l["early"] == 0 for l in st.values()), st
    assert sum(l["late_n"] for l in st.values()) > 0, "the fidelity monitor saw no delivery"
    if scenario in ("model-loss-bernoulli.yaml", "model-loss-ge.yaml"):  # enough to see some
        assert sum(l["lost"] for l in st.values()) > 0, st
    if "duplicate" in scenario:
        assert sum(l["duplicates"] for l in st.values()) > 0, st
    if "reorder" in scenario:
        assert sum(l["reordered"] for l in st.values()) > 0, st


@pytest.mark.timing
def test_09_02_latency_is_never_below_the_model(harness, fabric_factory):
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-latency.yaml")])
    fb = sfctl.fabric(f.socket)
    model_us = fb["nodes"][0]["nics"][0]["latency_ns"] / 1000.0
    r = harness(nranks=2, tests="bench", fabric=f, extra=["--bench"], timeout=300)
    r.check_ok()
    lat = [t for t in r.tests("bench") if t["rank"] == 0][0]["metrics"]["latency_us"]
    assert lat >= model_us, (lat, model_us)
    assert lat <= model_us + 50, "far above the model: %.2f us vs %.2f us" % (lat, model_us)


@pytest.mark.timing
def test_09_03_bandwidth_is_never_above_the_model(harness, fabric_factory):
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-bandwidth.yaml")])
    fb = sfctl.fabric(f.socket)
    rate_gbps = fb["nodes"][0]["nics"][0]["speed_mbps"] / 1000.0
    r = harness(nranks=2, tests="bench", fabric=f, extra=["--bench"], timeout=300)
    r.check_ok()
    bw = [t for t in r.tests("bench") if t["rank"] == 0][0]["metrics"]["bandwidth"]
    for b in bw:
        # Payload rate: headers take their share of the wire, so strictly below the link rate.
        assert b["plugin_gbps"] * 8 <= rate_gbps * 1.001, (b, rate_gbps)


FAST = """\
name: too-fast
description: "1.6 Tb/s links and no host limit, faster than any host can copy"
fabric:
  defaults:
    link: {rate_gbps: 1600, latency_ns: 0}
    nic: {host_rate_gbps: 0, o_send_ns: 0, o_recv_ns: 0, ack_proc_ns: 0}
    switch: {latency_ns: 0}
  nodes: {count: 2, name: "node{i}"}
  switches:
    - {name: sw0, ports: 4}
  links:
    - ends: [[node0, node1], sw0]
"""


def test_09_04_a_fabric_faster_than_the_host_is_reported_loudly(harness, fabric_factory,
                                                                 tmp_path):
    sc = tmp_path / "too-fast.yaml"
    sc.write_text(FAST)
    f = fabric_factory(args=["--scenario", str(sc)])
    r = harness(nranks=2, tests="sizes", fabric=f,
                extra=["--max-bytes", "67108864", "--node-prefix", "node"], timeout=300)
    r.check_ok()
    import time
    deadline = time.monotonic() + 5
    while "fidelity:" not in f.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "fidelity:" in f.log() and "cannot emulate" in f.log(), f.log()
    st = sfctl.stats(f.socket)
    assert max(l["late_max_ns"] for l in st.values()) > 0, st


def test_09_05_corruption_lets_wrong_data_through_on_purpose(harness, fabric_factory, tmp_path):
    with open(os.path.join(SCEN, "model-corrupt.yaml")) as f:
        text = f.read().replace("corrupt: 1e-5", "corrupt: 1e-2")
    assert "corrupt: 1e-2" in text
    sc = tmp_path / "corrupt.yaml"
    sc.write_text(text)
    f = fabric_factory(args=["--scenario", str(sc)])
    r = harness(nranks=2, tests="sizes", fabric=f, extra=["--max-bytes", "4194304"], timeout=120)
    assert r.rc == 1 and "differs" in r.stderr, r.report()  # the harness catches the flipped bit
    st = sfctl.stats(f.socket)
    assert sum(l["corrupted"] for l in st.values()) > 0, st
    # Only node0's uplink corrupts: so only what rank 0 sent arrived wrong.
    bad = [ln for ln in r.stderr.splitlines() if "differs" in ln]
    assert bad and all("from rank 0" in ln for ln in bad), r.stderr


EXHAUST = """\
name: exhaust
description: "half the packets lost, an 8 us ACK timeout, one retry: messages fail"
seed: 5
fabric:
  defaults:
    link: {rate_gbps: 100, loss: {model: bernoulli, p: 0.5}}
    nic: {timeout_exp: 1, retry_count: 1}
  nodes: {count: 2, name: "node{i}"}
"""


def test_09_06_retry_exhaustion_fails_both_ends_naming_link_message_retries(harness,
                                                                            fabric_factory,
                                                                            tmp_path):
    sc = tmp_path / "exhaust.yaml"
    sc.write_text(EXHAUST)
    f = fabric_factory(args=["--scenario", str(sc)])
    r = harness(nranks=2, tests="sizes", fabric=f, timeout=60)
    assert r.rc == 1, r.report()
    assert "ncclRemoteError" in r.stderr or "remote" in r.stderr.lower(), r.report()
    warns = [ln for ln in r.stderr.splitlines() if "retry count exhausted on link" in ln]
    assert any("test (send)" in w and "ACK timeouts" in w for w in warns), r.stderr
    assert any("test (recv)" in w for w in warns), r.stderr
    assert all("message #" in w for w in warns), warns
    st = sfctl.stats(f.socket)
    assert sum(l["failed"] for l in st.values()) > 0 and sum(l["lost"] for l in st.values()) > 0
