# SPDX-License-Identifier: MIT
"""The CPU harness drives the plugin over the daemon like NCCL's proxy, with 2, 4 and 8 ranks."""
import os
import re
import subprocess

import pytest

import sfctl
import simfabric_pytest

# Large sizes cost CPU time on a 2-core CI machine; 8 ranks share two cores.
CASES = [
    pytest.param(2, [], id="2ranks"),
    pytest.param(4, ["--max-bytes", "16777216"], id="4ranks"),
    pytest.param(8, ["--max-bytes", "4194304", "--threads", "2"], id="8ranks",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("nranks,extra", CASES)
def test_03_01_all_tests(harness, fabric, nranks, extra):
    r = harness(nranks=nranks, tests="all", fabric=fabric, extra=extra, timeout=400)
    r.check_ok()
    names = {t["name"] for t in r.tests()}
    for want in ("connect", "props", "sizes", "tags", "inflight", "allreduce", "alltoall",
                 "close_inflight", "listen_reuse", "threads", "reload", "mr"):
        assert want in names, "test %s did not run\n%s" % (want, r.report())
    assert r.json["api_version"] == 12, r.report()
    for t in r.tests("mr"):  # GPU memory is refused until it is supported
        assert t["metrics"]["regMr_cuda_on_host"] == "ncclInvalidUsage(5)", t
    assert len({t["rank"] for t in r.tests()}) == nranks
    # Every connection the harness made was cleaned up.
    st = fabric.show()
    assert all(c.get("state") != "open" for c in st["chans"]), st


@pytest.mark.parametrize("version", [8, 9, 10, 11])
def test_03_02_older_api_versions(harness, version):
    r = harness(nranks=2, tests="connect,props,sizes,tags,allreduce,close_inflight",
                extra=["--api-version", str(version), "--max-bytes", "4194304"])
    r.check_ok()
    assert r.json["api_version"] == version


def test_03_03_counters_match_the_traffic(harness, fabric):
    r = harness(nranks=2, tests="sizes", fabric=fabric, extra=["--max-bytes", "1048576"])
    r.check_ok()
    st = fabric.show()
    assert st["chans"], st
    for c in st["chans"]:
        assert c["shm_bytes"] > 0
        # where each connection stands (what a hung job is diagnosed with): after a clean
        # run every send met a receive and was delivered, every staged slot was consumed
        ring = dict(kv.split("=") for kv in c["ring"].split())
        ring = {k: int(v) for k, v in ring.items()}
        assert ring["recvs"] == ring["sends"] == c["msgs"], c
        assert ring["consumed"] == ring["slots"] >= ring["sends"], c
    total = sum(c["bytes"] for c in st["chans"])
    msgs = sum(c["msgs"] for c in st["chans"])
    sent = sum(t.get("metrics", {}).get("bytes_sent", 0) for t in r.tests("sizes"))
    nsent = sum(t.get("metrics", {}).get("msgs_sent", 0) for t in r.tests("sizes"))
    if sent:
        assert total == sent, (total, sent)
    if nsent:
        assert msgs == nsent, (msgs, nsent)
    assert total > 0 and msgs > 0


ASAN = os.path.join(simfabric_pytest.ROOT, "build-asan")


@pytest.mark.skipif(not os.path.exists(os.path.join(ASAN, "simfabric-harness")),
                    reason="no ASan build (make asan)")
@pytest.mark.parametrize("tests", ["all", "truncate", "peer_death", "faults"])
def test_03_04_everything_under_asan(tmp_path, tests):
    """The daemon, the plugin and the harness built with ASan+UBSan: no report, no leak
    (faults: a link down past the retry budget, so every rank's error path runs)."""
    # an ASan build older than the code it is built from would test yesterday's code: say so,
    # do not pass. Each object against what its compiler said it read (the .d files), not
    # against build/: either build may be made first.
    root = simfabric_pytest.ROOT
    for top, _, files in os.walk(os.path.join(ASAN, "obj")):
        for f in files:
            if not f.endswith(".d"):
                continue
            rule = []
            with open(os.path.join(top, f)) as fh:
                for line in fh:  # the first rule: lines joined by a trailing backslash
                    rule.append(line.rstrip("\n").rstrip("\\"))
                    if not line.rstrip("\n").endswith("\\"):
                        break
            obj, _, deps = " ".join(rule).partition(":")
            obj, deps = os.path.join(root, obj.strip()), deps.split()
            if not deps or not os.path.exists(os.path.join(root, deps[0])) or \
                    not os.path.exists(obj):
                continue  # an object of a source that moved away: no build uses it
            for dep in (os.path.join(root, d) for d in deps):
                if os.path.exists(dep) and os.path.getmtime(dep) > os.path.getmtime(obj):
                    pytest.fail("%s is older than %s: run `make asan` (make test does)" % (
                        os.path.relpath(obj, root), os.path.relpath(dep, root)),
                        pytrace=False)
    env = simfabric_pytest.Env(ASAN)
    args, extra = [], []
    if tests == "faults":
        args = ["--scenario", os.path.join(simfabric_pytest.ROOT, "scenarios",
                                           "fault-link-down.yaml")]
        extra = ["--fault-expect", "error", "--fault-msgs", "60", "--nranks", "2"]
    f = simfabric_pytest.Fabric(env, str(tmp_path / "fabric"), args=args).start()
    try:
        e = dict(os.environ, SIMFABRIC_SOCKET=f.socket, NCCL_DEBUG="WARN",
                 ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
                 UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98")
        argv = [env.harness, "--plugin", env.plugin, "--nranks", "3", "--tests", tests,
                "--max-bytes", "4194304", "--json", str(tmp_path / "r.json")] + extra
        p = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, "%s\n%s\n%s" % (" ".join(argv), p.stdout, p.stderr[-20000:])
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error"):
            assert bad not in p.stderr, p.stderr[-20000:]
    finally:
        rc = f.stop()
    assert rc == 0, "ASan daemon exited %s\n%s" % (rc, f.log())
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error"):
        assert bad not in f.log(), f.log()


def test_03_05_multi_rail_every_pair_on_every_device(harness, fabric_factory):
    f = fabric_factory(args=["--nics", "3"])
    r = harness(nranks=4, tests="props,connect,sizes,alltoall,listen_reuse", fabric=f,
                extra=["--max-bytes", "4194304"])
    r.check_ok()
    for t in r.tests("props"):
        devs = t["metrics"]["devices"]
        assert len(devs) == 3 and len({d["name"] for d in devs}) == 3, t
    # 4 ranks x 3 peers x 3 local devices x 3 remote devices were connected.
    assert len(f.show()["chans"]) >= 4 * 3 * 3 * 3 // 2, f.show()


def test_03_06_repeated_runs_on_one_daemon(harness, fabric):
    for i in range(5):
        harness(nranks=3, tests="connect,sizes,allreduce,close_inflight", fabric=fabric,
                extra=["--max-bytes", "1048576"]).check_ok()
    st = fabric.show()
    assert st["chans_open"] == 0 and st.get("listeners") == 0, st


@pytest.mark.parametrize("threads", ["1", "3"])
def test_03_07_copy_threads(harness, fabric_factory, tmp_path, threads):
    """The copy threads (sim/core/copyq.h; off by default on machines this small): every test,
    byte-exact, including a corrupting fabric (its bits are flipped after the thread's copy),
    reload (the threads are joined at finalize) and fork."""
    env = {"SIMFABRIC_COPY_THREADS": threads}
    r = harness(nranks=3, tests="all", fabric=fabric_factory(), env=env, timeout=400)
    r.check_ok()
    sc = tmp_path / "corrupt.yaml"
    sc.write_text("fabric:\n  nodes: {count: 2, name: \"node{i}\"}\n  switches: [{name: sw0}]\n"
                  "  links:\n    - {ends: [node0, sw0], a_to_b: {corrupt: 0.002}}\n"
                  "    - {ends: [node1, sw0]}\n")
    f = fabric_factory(args=["--scenario", str(sc)], name="corrupt")
    r = harness(nranks=2, tests="flows", fabric=f, env=env, timeout=200,
                extra=["--flows", "0>1,1>0", "--flow-bytes", "8M", "--flow-msg", "256K",
                       "--corrupt-ok"])
    r.check_ok()
    got = [fl.get("corrupt_msgs", 0) for t in r.tests("flows") for fl in t["metrics"]["flows"]
           if fl["src"] == 0 and fl["role"] == "recv"]
    assert got and got[0] > 0, r.report()  # node0's uplink flips bits: they arrive wrong
    st = sfctl.stats(f.socket)
    assert sum(l["corrupted"] for l in st.values()) >= got[0], st


@pytest.mark.parametrize("version", [10, 12])
def test_03_09_profiler_events_pair_up_and_count_the_traffic(harness, fabric, version):
    """--profiler plays NCCL with a profiler loaded: every send and every receive buffer is one
    Start (with the pHandle NCCL passed and simfabric's descriptor) and one Stop, in-flight ones
    at close included; the sends' bytes add up to what crossed the fabric."""
    r = harness(nranks=2, tests="connect,sizes,tags,close_inflight", fabric=fabric,
                extra=["--profiler", "--api-version", str(version), "--max-bytes", "1048576"])
    r.check_ok()
    m = [t["metrics"] for t in r.tests("unload")]
    assert len(m) == 2, r.report()
    for x in m:
        assert x["profiler_bad"] == 0 and x["profiler_live"] == 0, x
        assert x["profiler_starts"] > 0 and x["profiler_starts"] == x["profiler_stops"], x
        assert x["profiler_simfabric"] == x["profiler_starts"], x
    total = sum(c["bytes"] for c in fabric.show()["chans"])
    assert sum(x["profiler_send_bytes"] for x in m) == total, (m, total)


def test_03_10_no_profiler_events_before_v10(harness):
    r = harness(nranks=2, tests="connect,sizes", extra=["--profiler", "--api-version", "9",
                                                        "--max-bytes", "65536"])
    r.check_ok()
    assert len(r.tests("unload")) == 2, r.report()
    for t in r.tests("unload"):
        assert t["metrics"]["profiler_starts"] == 0 and t["metrics"]["profiler_calls"] == 0, t


@pytest.mark.parametrize("args,says", [
    (["--bogus"], "unknown option '--bogus'"),
    (["--bogus=1"], "unknown option '--bogus'"),
    (["-x"], "unknown option '-x'"),
    (["--nranks"], "--nranks needs a value"),
    (["--plugin", "p.so", "--json"], "--json needs a value"),
    (["--bench=1"], "--bench takes no value"),
    (["--flow", "0>1"], "ambiguous option '--flow'"),
    (["stray"], "unexpected argument 'stray'"),
    (["--nranks=x"], "--nranks: 'x' is not an integer"),
    (["--fault-expect", "maybe"], "'maybe' is not ok, error or either"),
    (["--fault-lose", "0"], "--fault-lose: '0' is not an integer in [1, 63]"),
    (["--flow-window", "9"], "--flow-window: '9' is not an integer in [1, 8]"),
    (["--flow-window", "0"], "--flow-window: '0' is not an integer in [1, 8]"),
    (["--plugin", "p.so", "--fault-lose", "2"], "--fault-lose 2: there are 2 ranks (0 to 1)"),
    ([], "--plugin PATH is required"),
])
def test_03_11_usage_errors_are_one_line_and_exit_2(sf_env, args, says):
    """getopt_long's command line: every mistake is one line on stderr, exit status 2."""
    p = subprocess.run([sf_env.harness] + args, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simfabric-harness: "), p.stderr
    assert says in lines[0] and "(see --help)" in lines[0], p.stderr
    assert p.stdout == ""


@pytest.mark.parametrize("args,says", [(["--version"], "simfabric-harness "),
                                       (["-h"], "usage: simfabric-harness --plugin PATH"),
                                       (["--help"], "--fault-expect E"),
                                       (["--list", "-v"], "peer_death")])
def test_03_12_help_version_and_list_exit_0(sf_env, args, says):
    p = subprocess.run([sf_env.harness] + args, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and says in p.stdout and p.stderr == "", (args, p.stdout, p.stderr)


def test_03_13_every_option_in_the_help_is_accepted(sf_env):
    """Each option --help lists parses: given its value, it gets past the parser to the check
    that --plugin is missing (or to the run's own checks), never 'unknown option'."""
    text = subprocess.run([sf_env.harness, "--help"], capture_output=True, text=True,
                          timeout=30).stdout
    opts = sorted(set(re.findall(r"^\s+(?:-\w, )?(--[a-z-]+)( [A-Z]+)?", text, re.M)))
    assert len(opts) >= 20, opts
    vals = {"--nranks": "2", "--tests": "connect", "--timeout": "5", "--bound": "5",
            "--threads": "2", "--max-bytes": "1M", "--node-prefix": "n", "--api-version": "10",
            "--flows": "0>1", "--flow-bytes": "1M", "--flow-msg": "1M", "--flow-window": "1",
            "--fault-msgs": "3",
            "--fault-bytes": "1K", "--fault-gap-us": "0", "--fault-expect": "ok",
            "--fault-lose": "1", "--json": "x.json"}
    for opt, metavar in opts:
        if opt in ("--plugin", "--help", "--version", "--list"):
            continue
        argv = [sf_env.harness, opt] + ([vals[opt]] if metavar else [])
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--plugin PATH is required" in p.stderr, (argv, p.stderr)


def test_03_14_flow_window_1_pays_the_latency_per_message(harness, fabric_factory, tmp_path):
    """--flow-window 1: a flow posts its next message only once the last completed, so every
    message pays the link's latency (2 ms here) on its own; with the default window of 8 they
    overlap and the gaps shrink to the serialization time (64 KiB at 10 Gb/s: 52 us)."""
    sc = tmp_path / "slow-hop.yaml"
    sc.write_text("fabric:\n  defaults:\n    link: {rate_gbps: 10, latency_ns: 2000000}\n"
                  "  nodes: {count: 2, name: \"node{i}\"}\n  switches: [{name: sw0}]\n"
                  "  links:\n    - {ends: [[node0, node1], sw0]}\n")
    f = fabric_factory(args=["--scenario", str(sc)], name="slow-hop")
    gaps = {}
    for w in ("1", "8"):
        r = harness(nranks=2, tests="flows", fabric=f, timeout=120,
                    extra=["--flows", "0>1", "--flow-bytes", str(40 * 65536), "--flow-msg",
                           "64K", "--flow-window", w])
        r.check_ok()
        done = [fl["done_us"] for t in r.tests("flows") for fl in t["metrics"]["flows"]
                if fl["role"] == "recv"][0]
        assert len(done) == 40, r.report()
        gaps[w] = sorted(b - a for a, b in zip(done, done[1:]))[len(done) // 2]
    # two hops of 2 ms each way: a lone message takes over 4 ms from post to its receive
    assert gaps["1"] >= 4000, gaps
    assert gaps["8"] < 1500, gaps


@pytest.mark.parametrize("version,marked", [(12, True), (9, True), (8, False)])
def test_03_15_a_receive_read_as_it_fills_gets_no_byte_before_the_model(harness, fabric_factory,
                                                                         tmp_path, version,
                                                                         marked):
    """NCCL marks its LL and LL128 receives (the optional-completion hint: their kernels read
    the lines as they land), and the plugin places none of their bytes before the model says
    they arrived: over two 50 ms hops, none in the first 100 ms after the send (80 here: the
    ranks leave their barrier a little apart). NCCL's v8 shim clears the mark, so there the
    receive fills as soon as the data path can, well within 40 ms: the check can fail."""
    sc = tmp_path / "far.yaml"
    sc.write_text("fabric:\n  defaults:\n    link: {rate_gbps: 10, latency_ns: 50000000}\n"
                  "  nodes: {count: 2, name: \"node{i}\"}\n  switches: [{name: sw0}]\n"
                  "  links:\n    - {ends: [[node0, node1], sw0]}\n")
    f = fabric_factory(args=["--scenario", str(sc)], name="far")
    r = harness(nranks=2, tests="landing", fabric=f, timeout=60,
                extra=["--api-version", str(version), "--fault-bytes", "200K"])
    r.check_ok()
    m = [t["metrics"] for t in r.tests("landing") if "first_byte_s" in t["metrics"]]
    assert len(m) == 1 and m[0]["exact"], r.report()
    first, done = m[0]["first_byte_s"], m[0]["done_s"]
    assert done >= 0.080, (m, r.report())  # the completion was always gated
    if marked:
        assert first >= 0.080, (m, r.report())
    else:
        assert first < 0.040, (m, r.report())
