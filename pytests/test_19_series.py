# SPDX-License-Identifier: MIT
"""Seeing the fabric live: every link's traffic over time (simfabricd's sampler, op=series,
`simfabric series`) and its queueing-delay histogram (op=stats, `simfabric stats`), checked
against what the harness sent over modelled fabrics; and the sampler's errors. CPU only."""
import json
import os
import subprocess
import sys

import pytest

import sfctl
import simfabric_pytest

ROOT = simfabric_pytest.ROOT
CLI = os.path.join(ROOT, "tools", "simfabric")
SCEN = os.path.join(ROOT, "scenarios")
EOPNOTSUPP, EINVAL = 95, 22
PER_LINE = 40  # links per line of op=series (sim/srv_look.c SRV_SERIES_LINKS)

# 105 nodes on one switch: 210 directed links, 6 lines per sample (the last of 10 links), so
# one reply (256 lines) holds 42 samples. 0.25 Gb/s, so that four flows of 16 MiB stream for about 540 ms: with a
# sample every ms (or every few, on a busy machine), many more samples than one reply holds.
MANY = """name: many-links
fabric:
  defaults:
    link: {rate_gbps: 0.25}
  nodes: {count: 105, name: "node{i}"}
  switches:
    - {name: sw0, ports: 128}
  links:
    - ends: [[%s], sw0]
""" % ", ".join("node%d" % i for i in range(105))
NLINKS, CHUNKS = 210, 6


def cli(*args, timeout=60):
    return subprocess.run([sys.executable, CLI] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout)


def link_id(fb, src, dst):
    return [l["id"] for l in fb["links"] if (l["from"], l["to"]) == (src, dst)][0]


def test_19_01_samples_add_up_to_the_link_counters_page_by_page(harness, fabric_factory,
                                                                 tmp_path):
    sc = tmp_path / "many.yaml"
    sc.write_text(MANY)
    f = fabric_factory(args=["--scenario", str(sc), "--sample-ms", "1"])
    r = harness(nranks=4, tests="flows", fabric=f, timeout=60,
                extra=["--flows", "0>1,1>2,2>3,3>0", "--flow-bytes", "16M", "--flow-msg",
                       "256K", "--max-bytes", "1M"])
    r.check_ok()
    st = sfctl.stats(f.socket)  # every channel is closed: the links are idle
    se = sfctl.series(f.socket)
    assert (se["links"], se["period_ns"], se["first"]) == (NLINKS, 1000000, 0), se
    samples = se["samples"]
    assert [s["seq"] for s in samples] == list(range(se["taken"])) and len(samples) > 100
    # what every link carried, sample by sample, is what op=stats counted
    for i in range(NLINKS):
        assert sum(s["bytes"][i] for s in samples) == st[i]["bytes"], (i, st[i])
    assert sum(1 for l in st.values() if l["bytes"]) == 8  # 4 flows, 2 hops each
    # in fabric time, one after the other, each after the interval it covers
    for a, b in zip(samples, samples[1:]):
        assert b["dt_ns"] > 0 and b["t_ns"] - b["dt_ns"] >= a["t_ns"], (a["seq"], b)
    assert samples[0]["dt_ns"] > 0 and samples[-1]["t_ns"] <= se["now_ns"]
    assert sum(1 for s in samples if any(s["bytes"])) > 100, "the flows' 540 ms, ms by ms"
    # the pages by hand: line p is sample p // CHUNKS, chunk p % CHUNKS; next=<p> goes on there
    lines, skip, pages = [], None, 0
    while True:
        page = f.request("series", **({} if skip is None else {"skip": skip}))
        pages += 1
        head = dict(page)
        assert (head["links"], head["links_per_line"]) == (str(NLINKS), str(PER_LINE)), head
        lines += [(k, v) for k, v in page if k.startswith("s.")]
        if "next" not in head:
            break
        skip = head["next"]
        assert int(skip) == len(lines), (skip, len(lines))
    assert pages >= 2 and len(lines) == CHUNKS * int(head["taken"]), (pages, len(lines))
    for p, (k, v) in enumerate(lines):
        seq, c = divmod(p, CHUNKS)
        assert k == "s.%d.%d" % (seq, c), (p, k)
        nums = [int(x) for x in v.split(",")]
        s = samples[seq]
        assert nums[:2] == [s["t_ns"], s["dt_ns"]] and \
            len(nums) == 2 + min(PER_LINE, NLINKS - PER_LINE * c) and \
            nums[2:] == s["bytes"][PER_LINE * c:PER_LINE * (c + 1)], (k, v)
    with pytest.raises(sfctl.CtlError) as e:
        f.request("series", skip=len(lines) + 1)
    assert e.value.errno == EINVAL and "beyond the %d line(s)" % len(lines) in str(e.value)


def check_hist(l):
    """A link's queueing histogram against its count, sum, max and percentile bounds."""
    h = l["queue_hist"]
    assert len(h) == 40 and sum(h) == l["msgs"], l
    lo = sum(n * (1 << (b - 1) if b else 0) for b, n in enumerate(h))
    hi = sum(n * ((1 << b) - 1 if b else 0) for b, n in enumerate(h))
    assert lo <= l["queue_ns"] <= hi, l  # bucket b holds [2^(b-1), 2^b) ns, bucket 0 0 ns
    top = max([b for b, n in enumerate(h) if n] or [0])
    assert min(l["queue_max_ns"].bit_length(), 39) == top, l
    for pct, key in ((50, "queue_p50_le_ns"), (99, "queue_p99_le_ns")):
        seen, want = 0, 0
        for b, n in enumerate(h):
            seen += n
            if l["msgs"] and seen * 100 >= l["msgs"] * pct:
                want = 1 << b if b else 0
                if b == len(h) - 1:  # the last bucket has no top: the maximum bounds it
                    want = max(want, l["queue_max_ns"])
                break
        assert l[key] == want, (key, l)


def test_19_02_queueing_histogram_contended_and_not(harness, fabric_factory):
    # three senders into node3, whose downlink is the narrow one (50 Gb/s): messages queue there
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-contention.yaml")])
    r = harness(nranks=4, tests="flows", fabric=f, timeout=60,
                extra=["--flows", "0>3,1>3,2>3", "--flow-bytes", "4M", "--flow-msg", "256K",
                       "--max-bytes", "1M"])
    r.check_ok()
    fb, st = sfctl.fabric(f.socket), sfctl.stats(f.socket)
    for l in st.values():
        check_hist(l)
    down = st[link_id(fb, "sw0", "node3/0")]
    assert down["msgs"] == 48 and sum(down["queue_hist"][1:]) > 0, down
    for n in range(3):  # each uplink carries one flow; the shared downlink waits longer
        up = st[link_id(fb, "node%d/0" % n, "sw0")]
        assert up["msgs"] == 16 and up["queue_max_ns"] < down["queue_max_ns"], (up, down)
    # `simfabric stats`: the queueing columns, in us
    p = cli("stats", "--socket", f.socket)
    assert p.returncode == 0, p.stderr
    head = p.stdout.splitlines()[0].split()
    assert "P50<=" in head and "P99<=" in head and head.count("MAX") == 2, p.stdout
    row = [ln.split() for ln in p.stdout.splitlines() if "sw0 -> node3/0" in ln][0]
    # LINK FROM -> TO MSGS BYTES LOST DUPS REORD CORRUPT Q MEAN, P50, P99, MAX, LATE, ...
    assert row[10:14] == ["%.1f" % (v / 1000.0) for v in (
        down["queue_ns"] / down["msgs"], down["queue_p50_le_ns"], down["queue_p99_le_ns"],
        down["queue_max_ns"])], (row, down)
    # its NIC table: node3's NIC received the three flows (3 x 16 messages of 256 KiB)
    nic = [ln.split() for ln in p.stdout.splitlines() if ln.startswith("node3/0 ")]
    assert nic and nic[0][4:7] == ["3", "48", str(48 * 256 * 1024)], (nic, p.stdout)
    st_cli = cli("status", "--socket", f.socket)
    assert [ln.split()[4:7] for ln in st_cli.stdout.splitlines()
            if ln.startswith("node3/0 ")] == [nic[0][4:7]], st_cli.stdout
    # one message at a time over two nodes: nothing ever waits
    g = fabric_factory(args=["--scenario", os.path.join(SCEN, "hdr-2node.yaml")])
    harness(nranks=2, tests="sizes", fabric=g, extra=["--max-bytes", "1M"]).check_ok()
    st = sfctl.stats(g.socket)
    assert sum(l["msgs"] for l in st.values()) > 0
    for l in st.values():
        check_hist(l)
        assert l["queue_hist"][0] == l["msgs"] and l["queue_max_ns"] == l["queue_ns"] == 0, l


def test_19_03_simfabric_series_prints_each_busy_link_over_time(harness, fabric_factory):
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-contention.yaml"),
                             "--sample-ms", "2"])
    harness(nranks=4, tests="flows", fabric=f, timeout=60,
            extra=["--flows", "0>3", "--flow-bytes", "16M", "--flow-msg", "256K",
                   "--max-bytes", "1M"]).check_ok()
    fb, st = sfctl.fabric(f.socket), sfctl.stats(f.socket)
    busy = {l["id"] for l in fb["links"] if st[l["id"]]["bytes"]}
    p = cli("series", "--socket", f.socket, "--width", "40")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0].startswith("link sampler: a sample every 2.000 ms"), p.stdout
    rows = {int(ln.split()[0]): ln for ln in out if ln[:1].isdigit()}
    assert set(rows) == busy and len(busy) == 2, p.stdout  # node0's uplink, node3's downlink
    # PEAK: the busiest sample's rate; MEAN: over the samples from the first to the last with
    # traffic; and a time line of 40 columns, blank where nothing moved
    doc = json.loads(cli("series", "--socket", f.socket, "--json").stdout)
    smp = doc["samples"]
    busy_at = [k for k, s in enumerate(smp) if any(s["bytes"])]
    act = smp[busy_at[0]:busy_at[-1] + 1]
    for i in busy:
        assert sum(s["bytes"][i] for s in smp) == st[i]["bytes"]
        w = rows[i].split()
        link = [l for l in fb["links"] if l["id"] == i][0]
        assert w[1:4] == [link["from"], "->", link["to"]] and w[4] == "%g" % (
            link["rate_bps"] / 1e9), rows[i]
        peak = max(s["bytes"][i] * 8.0 / s["dt_ns"] for s in act)
        mean = sum(s["bytes"][i] for s in act) * 8.0 / sum(s["dt_ns"] for s in act)
        assert w[5:7] == ["%.3f" % peak, "%.3f" % mean], (rows[i], peak, mean)
        line = rows[i].split("|")[1]
        assert len(line) == 40 and line.strip() and set(line) <= set(" .:-=+*#%@"), rows[i]
    p = cli("series", "--socket", f.socket, "--all")
    assert p.returncode == 0 and sum(1 for ln in p.stdout.splitlines()
                                     if ln[:1].isdigit()) == len(fb["links"]), p.stdout


def test_19_04_no_series_on_the_ideal_fabric_or_with_sampling_off(fabric_factory, sf_env,
                                                                  tmp_path):
    ideal = fabric_factory()
    off = fabric_factory(args=["--scenario", os.path.join(SCEN, "hdr-2node.yaml"),
                               "--sample-ms", "0"])
    for f, needle in ((ideal, "the ideal fabric has no links to sample"),
                      (off, "does not sample its links (simfabricd --sample-ms 0)")):
        with pytest.raises(sfctl.CtlError) as e:
            sfctl.series(f.socket)
        assert e.value.errno == EOPNOTSUPP and needle in str(e.value), e.value
        p = cli("series", "--socket", f.socket)
        if f is ideal:  # as `simfabric stats` says it (issue 16): a sentence, exit 0
            assert p.returncode == 0 and needle in p.stdout, (p.stdout, p.stderr)
        else:
            assert p.returncode == 1 and needle in p.stderr and "errno" not in p.stderr, \
                p.stderr
    assert "link sampler" not in off.log()
    for args, needle in ((["--sample-ms", "-1"], "--sample-ms: '-1'"),
                         (["--sample-ms", "60001"], "--sample-ms: '60001' is not a number of "
                                                    "milliseconds in 0..60000"),
                         (["--sample-ms", "1.5"], "--sample-ms: '1.5'"),
                         (["--series-samples", "0"], "--series-samples: '0' is not a number of "
                                                     "samples in 1..1048576"),
                         (["--series-samples", "many"], "--series-samples: 'many'"),
                         (["--series-samples", "1048577"], "--series-samples: '1048577'")):
        p = subprocess.run([sf_env.daemon, "--socket", str(tmp_path / "x" / "s"), "--scenario",
                            os.path.join(SCEN, "hdr-2node.yaml")] + args,
                           capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and needle in p.stderr, (args, p.stderr)


def test_19_05_a_sample_the_ring_dropped_between_pages_is_left_out(monkeypatch):
    """sfctl.series() pages through op=series; a page may end inside a sample. If the ring
    drops that sample before the next page is asked for, the daemon goes on from the oldest
    sample it still keeps (docs/control-protocol.md): the half-read sample must not be
    reported, its missing links as 0 bytes."""
    head = [("errno", "0"), ("period_ns", "1000000"), ("links", "3"),
            ("links_per_line", "2"), ("capacity", "2")]
    pages = {
        # lines 0..2: sample 0 whole, then chunk 0 of sample 1; next=3
        None: head + [("taken", "2"), ("first", "0"), ("epoch_ns", "7"), ("now_ns", "30"),
                      ("s.0.0", "10,10,1,2"), ("s.0.1", "10,10,3"), ("s.1.0", "20,10,4,5"),
                      ("next", "3")],
        # before the next page, two more samples: the ring (2) dropped 0 and 1; from line 4 on
        "3": head + [("taken", "4"), ("first", "2"), ("epoch_ns", "7"), ("now_ns", "50"),
                     ("s.2.0", "30,10,7,8"), ("s.2.1", "30,10,9"), ("s.3.0", "40,10,0,1"),
                     ("s.3.1", "40,10,2")],
    }
    asked = []

    def fake_request(path, op, timeout=5.0, **keys):
        assert op == "series"
        asked.append(keys.get("skip"))
        return pages[keys.get("skip")]

    monkeypatch.setattr(sfctl, "request", fake_request)
    se = sfctl.series("/nowhere")
    assert asked == [None, "3"], asked
    got = [(s["seq"], s["t_ns"], s["bytes"]) for s in se["samples"]]
    assert got == [(0, 10, [1, 2, 3]), (2, 30, [7, 8, 9]), (3, 40, [0, 1, 2])], got


def test_19_06_lines_are_numbered_from_sample_0_after_the_ring_wraps(harness, fabric_factory):
    """skip and next count lines from sample 0, not from the oldest sample kept: after the ring
    wraps, line p is still sample p // chunks (one chunk a sample here: 8 links)."""
    f = fabric_factory(args=["--scenario", os.path.join(SCEN, "model-contention.yaml"),
                             "--sample-ms", "1", "--series-samples", "3"])
    harness(nranks=4, tests="flows", fabric=f, timeout=60,
            extra=["--flows", "0>3", "--flow-bytes", "4M", "--flow-msg", "256K",
                   "--max-bytes", "1M"]).check_ok()
    se = sfctl.series(f.socket)  # channels closed, backlogs drained: the sampler is off
    taken, first = se["taken"], se["first"]
    assert first == taken - 3 > 0 and [s["seq"] for s in se["samples"]] == [
        first, first + 1, first + 2], se
    for skip, want in ((0, first), (first, first), (taken - 1, taken - 1)):
        page = f.request("series", skip=skip)  # lines before the oldest kept are skipped
        assert [k for k, _ in page if k.startswith("s.")][0] == "s.%d.0" % want, (skip, page)
    assert not [k for k, _ in f.request("series", skip=taken) if k.startswith("s.")]


def test_19_07_the_cli_names_a_sampler_value_out_of_range(tmp_path):
    """A --sample-ms or
    --series-samples the daemon would refuse is refused by the CLI first, named, with the
    range (exit 2), not as "simfabricd exited with status 2 before it was ready"."""
    sock = tmp_path / "d" / "ctl.sock"
    for args, needle in (
            (["up", "--socket", sock, "--sample-ms", "70000"],
             "--sample-ms: '70000' is not a number of milliseconds in 0..60000"),
            (["up", "--socket", sock, "--series-samples", "0"],
             "--series-samples: '0' is not a number of samples in 1..1048576"),
            (["run", os.path.join(SCEN, "job-harness-hdr.yaml"), "--sample-ms", "-1"],
             "--sample-ms: '-1' is not a number of milliseconds in 0..60000"),
            (["launch", "--nodes", "2", "--sample-ms", "x", "--", "true"],
             "--sample-ms: 'x' is not a number of milliseconds in 0..60000")):
        p = cli(*args, timeout=30)
        assert p.returncode == 2 and needle in p.stderr, (args, p.returncode, p.stderr)
    assert not sock.exists()


def test_19_08_up_says_why_the_daemon_would_not_start(tmp_path):
    """Whatever the daemon refuses (a scenario that is not there, --nics out of range), `simfabric
    up` prints the daemon's own reason, with or without --log, and leaves no socket behind."""
    sock = tmp_path / "d" / "ctl.sock"
    log = tmp_path / "up.log"
    for args, needle in (
            (["--scenario", tmp_path / "missing.yaml"], "missing.yaml: No such file or directory"),
            (["--nics", "99"], "--nics: nics_per_node: '99' is not an integer in 1..8"),
            (["--nics", "99", "--log", log], "--nics: nics_per_node: '99' is not an integer")):
        p = cli("up", "--socket", sock, *args, timeout=30)
        assert p.returncode != 0 and "before it was ready" in p.stderr, (args, p.stderr)
        assert needle in p.stderr, (args, p.stderr)
        assert not sock.exists()
    assert "(log: %s)" % log in p.stderr and needle in log.read_text()
