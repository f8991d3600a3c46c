# SPDX-License-Identifier: MIT
"""The harness over the shipped scenarios' modelled fabrics: data exact, nothing early, and the
fidelity monitor and impairment counters filled. Parameters come from the daemon (op=fabric)."""
import glob
import os
import subprocess

import pytest

import sfctl
import sfmodel
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
def test_09_02_latency_is_the_model_both_sides(harness, fabric_factory):
    """8-byte ping-pong over model-latency (10 us one way): every round trip is two gated
    one-way trips, so even the fastest of the ~100 000 is at least twice the model. The fastest
    is also one that met no preemption, however loaded the machine: what it has above the model
    is the plugin's own cost per message (0.2 us here, idle or with three CPU hogs); 5 us
    admits a machine 25 times slower, and fails an emulation that adds half the model again.
    The median is what a loaded machine moves: it gets only a loose ceiling."""
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-latency.yaml")])
    fb = sfctl.fabric(f.socket)
    model_us = fb["nodes"][0]["nics"][0]["latency_ns"] / 1000.0
    r = harness(nranks=2, tests="bench", fabric=f, extra=["--bench"], timeout=300)
    r.check_ok()
    m = [t for t in r.tests("bench") if t["rank"] == 0][0]["metrics"]
    lat, fastest = m["latency_us"], m["latency_min_us"]
    print("latency: median %.3f us, fastest %.3f us, model %.3f us" % (lat, fastest, model_us))
    assert model_us <= fastest <= model_us + 5, (fastest, model_us)
    assert lat >= fastest, (lat, fastest)
    assert lat <= model_us + 50, "far above the model: %.2f us vs %.2f us" % (lat, model_us)


@pytest.mark.timing
def test_09_03_bandwidth_at_25g_is_only_a_ceiling_here(harness, fabric_factory):
    """25 Gb/s asks more than a loaded 2-core machine carries through two copies (1 GB/s was
    measured against the model's 3.1): only the ceiling can be held. test_09_12 holds both sides
    at 2 Gb/s."""
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-bandwidth.yaml")])
    fb = sfctl.fabric(f.socket)
    rate_gbps = fb["nodes"][0]["nics"][0]["speed_mbps"] / 1000.0
    r = harness(nranks=2, tests="bench", fabric=f, extra=["--bench"], timeout=300)
    r.check_ok()
    bw = [t for t in r.tests("bench") if t["rank"] == 0][0]["metrics"]["bandwidth"]
    for b in bw:
        # Payload rate: headers take their share of the wire, so strictly below the link rate.
        assert b["plugin_gbps"] * 8 <= rate_gbps * 1.001, (b, rate_gbps)


def two_nodes(tmp_path, name, description, link):
    """A scenario file of 2 nodes through one switch of no latency, with these link defaults
    (a flow mapping) and NICs without overheads or a host limit."""
    sc = tmp_path / (name + ".yaml")
    sc.write_text("""\
name: %s
description: "%s"
fabric:
  defaults:
    link: %s
    nic: {host_rate_gbps: 0, o_send_ns: 0, o_recv_ns: 0, ack_proc_ns: 0}
    switch: {latency_ns: 0}
  nodes: {count: 2, name: "node{i}"}
""" % (name, description, link))
    return str(sc)


def test_09_04_a_fabric_faster_than_the_host_is_reported_loudly(harness, fabric_factory,
                                                                 tmp_path):
    sc = two_nodes(tmp_path, "too-fast", "1.6 Tb/s links and no host limit, faster than any "
                   "host can copy", "{rate_gbps: 1600, latency_ns: 0}")
    f = fabric_factory(args=["--scenario", sc])
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
    # Only the sender knows how many ACK timeouts it took, and it says so when its test() of
    # the send fails; a rank whose receive failed first reports that and the harness stops the
    # other rank at once, so under load both may end before either tests its send (1 run in
    # hundreds, on CI): such a run is run again, up to 3 times.
    said = []
    for _ in range(3):
        r = harness(nranks=2, tests="sizes", fabric=f, timeout=60)
        assert r.rc == 1, r.report()
        assert "ncclRemoteError" in r.stderr or "remote" in r.stderr.lower(), r.report()
        warns = [ln for ln in r.stderr.splitlines() if "retry count exhausted on link" in ln]
        assert any("test (recv)" in w for w in warns), r.stderr
        assert all("message #" in w for w in warns), warns
        said.append(r.stderr)
        if any("test (send)" in w and "ACK timeouts" in w for w in warns):
            break
    else:
        assert False, "no send named its ACK timeouts in 3 runs:\n" + "\n".join(said)
    st = sfctl.stats(f.socket)
    assert sum(l["failed"] for l in st.values()) > 0 and sum(l["lost"] for l in st.values()) > 0


# ---- oversubscription: per-flow shares against the model's ---------------------------------

# (what, --flows phase) over model-oversub.yaml; the expected shares come from the dump.
OVERSUB_PHASES = [
    ("4 flows leaf0 -> leaf1: two on each leaf0 uplink", "0>4,1>5,2>6,3>7"),
    ("2 flows to even NIC gids: both on leaf0 -> spine0", "0>4,1>6"),
    ("2 flows to an even and an odd gid: one per spine", "0>4,1>5"),
    ("control: flows that stay inside their leaf", "0>1,2>3,4>5,6>7"),
]
# A flow's steady rate against its share. Idle, 2 cores running 8 ranks measure within 1.5 %;
# with one core taken by something else, within 4 %: a rank that is descheduled posts late and
# loses its turn on a shared link to the other flows (that is FIFO: the link's time is still all
# used). The sum over the flows that share a bottleneck does not depend on turns: 5 %. (An
# ASan build, 2-3 times slower, stays within them too, most of the time.)
OVERSUB_TOL = 0.10
OVERSUB_SUM_TOL = 0.05


def fifo_shares(fb, flows, msg_bytes):
    """Each flow's long-run payload rate in bit/s on the dumped fabric, every flow greedy.

    The model reserves every stage (the sending NIC's host stage, then each hop) in FIFO order,
    message by message, and a flow's next message queues behind the others' (docs/models.md), so
    a shared stage's time is split evenly among the flows that keep it busy, and a flow held back
    elsewhere leaves its part to the others: progressive filling (max-min fairness). Raise every
    flow's rate together; a stage that fills freezes the flows on it. Wire cost per payload bit
    on hop j: (S + n*hdr_bytes + hdr_first_extra + hdr_last_extra) / S for S-byte messages of n
    packets (n by the path's smallest MTU); the host stage carries payload only.
    flows: [(src node, dst node)] by index. Returns ([bit/s], [the stage that limits each])."""
    links = {l["id"]: l for l in fb["links"]}
    paths = {(p["src"], p["dst"]): p["links"] for p in fb["paths"]}
    cost, cap = [], {}
    for s, d in flows:
        hops = paths[("node%d/0" % s, "node%d/0" % d)]
        mtu = min(links[h]["params"]["mtu"] for h in hops)
        npk = max(1, -(-msg_bytes // mtu))
        c = {}
        host = fb["nodes"][s]["nics"][0]["params"]["host_rate_gbps"]
        if host:
            c[("host", s)] = 1.0
            cap[("host", s)] = host * 1e9
        for h in hops:
            p = links[h]["params"]
            if links[h]["rate_bps"]:
                c[("link", h)] = (msg_bytes + npk * p["hdr_bytes"] + p["hdr_first_extra"] +
                                  p["hdr_last_extra"]) / msg_bytes
                cap[("link", h)] = float(links[h]["rate_bps"])
        cost.append(c)
    rate, active, left = [None] * len(flows), set(range(len(flows))), dict(cap)
    limit = [None] * len(flows)
    while active:
        best = None
        for st, c in left.items():
            w = sum(cost[f][st] for f in active if st in cost[f])
            if w and (best is None or c / w < best[0]):
                best = (c / w, st)
        if best is None:  # nothing limits the rest
            for f in active:
                rate[f] = float("inf")
            break
        level, st = best
        frozen = [f for f in active if st in cost[f]]
        for f in frozen:
            rate[f], limit[f] = level, st
            for s2, k in cost[f].items():
                left[s2] -= level * k
        active -= set(frozen)
    return rate, limit


@pytest.mark.timing
def test_09_07_an_oversubscribed_spine_shares_its_uplinks_as_the_model_says(harness,
                                                                              fabric_factory):
    """Four flows from leaf0 to leaf1 share leaf0's two uplinks (two flows each): each gets
    half a link. Two flows to even NIC gids both route over spine0 (destination spreading):
    half each; to an even and an odd gid, one per spine: a whole link each. Flows inside a leaf
    get a whole link. Each flow streams the same bytes at once with 8 messages in flight; its
    receiver's steady rate (after the first window) is checked against the model's share,
    derived from the fabric dump, within OVERSUB_TOL, and the flows that share a bottleneck
    together against its capacity within OVERSUB_SUM_TOL. The daemon gets 8 MiB of staging per
    connection, so a whole window (8 x 512 KiB) fits and a sender never waits for its receiver
    to copy out."""
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-oversub.yaml"),
                             "--conn-mem", "8M"])
    fb = sfctl.fabric(f.socket)
    assert [n["name"] for n in fb["nodes"]] == ["node%d" % i for i in range(8)]
    assert {s["name"]: s.get("oversubscription") for s in fb["switches"]
            if s["name"].startswith("leaf")} == {"leaf0": 2, "leaf1": 2}, fb["switches"]
    spec = ";".join(p for _, p in OVERSUB_PHASES)
    flows = [tuple(int(x) for x in pair.split(">")) for _, p in OVERSUB_PHASES
             for pair in p.split(",")]
    phase_of = [k for k, (_, p) in enumerate(OVERSUB_PHASES) for _ in p.split(",")]
    msg = 512 << 10
    r = harness(nranks=8, tests="flows", fabric=f, timeout=60,
                extra=["--flows", spec, "--flow-bytes", "64M", "--flow-msg", str(msg)])
    r.check_ok()
    got = {}
    for t in r.tests("flows"):
        for e in t["metrics"]["flows"]:
            if e["role"] == "recv":
                got[e["flow"]] = e
    assert sorted(got) == list(range(len(flows))), sorted(got)

    # The model's shares, phase by phase (a phase's flows are the ones that run together).
    model, limit = [None] * len(flows), [None] * len(flows)
    for k in range(len(OVERSUB_PHASES)):
        idx = [i for i in range(len(flows)) if phase_of[i] == k]
        rates, limits = fifo_shares(fb, [flows[i] for i in idx], msg)
        for i, v, st in zip(idx, rates, limits):
            model[i], limit[i] = v / 1e9, (k, st)
    rows = ["%-50s %5s %9s %9s %9s %6s" % ("phase", "flow", "model", "steady", "whole",
                                          "ratio")]
    for i, (s, d) in enumerate(flows):
        e = got[i]
        rows.append("%-50s %2d>%-2d %9.4f %9.4f %9.4f %6.3f" % (
            OVERSUB_PHASES[phase_of[i]][0][:50], s, d, model[i], e["steady_gbit_s"],
            e["gbit_s"], e["steady_gbit_s"] / model[i]))
    table = "\n".join(rows)
    print("\n" + table)
    full = model[flows.index((0, 1))]
    # Slower than the model is no model error when this machine could not keep up: the fidelity
    # monitor's lateness says so (idle 2 cores: 8 % of a message's time; with two busy loops
    # beside it: 78 %). Then the flows of a phase need not overlap either (a starved rank starts
    # late), and a flow that runs alone for a while beats its share of a shared link (1.11 x,
    # the pair 1.09 x, seen beside two CPU hogs): only the whole link's rate is its ceiling.
    st = sfctl.stats(f.socket)
    late_ns = sum(l["late_sum_ns"] for l in st.values()) / max(1, sum(l["late_n"] for l in
                                                                    st.values()))
    kept_up = late_ns <= 0.25 * msg * 8 / full
    if not kept_up:
        print("deliveries %.0f us late on average: the floors are not held" % (late_ns / 1e3))
    # What the dump implies: a shared uplink halves a flow's rate, a lone one does not.
    for i in range(len(flows)):
        want = 0.5 if phase_of[i] in (0, 1) else 1.0
        assert model[i] == pytest.approx(want * full, rel=1e-9), table
    for i in range(len(flows)):
        e = got[i]
        ceil = model[i] if kept_up else full
        ratio = e["steady_gbit_s"] / model[i]
        assert e["steady_gbit_s"] <= (1 + OVERSUB_TOL) * ceil, table
        assert ratio >= 1 - OVERSUB_TOL or not kept_up, table
        # From the start, the first window's head start can add at most one window (8 of
        # 128 messages); it never goes faster than that.
        ratio = e["gbit_s"] / model[i]
        assert e["gbit_s"] <= (1 + 8 / 120 + OVERSUB_TOL) * ceil, table
        assert ratio >= 1 - 2 * OVERSUB_TOL or not kept_up, table
        assert e["corrupt_msgs"] == 0 and e["msgs"] == 128
    for b in set(limit):
        group = [i for i in range(len(flows)) if limit[i] == b]
        if len(group) < 2:
            continue
        ratio = sum(got[i]["steady_gbit_s"] for i in group) / sum(model[i] for i in group)
        assert ratio <= 1 + OVERSUB_SUM_TOL or not kept_up, (b, table)  # rates apart in time
        assert ratio >= 1 - OVERSUB_SUM_TOL or not kept_up, (b, late_ns, table)
    # What limits the flows across the spine is a shared switch-to-switch link.
    links = {l["id"]: l for l in fb["links"]}
    switches = {s["name"] for s in fb["switches"]}
    for i in range(len(flows)):
        if phase_of[i] in (0, 1):
            kind, lid = limit[i][1]
            assert kind == "link" and {links[lid]["from"], links[lid]["to"]} <= switches, \
                (flows[i], limit[i])
    # Routing as the dump says: every link carried exactly the messages of the flows whose
    # paths cross it, and nothing was delivered early.
    paths = {(p["src"], p["dst"]): p["links"] for p in fb["paths"]}
    want = {}
    for s, d in flows:
        for h in paths[("node%d/0" % s, "node%d/0" % d)]:
            want[h] = want.get(h, 0) + 128
    st = sfctl.stats(f.socket)
    assert {k: v["msgs"] for k, v in st.items() if v["msgs"]} == want
    assert all(v["early"] == 0 for v in st.values()), st


# ---- determinism: two daemon runs, the same seed, the same impairments ------------------

DETERMINISM = """\
name: determinism
description: "every impairment at rates a short run sees many times; GE loss on node3's uplink"
seed: 21
fabric:
  defaults:
    link:
      rate_gbps: 10
      loss: {model: bernoulli, p: 0.01}
      jitter: {dist: normal, sd_ns: 200}
      reorder: 0.01
      reorder_delay_ns: 2000
      duplicate: 0.005
      corrupt: 0.002
    nic: {timeout_exp: 4}
  nodes: {count: 4, name: "node{i}"}
  switches:
    - {name: sw0}
  links:
    - ends: [[node0, node1, node2], sw0]
    - ends: [node3, sw0]
      a_to_b: {loss: {model: ge, p: 0.02, r: 0.3, bad: 0.5, good: 0}}
"""
# node0's uplink carries two connections at once (Bernoulli draws are keyed by connection and
# message, so the interleaving does not matter); node3's GE uplink, whose Markov chain advances
# in packet order on the link, carries one connection at a time, so that order is fixed too.
DET_FLOWS = "0>1,0>2,1>0,2>3,3>1;1>2,2>1,3>0"
DET_KEYS = ("msgs", "bytes", "packets", "lost", "timeouts", "duplicates", "reordered",
            "corrupted", "failed")


def test_09_08_the_same_seed_gives_the_same_impairments_end_to_end(harness, fabric_factory,
                                                                    tmp_path):
    """The harness's flows set up connections one at a time in a fixed order, and send the
    same sizes and counts on each: so connection ids, and every decision keyed by (seed, link,
    connection, message, packet), repeat. Two daemons with one seed agree on every per-link
    impairment counter of op=stats and on which messages arrived corrupted (and at which byte);
    a third with another seed disagrees. Timing-derived figures (queueing, lateness) are not
    compared."""
    sc = tmp_path / "determinism.yaml"
    sc.write_text(DETERMINISM)
    runs = []
    for seed in (21, 21, 22):
        f = fabric_factory(args=["--scenario", str(sc), "--seed", str(seed)],
                           name="seed%d" % seed)
        r = harness(nranks=4, tests="flows", fabric=f, timeout=60,
                    extra=["--flows", DET_FLOWS, "--flow-bytes", "8M", "--flow-msg", "64K",
                           "--corrupt-ok"])
        r.check_ok()
        fb = sfctl.fabric(f.socket)
        st = sfctl.stats(f.socket)
        conns = sorted((int(c["id"], 16), c["src"], c["dst"], c["msgs"], c["bytes"])
                       for c in f.show()["chans"])
        corrupt = {e["flow"]: (e["corrupt_msgs"], e["corrupt"])
                   for t in r.tests("flows") for e in t["metrics"]["flows"] if e["role"] == "recv"}
        counters = {k: tuple(v[x] for x in DET_KEYS) for k, v in st.items()}
        runs.append((fb, counters, conns, corrupt, st))
        f.stop()
    (fb, a, conns_a, bad_a, st), (_, b, conns_b, bad_b, _), (_, c, conns_c, bad_c, _) = runs
    assert fb["seed"] == 21
    # Connection ids follow the flows' order, whatever the seed.
    want = [(i + 1, "node%s/0" % s, "node%s/0" % d, 128, 8 << 20)
            for i, (s, d) in enumerate(pair.split(">") for pair in DET_FLOWS.replace(";", ",")
                                       .split(","))]
    assert conns_a == conns_b == conns_c == want, (conns_a, conns_b, conns_c)
    # Enough of every impairment happened for the comparison to mean something.
    tot = {k: sum(v[k] for v in st.values()) for k in DET_KEYS}
    assert all(tot[k] > 0 for k in ("lost", "timeouts", "duplicates", "reordered",
                                     "corrupted")), tot
    assert tot["failed"] == 0, tot
    ge = fb["nodes"][3]["nics"][0]["link_out"]
    assert st[ge]["lost"] > 0, st[ge]
    assert 0 < sum(n for n, _ in bad_a.values()) <= tot["corrupted"], (bad_a, tot)
    # Same seed: the same, counter for counter and message for message.
    assert a == b, "\n".join("link %d: %s vs %s" % (k, a[k], b[k]) for k in a if a[k] != b[k])
    assert bad_a == bad_b, (bad_a, bad_b)
    # Another seed: other decisions (the traffic is the same: msgs, bytes, packets agree).
    assert a != c and bad_a != bad_c
    assert {k: v[:3] for k, v in a.items()} == {k: v[:3] for k, v in c.items()}
    diff = sum(a[k][3:] != c[k][3:] for k in a if a[k][3:] != (0,) * 6)
    lossy = sum(1 for k in a if a[k][3:] != (0,) * 6)
    assert diff == lossy, (a, c)


# ---- load-time hazards -------------------------------------------------------------------

HANG = """\
name: hang
description: "timeout_exp 0 (never) on every NIC, and node0's uplink loses packets"
fabric:
  defaults:
    nic: {timeout_exp: 0}
  nodes: {count: 2, name: "node{i}"}
  switches:
    - {name: sw0}
  links:
    - ends: [node0, sw0]
      a_to_b: {loss: {model: bernoulli, p: 1e-4}}
    - ends: [node1, sw0]
"""


def _warns(text):
    return [ln.split(" warn: ", 1)[1] for ln in text.splitlines() if " warn: " in ln]


def test_09_09_an_infinite_ack_timeout_on_a_lossy_path_is_warned_about_at_load(
        sf_env, fabric_factory, tmp_path):
    sc = tmp_path / "hang.yaml"
    sc.write_text(HANG)
    p = subprocess.run([sf_env.daemon, "--check", "--scenario", str(sc)], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 0 and " ok: fabric explicit 'hang'" in p.stdout, (p.stdout, p.stderr)
    w = _warns(p.stderr)
    # Only node0's uplink is lossy, and only node0 sends over it.
    assert len(w) == 1, p.stderr
    assert w[0].startswith("%s: link 0 (node0/0 -> sw0, loss bernoulli, 0.01 %% of packets) "
                           "carries traffic from node0-nic0 with timeout_exp 0 (an infinite "
                           "ACK timeout)" % sc), w[0]
    assert "never recovered" in w[0] and "timeout_exp of 1..31" in w[0], w[0]
    # The daemon serving it says the same in its log, before it listens.
    f = fabric_factory(args=["--scenario", str(sc)])
    assert [x for x in _warns(f.log()) if "timeout_exp 0" in x] == w, f.log()

    # Retries that run out: the exhaustion scenario of test_09_06 (p 0.5, retry_count 1).
    ex = tmp_path / "exhaust.yaml"
    ex.write_text(EXHAUST)
    p = subprocess.run([sf_env.daemon, "--check", "--scenario", str(ex)], capture_output=True,
                       text=True, timeout=10)
    w = _warns(p.stderr)
    assert p.returncode == 0 and len(w) == 4, p.stderr  # both directions of both cables
    assert all("retry_count 1: about one packet in 4 is lost 2 times in a row" in x
               for x in w), w


@pytest.mark.parametrize("name", sorted(os.path.basename(p) for p in
                                        glob.glob(os.path.join(SCEN, "*.yaml"))))
def test_09_10_a_shipped_scenario_warns_only_when_it_expects_to_fail(sf_env, fabric_factory,
                                                                     name):
    path_ = os.path.join(SCEN, name)
    p = subprocess.run([sf_env.daemon, "--check", "--scenario", path_], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    if _warns(p.stderr):
        fb = sfctl.fabric(fabric_factory(args=["--scenario", path_]).socket)
        assert (fb.get("expect") or {}).get("failure"), (
            "%s warns at load but its expect: does not say it fails:\n%s" % (name, p.stderr))


# ---- the "never early" monitor can count ------------------------------------------------------

SLOW_LINKS = """\
name: slow-links
description: "2 ms per link direction, unlimited rate: 4 ms one way"
fabric:
  defaults:
    link: {rate_gbps: 0, latency_ns: 2000000}
    nic: {host_rate_gbps: 0, o_send_ns: 0, o_recv_ns: 0, ack_proc_ns: 0}
  nodes: {count: 2, name: "node{i}"}
"""


def test_09_11_a_plugin_that_skips_the_gate_is_counted_early(harness, fabric_factory, sf_env,
                                                             tmp_path):
    """Every `early == 0` above means something only if the monitor can count: the plugin built
    with CHAN_INJECT_EARLY (build/inject/, sim/chan.c) lets each receive through as soon as its
    bytes are in, without waiting for the model's time. Over a route of 50 ms one way the
    receiver's monitor, which checks each completion against the sender's post time plus the
    idle route's time (not against the gate's own number), counts them early, and `op=stats`
    reports it per link. The data is still exact: only the timing is wrong."""
    plugin = os.path.join(sf_env.build, "inject", "libnccl-net-simfabric.so")
    sf_env.require(plugin)
    sc = two_nodes(tmp_path, "slow-links", "25 ms per link direction, unlimited rate",
                   "{rate_gbps: 0, latency_ns: 25000000}")
    f = fabric_factory(args=["--scenario", sc])
    r = harness(nranks=2, tests="sizes", fabric=f, plugin=plugin,
                extra=["--max-bytes", "65536", "--node-prefix", "node"], timeout=120)
    r.check_ok()
    st = sfctl.stats(f.socket)
    delivered = sum(l["early"] + l["late_n"] for l in st.values())
    early = sum(l["early"] for l in st.values())
    # A receive is early unless its process was kept off the CPU for the whole 50 ms the model
    # wants after its bytes are in. With a route of 4 ms, 19 of 32 were (make test-stress: two
    # CPU hogs and the suite on 2 cores, where a runnable rank waits several slices of 3-6 ms);
    # 50 ms is several times the longest such wait seen, so most receives are early. (The
    # ACK timeout, 4.3 s, is far above the 100 ms round trip: no retries.)
    assert delivered > 0 and early >= delivered // 2, (early, delivered, st)


@pytest.mark.timing
def test_09_12_bandwidth_at_2g_is_the_model_both_sides(harness, fabric_factory, tmp_path,
                                                       request):
    """The bench's stream (8 sends in flight, each size for at least 0.5 s) over 2 Gb/s links
    without latency: the model reserves each message on the links at its post, so with 7 more
    reserved behind the one on the wire the links never idle unless the sender is kept off its
    CPU longer than 7 messages take: 29 ms at 1 MiB, 470 ms at 16 MiB, longer than any scheduler
    slice. What a loaded machine still costs is the receiver's lateness on the last message, one
    slice at most of a run of 0.5 s or more. So at 16 MiB the receiver's rate is the payload rate
    (sfmodel.hop: the link rate less one header per packet) within 10 % below, and the gate
    allows nothing above it (0.2 %: the first/last headers are left out, and the two ranks'
    clocks start a barrier apart). At 1 MiB each message also waits on copy threads that share
    the rank's CPU with whatever else runs (0.94 with three CPU hogs, 0.999 idle): 25 % below. At
    64 KiB the 7 messages ahead are 1.8 ms, and those waits are most of a message's time (0.38
    idle): a ceiling only."""
    sc = two_nodes(tmp_path, "bw-2g", "2 Gb/s links, no latency", "{rate_gbps: 2, latency_ns: 0}")
    f = fabric_factory(args=["--scenario", sc])
    fb = sfctl.fabric(f.socket)
    model = sfmodel.hop(fb, "node0", "node1").bw / 1e9
    assert model == pytest.approx(0.25 * 4096 / (4096 + fb["links"][0]["params"]["hdr_bytes"]))
    r = harness(nranks=2, tests="bench", fabric=f, extra=["--bench"], timeout=300)
    r.check_ok()
    bw = [t for t in r.tests("bench") if t["rank"] == 0][0]["metrics"]["bandwidth"]
    rows = ["%9d B  %.4f GB/s  model %.4f  ratio %.3f" % (b["bytes"], b["plugin_gbps"], model,
                                                         b["plugin_gbps"] / model) for b in bw]
    print("\n" + "\n".join(rows))
    assert sorted(b["bytes"] for b in bw) == [64 << 10, 1 << 20, 16 << 20], rows
    # The floors assume the ranks get their CPU most of the time. Beside six CPU hogs on 2 cores
    # (make test-stress plus other suites) 1 MiB measured 0.31 and 16 MiB 0.86: no model error,
    # the receiver was late. The fidelity monitor says when: the mean lateness of a delivery
    # over a quarter of a 1 MiB message's time (as test_09_07). -m timing holds them always.
    st = sfctl.stats(f.socket)
    late_ns = sum(l["late_sum_ns"] for l in st.values()) / max(1, sum(l["late_n"] for l in
                                                                    st.values()))
    kept_up = late_ns <= 0.25 * (1 << 20) / model or request.config.getoption("-m") == "timing"
    if not kept_up:
        print("deliveries %.0f us late on average: the floors are not held" % (late_ns / 1e3))
    for b in bw:
        ratio = b["plugin_gbps"] / model
        assert ratio <= 1.002, rows  # the gate: never faster than the model, loaded or not
        assert ratio >= {64 << 10: 0, 1 << 20: 0.75, 16 << 20: 0.90}[b["bytes"]] or \
            not kept_up, (rows, late_ns)


JITTER = """\
name: jitter-end-to-end
description: "5 us per hop, unlimited rate, and (with jitter) uniform jitter of sd 50 us per hop"
seed: 7
fabric:
  defaults:
    link: {rate_gbps: 0, latency_ns: 5000%s}
    nic: {host_rate_gbps: 0, o_send_ns: 0, o_recv_ns: 0, ack_proc_ns: 0}
  nodes: {count: 2, name: "node{i}"}
"""


@pytest.mark.timing
def test_09_13_jitter_moves_real_deliveries_as_the_model_says(harness, fabric_factory, tmp_path):
    """Jitter end to end (the model's own tests are unit tests): an 8-byte ping-pong over two
    hops of uniform jitter (sd 50 us: each hop 0..173 us, one-sided) against the same fabric
    without it, run back to back. A one-way trip then has 2 hops of jitter, a median of
    173 us above the plain run's; the machine's own noise is in both runs, so their difference
    is the jitter's. Held to half and twice that, and the fastest trip never below the
    model."""
    def run(extra, name):
        path = tmp_path / name
        path.write_text(JITTER % extra)
        f = fabric_factory(args=["--scenario", str(path)])
        model_us = sfctl.fabric(f.socket)["nodes"][0]["nics"][0]["latency_ns"] / 1000.0
        r = harness(nranks=2, tests="bench", fabric=f, extra=["--bench", "--max-bytes", "65536"],
                    timeout=300)
        r.check_ok()
        m = [t for t in r.tests("bench") if t["rank"] == 0][0]["metrics"]
        return model_us, m["latency_us"], m["latency_min_us"], m["latency_round_trips"]
    model0, med0, min0, n0 = run("", "plain.yaml")
    model1, med1, min1, n1 = run(", jitter: {dist: uniform, sd_ns: 50000}", "jitter.yaml")
    added = med1 - med0
    print("one way: plain median %.1f us (fastest %.1f, %d trips); jittered median %.1f us "
          "(fastest %.1f, %d trips); model %.1f us; the jitter added %.1f us (model 173.2)" % (
              med0, min0, n0, med1, min1, n1, model1, added))
    assert min0 >= model0 and min1 >= model1, (min0, model0, min1, model1)
    assert 0.5 * 173.2 <= added <= 2 * 173.2, added
    assert n1 >= 100, n1
