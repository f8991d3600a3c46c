# SPDX-License-Identifier: MIT
"""Seeing the fabric after a job: the counters `simfabric run` and `simfabric launch` leave in the
run directory on a modelled fabric (stats.json, faults.json, series.json, fabric.json), and
`simfabric report` over them (tools/sf/report.py): measured against the model, per-link
utilisation over time, the fault timeline over the links' throughput; as text always, as charts
where matplotlib imports. CPU only."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import sflaunch
import sfmodel
import simfabric_pytest

ROOT = simfabric_pytest.ROOT
CLI = os.path.join(ROOT, "tools", "simfabric")
PY = sys.executable


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except Exception:  # missing, or a broken install: the charts cannot be drawn either way
        return False


HAVE_MPL = have_matplotlib()

# 2 nodes on one switch with round numbers: B = 80 Gb/s = 10 GB/s (no headers, no host limit),
# alpha = o_send + o_recv = 2 us (no link or switch latency).
EASY = """name: report-easy
seed: 1
fabric:
  defaults:
    link: {rate_gbps: 80, latency_ns: 0, hdr_bytes: 0, hdr_first_extra: 0, hdr_last_extra: 0}
    nic: {host_rate_gbps: 0, o_send_ns: 1000, o_recv_ns: 1000}
  nodes: {count: 2, name: "node{i}"}
  switches:
    - {name: tor, latency_ns: 0}
  links:
    - ends: [[node0, node1], tor]
"""

# node0's cable flaps 4 x 5 ms (every 20 ms, from 2 ms after its first traffic) under the
# harness's faults test: 300 timed 64 KiB messages each way, every one exact.
FLAP = """name: report-flap
seed: 1
fabric:
  defaults:
    link: {rate_gbps: 25, latency_ns: 500}
    nic: {timeout_exp: 10, retry_count: 7}
  nodes: {count: 2, name: "node{i}"}
  switches:
    - {name: sw0}
  links:
    - ends: [[node0, node1], sw0]
faults:
  - {name: node0-flap, action: flap, link: [node0, sw0], after: {first_traffic: node0}, at: 2ms,
     period: 20ms, duty: 0.25, count: 4}
job:
  program: harness
  tests: [faults]
  max_bytes: 64K
  timeout_s: 60
  args: [--fault-msgs, "300", --fault-bytes, "65536", --fault-gap-us, "300", --fault-expect, ok]
"""


def cli(*args, timeout=180, env=None):
    return subprocess.run([PY, CLI] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def run_scenario(path, d):
    p = cli("run", path, "--run-dir", d, "-q", "--progress", "0")
    assert os.path.isfile(os.path.join(d, "report.json")), p.stdout + p.stderr
    return p


@pytest.fixture(scope="module")
def hdr_run(sf_env, tmp_path_factory):
    """scenarios/job-harness-hdr.yaml's harness benchmark, run once for the module. Its timing
    check may fail on a loaded machine; the counters do not depend on it."""
    d = str(tmp_path_factory.mktemp("hdr") / "run")
    p = run_scenario(os.path.join(ROOT, "scenarios", "job-harness-hdr.yaml"), d)
    return d, p


@pytest.fixture(scope="module")
def flap_run(sf_env, tmp_path_factory):
    t = tmp_path_factory.mktemp("flap")
    sc = t / "report-flap.yaml"
    sc.write_text(FLAP)
    d = str(t / "run")
    p = run_scenario(str(sc), d)
    assert p.returncode == 0, p.stdout + p.stderr
    return d, p


def section(text, head):
    """The lines of text's section head (up to the next blank line)."""
    lines = text.splitlines()
    i = lines.index(head)
    out = []
    for ln in lines[i + 1:]:
        if not ln.strip():
            break
        out.append(ln)
    return out


def test_15_01_run_leaves_counters_that_agree_with_what_the_harness_sent(hdr_run):
    d, p = hdr_run
    st, fb = load(d, "stats.json"), load(d, "fabric.json")
    assert not os.path.exists(os.path.join(d, "faults.json"))  # the fabric has none
    assert "counters in stats.json, series.json, fabric.json" in p.stdout, p.stdout
    assert fb["name"] == "job-harness-hdr" and fb["job"]["program"] == "harness"
    # per directed link: op=stats' counters with the dump's ends and rate
    names = {l["id"]: (l["from"], l["to"], l["rate_bps"]) for l in fb["links"]}
    assert sorted(l["id"] for l in st["links"]) == sorted(names)
    by = {}
    for l in st["links"]:
        assert (l["from"], l["to"], l["rate_bps"]) == names[l["id"]], l
        by[(l["from"], l["to"])] = l
    assert sum(l["msgs"] for l in st["links"]) > 0 and st["links"][0]["early"] == 0
    # one switch: what node a's NIC sent up is what the switch sent down to node b
    for a, b in (("node0/0", "node1/0"), ("node1/0", "node0/0")):
        up, down = by[(a, "ib-sw0")], by[("ib-sw0", b)]
        assert (up["msgs"], up["bytes"]) == (down["msgs"], down["bytes"]), (up, down)
        # and what that direction's connections delivered, as their receivers counted
        conns = [c for c in st["connections"] if (c["src"], c["dst"]) == (a, b)]
        assert conns and sum(c["bytes"] for c in conns) == up["bytes"], st["connections"]
        assert sum(c["msgs"] for c in conns) == up["msgs"]
    # per NIC: what its connections sent and received, and its links' sums
    nics = {n["nic"]: n for n in st["nics"]}
    assert sorted(nics) == ["node0/0", "node1/0"], st["nics"]
    for a, b in (("node0/0", "node1/0"), ("node1/0", "node0/0")):
        up, down = by[(a, "ib-sw0")], by[("ib-sw0", a)]
        assert (nics[a]["tx_msgs"], nics[a]["tx_bytes"]) == (up["msgs"], up["bytes"]), nics[a]
        assert (nics[b]["rx_msgs"], nics[b]["rx_bytes"]) == (up["msgs"], up["bytes"]), nics[b]
        assert nics[a]["up"]["packets"] == up["packets"] > 0, nics[a]
        assert nics[a]["down"]["late_n"] == down["late_n"] and nics[a]["down"]["early"] == 0
    # at least what the benchmark says it moved: rank 0 streamed the bandwidth runs and both
    # ranks exchanged the 8-byte latency round trips
    h = load(d, "harness.json")
    m = [t["metrics"] for t in h["tests"] if t["name"] == "bench" and t["rank"] == 0][0]
    rtt = m["latency_round_trips"]
    streamed = sum(b["messages"] * b["bytes"] for b in m["bandwidth"])
    assert by[("node0/0", "ib-sw0")]["bytes"] >= streamed + 8 * rtt
    assert by[("node1/0", "ib-sw0")]["msgs"] >= rtt
    # the job's span, in the fabric's time (the clock of faults.json)
    j = st["job"]
    assert j["seconds"] > 0 and 0 <= j["start_ns"] < j["end_ns"] <= st["now_ns"], j
    assert st["epoch_ns"] > 0 and not st["shared_daemon"]
    assert load(d, "report.json")["launch"]["counters"] == ["stats.json", "series.json",
                                                             "fabric.json"]
    # each link's queueing histogram (every message that entered it, counted once)
    for l in st["links"]:
        assert len(l["queue_hist"]) == 40 and sum(l["queue_hist"]) == l["msgs"], l
        assert l["queue_max_ns"] <= l["queue_ns"] and len(l["late_hist"]) == 24, l
    # and its traffic over time, on the same clock: the samples add up to its bytes
    se = load(d, "series.json")
    assert se["epoch_ns"] == st["epoch_ns"] and se["links"] == len(st["links"]), se["links"]
    for l in st["links"]:
        assert sum(x["bytes"][l["id"]] for x in se["samples"]) == l["bytes"], l
    assert j["start_ns"] <= se["samples"][0]["t_ns"] and any(
        j["start_ns"] < x["t_ns"] <= j["end_ns"] and x["bytes"][0] for x in se["samples"])


def test_15_02_text_report_has_every_section(hdr_run):
    d, _ = hdr_run
    p = cli("report", d, "--format", "text")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for head in ("measured vs model", "per-link utilisation", "connections (per channel, as "
                 "its receiver counted)", "faults"):
        assert head in out.splitlines(), out
    mv = section(out, "measured vs model")
    assert any(ln.split()[:3] == ["sendrecv", "8", "B"] for ln in mv), out
    assert any("sendrecv (stream)" in ln and "1 MiB" in ln for ln in mv), out
    # over time: payload bytes x 8 / (rate x time), the busiest sample and the mean over the
    # samples from the first to the last with traffic
    st, se = load(d, "stats.json"), load(d, "series.json")
    links = section(out, "per-link utilisation")
    assert links[0].startswith("  over time (series.json, a sample every 10.000 ms)"), links
    assert links[1].startswith("  PEAK: the busiest sample; MEAN: over the ") and \
        links[2].split()[8:10] == ["PEAK", "MEAN"], links
    peak, mean = over_time(st, se, 0)
    row = [ln for ln in links if ln.split()[:1] == ["0"]][0]
    assert "node0/0 -> ib-sw0" in row and row.split()[7:9] == [peak, mean], (row, peak, mean)
    l0 = [l for l in st["links"] if l["id"] == 0][0]  # and its queueing, in us
    assert row.split()[12:14] == ["%.1f" % (l0[k] / 1e3) for k in ("queue_p99_le_ns",
                                                                     "queue_max_ns")], row
    assert "none (no faults.json" in "\n".join(section(out, "faults")), out


def over_time(st, se, link):
    """Link's peak and mean utilisation from series.json, as the report prints them."""
    j = st["job"]
    smp = [x for x in se["samples"] if x["t_ns"] > j["start_ns"] and
           x["t_ns"] - x["dt_ns"] < j["end_ns"]]
    busy = [k for k, x in enumerate(smp) if any(x["bytes"])]
    act = smp[busy[0]:busy[-1] + 1]
    rate = [l for l in st["links"] if l["id"] == link][0]["rate_bps"]
    peak = max(x["bytes"][link] * 8e9 / x["dt_ns"] for x in act) / rate
    mean = sum(x["bytes"][link] for x in act) * 8e9 / sum(x["dt_ns"] for x in act) / rate
    return ["<0.01%" if 0 < u < 1e-4 else "%.2f%%" % (100 * u) for u in (peak, mean)]


def nccljob_doc(fb, rows):
    """An NCCL-job-like results JSON (tools/nccljob/report.c's shape) whose times are the
    model's divided by the given ratios."""
    model = sfmodel.FabricModel(fb, ["node0", "node1"])
    res = []
    for coll, nbytes, ratio in rows:
        m = sfmodel.predict(model, coll, nbytes, 2)
        t = m["time_s"] * 1e6 / ratio
        f = sfmodel.busbw_factor(coll, 2)
        res.append({"coll": coll, "bytes": nbytes, "count": nbytes // 4, "iters": 20,
                    "time_us": t, "algbw_gbps": nbytes / t / 1e3,
                    "busbw_gbps": nbytes / t / 1e3 * f, "busbw_factor": f, "ok": True,
                    "wrong": 0})
    return {"program": "simfabric-nccljob", "version": 1, "view": "combined", "rank": 0,
            "nranks": 2, "hostids": ["node0", "node1"], "results": res, "status": "ok"}


def ratios(text):
    """{(collective, size text): (model us, ratio)} from the measured-vs-model table."""
    out = {}
    for ln in section(text, "measured vs model"):
        w = ln.split()
        if len(w) == 9 and w[2] in ("B", "KiB", "MiB"):  # COLLECTIVE, BYTES (2), ..., ALGO
            out[(w[0], w[1] + " " + w[2])] = (float(w[4]), float(w[7]))
    return out


def test_15_03_measured_vs_model_from_a_results_file(sf_env, tmp_path):
    sc = tmp_path / "report-easy.yaml"
    sc.write_text(EASY)
    fb = sflaunch.dump_scenario(str(sc))
    want = [("allreduce", 8, 0.5), ("allreduce", 1 << 20, 0.5), ("allgather", 1 << 20, 0.8),
            ("sendrecv", 64 << 10, 1.25)]
    d = tmp_path / "saved"
    d.mkdir()
    (d / "fabric.json").write_text(json.dumps(fb))
    (d / "r-0.json").write_text(json.dumps(nccljob_doc(fb, want)))
    # the run directory, the file itself, and the file with --fabric the scenario
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "nccljob.json").write_text((d / "r-0.json").read_text())
    for args in ([d], [d / "r-0.json"], [other / "nccljob.json", "--fabric", sc]):
        p = cli("report", *args, "--format", "text")
        assert p.returncode == 0, p.stderr
        got = ratios(p.stdout)
        assert len(got) == len(want), p.stdout
        for coll, nbytes, ratio in want:
            size = "%d B" % nbytes if nbytes < 1024 else "%d KiB" % (nbytes >> 10) \
                if nbytes < 1 << 20 else "%d MiB" % (nbytes >> 20)
            assert got[(coll, size)][1] == pytest.approx(ratio, abs=0.0015), (coll, p.stdout)
        # by hand: a 2-rank ring allreduce of S is 2 alpha + S / B = 4 us + 104.8576 us
        assert got[("allreduce", "1 MiB")][0] == pytest.approx(108.86, abs=0.01), p.stdout
        assert "alpha 2.000 us, B 10.00 GB/s" in p.stdout, p.stdout
    p = cli("report", tmp_path / "nowhere", "--format", "text")
    assert p.returncode == 2 and "no such run directory" in p.stderr, p.stderr


def test_15_04_fault_timeline_in_fabric_time(flap_run):
    d, p = flap_run
    fl = load(d, "faults.json")
    assert [f["name"] for f in fl["faults"]] == ["node0-flap"] and fl["faults"][0]["windows"] == 4
    assert "counters in stats.json, faults.json, series.json, fabric.json" in p.stdout, p.stdout
    out = cli("report", d, "--format", "text")
    assert out.returncode == 0, out.stderr
    text = "\n".join(section(out.stdout, "faults"))
    assert "#0" in text and "node0-flap" in text and "flap" in text, text
    spans = [ln for ln in text.splitlines() if "windows (ms):" in ln][0]
    wins = [tuple(float(x) for x in w.split("-")) for w in
            spans.split(":", 1)[1].strip().split(", ")]
    origin = fl["faults"][0]["origin_ns"] / 1e6
    assert len(wins) == 4, spans
    for i, (a, b) in enumerate(wins):  # origin + 2 ms + i x 20 ms, 5 ms long
        assert a == pytest.approx(origin + 2 + 20 * i, abs=0.002) and b - a == pytest.approx(5)
    st = load(d, "stats.json")
    assert st["job"]["start_ns"] <= fl["faults"][0]["origin_ns"] <= st["job"]["end_ns"], st
    assert "600 message(s) received" in text, text  # the harness's per-message times


def fake_no_matplotlib(tmp_path):
    d = tmp_path / "nompl" / "matplotlib"
    d.mkdir(parents=True)
    (d / "__init__.py").write_text("raise ImportError('hidden by test_15')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path / "nompl") + (os.pathsep + env["PYTHONPATH"]
                                                   if env.get("PYTHONPATH") else "")
    return env


def test_15_05_without_matplotlib_the_text_summary(hdr_run, tmp_path):
    d, _ = hdr_run
    env = fake_no_matplotlib(tmp_path)
    out = tmp_path / "charts"
    p = cli("report", d, "--out", out, env=env)
    assert p.returncode == 0, p.stderr
    assert "measured vs model" in p.stdout and "text summary only" in p.stdout, p.stdout
    assert not out.exists()
    p = cli("report", d, "--format", "png", "--out", out, env=env)
    assert p.returncode == 77 and "needs matplotlib" in p.stderr, p.stderr
    assert not out.exists()


@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib is not installed (Debian: "
                                         "python3-matplotlib): the charts are not drawn")
@pytest.mark.parametrize("fmt,magic", [("png", b"\x89PNG"), ("svg", b"<?xml")])
def test_15_06_charts(hdr_run, flap_run, tmp_path, fmt, magic):
    for name, (d, _) in (("hdr", hdr_run), ("flap", flap_run)):
        out = tmp_path / name
        p = cli("report", d, "--format", fmt, "--out", out)
        assert p.returncode == 0, p.stderr
        for chart in ("model", "links", "faults"):
            f = out / ("%s.%s" % (chart, fmt))
            assert f.is_file() and f.read_bytes()[:len(magic)] == magic, (f, p.stdout)
            assert str(f) in p.stdout


def test_15_07_launch_leaves_counters_on_a_modelled_fabric_only(sf_env, tmp_path):
    d = tmp_path / "hdr"
    p = cli("launch", "--scenario", os.path.join(ROOT, "scenarios", "hdr-2node.yaml"),
            "--nodes", "2", "--run-dir", d, "-q", "--", PY, "-c", "pass")
    assert p.returncode == 0, p.stderr
    st = load(str(d), "stats.json")
    assert len(st["links"]) == 4 and st["fabric"] == "hdr-2node", st
    assert load(str(d), "fabric.json")["name"] == "hdr-2node"
    assert load(str(d), "launch.json")["counters"] == ["stats.json", "series.json",
                                                        "fabric.json"]
    assert "counters in stats.json, series.json, fabric.json" in p.stderr, p.stderr
    assert load(str(d), "series.json")["samples"] == []  # no rank opened a connection
    d = tmp_path / "ideal"
    p = cli("launch", "--nodes", "2", "--run-dir", d, "-q", "--", PY, "-c", "pass")
    assert p.returncode == 0, p.stderr
    assert not (d / "stats.json").exists() and not (d / "fabric.json").exists()
    assert "counters in" not in p.stderr


def test_15_08_without_series_json_the_whole_run_figure(hdr_run, tmp_path):
    """A run directory without series.json (saved before it existed, or a daemon that does not
    sample): utilisation over the whole run, and charts all the same."""
    d = tmp_path / "saved"
    shutil.copytree(hdr_run[0], d)
    os.remove(d / "series.json")
    p = cli("report", d, "--format", "text")
    assert p.returncode == 0, p.stderr
    links = section(p.stdout, "per-link utilisation")
    assert "no series.json, so no utilisation over time" in links[0], links
    st = load(str(d), "stats.json")
    l0 = [l for l in st["links"] if l["id"] == 0][0]
    util = l0["bytes"] * 8.0 / (l0["rate_bps"] * st["job"]["seconds"])
    row = [ln for ln in links if ln.split()[:1] == ["0"]][0]
    assert "node0/0 -> ib-sw0" in row and row.split()[7] == "%.2f%%" % (100 * util), row
    if HAVE_MPL:
        p = cli("report", d, "--format", "png", "--out", tmp_path / "charts")
        assert p.returncode == 0, p.stderr
        for chart in ("model", "links", "faults"):
            assert (tmp_path / "charts" / ("%s.png" % chart)).is_file(), p.stdout


def test_15_11_a_series_that_lost_the_jobs_start_is_said_so(hdr_run, tmp_path):
    """The daemon's ring keeps the newest samples: a series.json that no longer reaches back to
    the job's start gets a warning naming how much is missing; a whole one gets none."""
    p = cli("report", hdr_run[0], "--format", "text")
    assert p.returncode == 0 and "WARNING: the daemon's ring" not in p.stdout, p.stdout
    d = tmp_path / "saved"
    shutil.copytree(hdr_run[0], d)
    se, st = load(str(d), "series.json"), load(str(d), "stats.json")
    busy = [k for k, x in enumerate(se["samples"]) if any(x["bytes"])]
    cut = busy[len(busy) // 2]  # as if the ring had dropped the first half of the traffic
    se["first"] += cut
    se["samples"] = se["samples"][cut:]
    with open(d / "series.json", "w") as f:
        json.dump(se, f)
    p = cli("report", d, "--format", "text")
    assert p.returncode == 0, p.stderr
    want = (se["samples"][0]["t_ns"] - se["samples"][0]["dt_ns"] - st["job"]["start_ns"]) / 1e6
    warn = [ln for ln in section(p.stdout, "per-link utilisation") if "WARNING" in ln]
    assert warn and ("the first %.3f ms of the job" % want) in warn[0], p.stdout


def test_15_09_sample_ms_reaches_the_daemon_and_0_leaves_no_series_json(sf_env, tmp_path):
    hdr = os.path.join(ROOT, "scenarios", "hdr-2node.yaml")
    d = tmp_path / "off"
    p = cli("launch", "--scenario", hdr, "--sample-ms", "0", "--nodes", "2", "--run-dir", d,
            "-q", "--", PY, "-c", "pass")
    assert p.returncode == 0, p.stderr
    assert not (d / "series.json").exists() and (d / "stats.json").is_file()
    lj = load(str(d), "launch.json")
    assert lj["counters"] == ["stats.json", "fabric.json"], lj
    why = "no series.json: the daemon does not sample its links (started with --sample-ms 0)"
    assert why in lj["notes"] and why in p.stderr, (lj["notes"], p.stderr)
    p = cli("report", d, "--format", "text")
    assert p.returncode == 0 and "no series.json" in p.stdout, p.stdout + p.stderr
    p = cli("launch", "--socket", d / "nowhere.sock", "--sample-ms", "5", "--nodes", "2",
            "--", PY, "-c", "pass")
    assert p.returncode == 2 and "--sample-ms is for the daemon the launch starts" in p.stderr
    # simfabric run passes it on too
    sc = tmp_path / "report-flap.yaml"
    sc.write_text(FLAP)
    d = tmp_path / "fine"
    p = cli("run", sc, "--run-dir", d, "-q", "--progress", "0", "--sample-ms", "2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert load(str(d), "series.json")["period_ns"] == 2000000


def test_15_10_a_zero_length_active_interval_is_no_division_by_zero(hdr_run, tmp_path):
    """The active interval of series.json can have no length (its one busy sample has dt_ns 0):
    the per-link rate over time is then 0 everywhere, never a ZeroDivisionError."""
    import sfreport
    smp = [{"seq": 0, "t_ns": 5000, "dt_ns": 0, "bytes": [4096, 0]}]
    assert sfreport.binned(smp, 0, 5000, 5000, 10) == [0.0] * 10
    d = tmp_path / "saved"
    shutil.copytree(hdr_run[0], d)
    se = load(str(d), "series.json")
    st = load(str(d), "stats.json")
    t = st["job"]["start_ns"] + 1000
    se["samples"] = [{"seq": 0, "t_ns": t, "dt_ns": 0,
                      "bytes": [l["bytes"] for l in sorted(st["links"], key=lambda l: l["id"])]}]
    with open(d / "series.json", "w") as f:
        json.dump(se, f)
    p = cli("report", d, "--format", "png" if HAVE_MPL else "text", "--out", tmp_path / "c")
    assert p.returncode == 0, p.stderr
    assert "over the 0.000 ms sampled" in p.stdout, p.stdout
