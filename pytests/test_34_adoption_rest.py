# SPDX-License-Identifier: MIT
"""What issue 16 had left (adoption): one grammar of values in every program (the harness's and
the NCCL job program's sizes and times, the CLI's `fault apply --in`, each against the daemon's
own parser), the pytest plugin's `sf_launch(mpi=...)` as `simfabric launch --mpi` through a
stand-in mpirun, `simfabric run` naming a fault whose trigger never fired, one the job never
reached and one still on at its end, and every link into docs/usage.md landing on a heading.
CPU only."""
import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

import simfabric_pytest
from test_12_nccljob import nccljob  # noqa: F401 - the built program, else a skip
from test_26_pytest_plugin import PYTESTS, user_pytest
from test_29_launch_flags import FAKE_MPIRUN, MPI_SHOW, job1
from test_31_fault_clocks import _faults_check, _scenario

ROOT = simfabric_pytest.ROOT
CLI = os.path.join(ROOT, "tools", "simfabric")


def _cli_module():
    """tools/simfabric as a module (it has no .py), for its parse_delay."""
    loader = importlib.machinery.SourceFileLoader("simfabric_cli", CLI)
    spec = importlib.util.spec_from_loader("simfabric_cli", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


# ---- one grammar of values -----------------------------------------------------------------

H, J = "harness", "nccljob"


@pytest.mark.parametrize("prog,args,says", [
    # the values reach the checks exactly as the units grammar reads them
    (H, ["--max-bytes", "1.5K", "--fault-bytes", "2KiB"],
     "--fault-bytes: 2048 bytes is more than --max-bytes 1536"),
    (H, ["--max-bytes", "1MiB", "--fault-bytes", "1.5MB"],
     "--fault-bytes: 1572864 bytes is more than --max-bytes 1048576"),
    (H, ["--max-bytes", "5us"], "--max-bytes: '5us' has the unit of a time (us), not of a size"),
    (H, ["--flow-bytes", "64Q"], "--flow-bytes: '64Q' has an unknown unit 'Q'"),
    (H, ["--max-bytes", "0"], "--max-bytes: '0' is not a size in 1 B .. 1T"),
    (H, ["--max-bytes", "1.5"], "--max-bytes: '1.5' is not a whole number of bytes"),
    (H, ["--timeout", "25gbit"], "--timeout: '25gbit' has the unit of a rate (gbit), not of a"),
    (H, ["--bound", "0ms"], "--bound: '0ms' is not a time in (0, 1e6] s"),
    (H, ["--fault-gap-us", "11s"], "--fault-gap-us: '11s' is more than 10 s"),
    (H, ["--fault-gap-us", "1K"], "--fault-gap-us: '1K' has the unit of a size (K), not of a"),
    (H, ["--fault-msgs", "2M"], "--fault-msgs: '2M' is not a count in [1, 1000000]"),
    (J, ["-e", "64us"], "-e: '64us' has the unit of a time (us), not of a size"),
    (J, ["--sizes", "8,1.5"], "--sizes: '1.5' is not a whole number of bytes"),
    (J, ["--max", "2T"], "--max: '2T' is more than 1T"),
    (J, ["--timeout-s", "5gbit"], "--timeout-s: '5gbit' has the unit of a rate (gbit)"),
    (J, ["--op-timeout-s", "0s"], "--op-timeout-s: '0s' is not a time > 0"),
])
def test_34_01_sizes_and_times_take_units_and_say_what_is_wrong(request, prog, args, says):
    """One line each, the usage error's status (the harness 2, the job program 1)."""
    if prog == H:
        env = request.getfixturevalue("sf_env")
        p = subprocess.run([env.harness, "--plugin", env.plugin] + args, capture_output=True,
                           text=True, timeout=60)
    else:
        p, _ = job1(request.getfixturevalue("nccljob"), *args)
    assert p.returncode == (2 if prog == H else 1) and says in p.stderr, (p.returncode, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_34_02_harness_runs_with_units(sf_harness):
    """The spellings of scenarios work end to end: a faults test of 0.25K messages of 1.5K,
    2e2us apart, under a 30s bound; --help says the grammar."""
    r = sf_harness(nranks=2, tests="faults", timeout=60,
                   extra=["--max-bytes", "64KiB", "--fault-bytes", "1.5K", "--fault-msgs",
                          "0.25K", "--fault-gap-us", "2e2us", "--bound", "30s",
                          "--fault-expect", "ok"])
    r.check_ok()
    h = subprocess.run([r.argv[0], "--help"], capture_output=True, text=True, timeout=30)
    assert "binary: 64K = 64KiB = 65536" in h.stdout, h.stdout


def test_34_03_nccljob_sizes_take_units(nccljob, tmp_path):
    _, d = job1(nccljob, "-b", "1.5K", "-e", "64KiB", "-f", "4", "-n", "1", "-w", "0",
                "--timeout-s", "90s", tmp=tmp_path)
    assert [r["bytes"] for r in d["results"]] == [1536, 6144, 24576], d["results"]
    _, d = job1(nccljob, "--sizes", "8,1.5K,64KB,1e3", "-n", "1", "-w", "0", tmp=tmp_path)
    assert [r["bytes"] for r in d["results"]] == [8, 1536, 65536, 1000], d["results"]


# The CLI's --in parser against the daemon's (a fault's at: in a scenario): the same value, or
# the same error, for each spelling.
SPELLINGS = ["10ms", "1.5s", "250", "2e3us", ".5ms", "5.", "5\u00b5s", "0", "5e-3s", "1e5",
             "1.5ns", "1min", "-5ms", "5 ms", "5%", "abc", "1e30s", ".", "\u00b5s", "10gbit",
             "64K", "1KiB", "12.5GB/s", "25Gbps", "25gbps", "5mB/s"]


def test_34_04_fault_in_is_the_daemons_grammar(sf_env, tmp_path):
    cli = _cli_module()
    with open(os.path.join(ROOT, "scenarios", "fault-flap.yaml")) as f:
        base = f.read()
    assert "    at: 2ms\n" in base
    for text in SPELLINGS:
        sc = tmp_path / "s.yaml"
        sc.write_text(base.replace("    at: 2ms\n", '    at: "%s"\n' % text), encoding="utf-8")
        d = subprocess.run([sf_env.daemon, "--scenario", str(sc), "--dump-fabric"],
                           capture_output=True, text=True, timeout=30)
        try:
            mine = cli.parse_delay(text)
        except Exception as e:  # argparse.ArgumentTypeError
            mine = "error: " + str(e)
        if d.returncode == 0:
            theirs = json.loads(d.stdout)["faults"][0]["start_ns"]
        else:
            m = re.search(r":\d+:\d+: at: (.*)$", d.stderr.strip())
            assert m, d.stderr
            theirs = "error: " + m.group(1)
            if "\\x" in theirs:  # the C quotes bytes past ASCII as \xNN: the same text
                theirs = theirs.encode().decode("unicode_escape").encode("latin-1").decode()
        assert mine == theirs, (text, mine, theirs)


def test_34_05_fault_in_errors_are_usage_errors():
    p = subprocess.run([sys.executable, CLI, "fault", "apply", "--in", "1min", "{}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "argument --in: '1min' has an unknown unit 'min' (a time takes ns, us, ms or s" \
        in p.stderr, p.stderr


# ---- sf_launch(mpi=...) ------------------------------------------------------------------------

def _fake_mpirun(tmp_path):
    fake = tmp_path / "mpirun"
    fake.write_text(FAKE_MPIRUN)
    fake.chmod(0o755)
    return fake


def test_34_06_sf_launch_mpi_through_a_stand_in_mpirun(sf_launch, tmp_path):
    """mpi=PATH: one mpirun runs nodes x gpus_per_node ranks, each with its node's NCCL_HOSTID
    (from the wrapper), mpirun gets mpi_args (a string split as a shell would), and output(0)
    is mpirun's whole output."""
    log = tmp_path / "mpirun-args.json"
    r = sf_launch(["sh", "-c", MPI_SHOW], nodes=2, gpus_per_node=2, mpi=str(_fake_mpirun(tmp_path)),
                  mpi_args="--mca btl 'self,vader'", env={"FAKE_MPI_LOG": str(log)}, timeout=60)
    r.check_ok()
    got = sorted(ln.split("ENV ", 1)[1] for ln in r.output(0).splitlines() if "ENV " in ln)
    assert got == ["0 0 4 node0 node0 simfabric", "1 1 4 node0 node0 simfabric",
                   "2 0 4 node1 node1 simfabric", "3 1 4 node1 node1 simfabric"], r.logs()
    a = json.loads(log.read_text())["argv"]
    assert a[:2] == ["-np", "4"] and a[a.index("sh") - 3:a.index("sh")] == \
        ["--mca", "btl", "self,vader"], a
    assert [p.label for p in r.procs] == ["mpi"], r.procs


def test_34_07_sf_launch_mpi_rank_failure_is_the_launchs(sf_launch, tmp_path):
    r = sf_launch(["sh", "-c", '[ "$NCCL_HOSTID" = node0 ] || exit 3'], nodes=2,
                  mpi=str(_fake_mpirun(tmp_path)), env={"FAKE_MPI_LOG": str(tmp_path / "l")},
                  timeout=60)
    assert not r.ok and r.status == 3, (r.status, r.logs())


def test_34_08_sf_launch_mpi_argument_mistakes(sf_launch):
    with pytest.raises(ValueError, match="mpi_args are for mpi=True"):
        sf_launch(["true"], mpi_args="--mca btl self")


MPI_PROJECT_TEST = '''\
def test_mpi_here(sf_launch):
    sf_launch(["true"], nodes=2, mpi=True).check_ok()


def test_mpi_named(sf_launch):
    sf_launch(["true"], nodes=2, mpi="/nonexistent/mpirun").check_ok()
'''


def test_34_09_without_mpirun_skips_and_a_named_one_missing_fails(sf_env, tmp_path):
    """In a user's project: mpi=True where there is no mpirun is a skip with the reason;
    mpi="PATH" that is not there fails, in one line, with no traceback."""
    d = tmp_path / "project"
    d.mkdir()
    (d / "pytest.ini").write_text("[pytest]\n")
    (d / "test_mpi.py").write_text(MPI_PROJECT_TEST)
    r = user_pytest(d, PYTESTS, "-p", "simfabric_pytest", "--simfabric-build-dir",
                    sf_env.build, "-rs", env={"SIMFABRIC_MPIRUN": "/nonexistent/mpi-none"})
    assert "test_mpi.py::test_mpi_here SKIPPED" in r.out, str(r)
    assert "--mpi: /nonexistent/mpi-none not found" in r.out, str(r)
    assert "test_mpi.py::test_mpi_named FAILED" in r.out, str(r)
    assert "--mpi: /nonexistent/mpirun not found (install Open MPI" in r.out, str(r)
    assert "Traceback" not in r.out and "sflaunch.py" not in r.out, str(r)


# ---- simfabric run: faults that never started, or never ended ---------------------------------

def test_34_10_a_trigger_that_never_fired_fails_the_faults_check(sf_run, tmp_path):
    r = sf_run(_scenario(tmp_path, "unfired.yaml", "after: {messages: 1000000, link: node0}, "))
    assert r.rc == 1 and not r.passed, r.explain()
    (c,) = _faults_check(r)
    assert not c["ok"], c
    assert "fault #0 'cut' never started: its trigger, 1000000 messages on link 0 (node0/0 -> " \
        "sw0), did not fire during the job, so it hit nothing" in c["detail"], c
    assert "simfabric report %s" % r.run_dir in c["detail"] and "may_miss" in c["detail"], c
    assert all(x["ok"] for x in r.json["checks"] if x["name"] != "faults"), r.json["checks"]
    # expect: faults: {may_miss: [cut]} allows it: test_31_02


def test_34_11_a_window_after_the_job_fails_the_faults_check(sf_run, tmp_path):
    r = sf_run(_scenario(tmp_path, "late.yaml", "at: 30s, "))
    assert r.rc == 1, r.explain()
    (c,) = _faults_check(r)
    assert not c["ok"] and re.search(
        r"fault #0 'cut' opens at 30000 ms \(fabric time\), after the job ended at [0-9.]+ ms: "
        r"the job never met it, so it hit nothing \(`at:` counts from the daemon's start",
        c["detail"]), c


def test_34_12_a_fault_still_on_at_the_end_is_named(sf_run, tmp_path):
    """A fault that hit messages and is still on when the job ends passes, and the check says
    it was still on; one still on that hit nothing fails."""
    with open(_scenario(tmp_path, "x.yaml", "")) as f:
        text = f.read()
    on = text.replace("{name: cut, action: link_down, link: [node0, sw0], for: 2ms}",
                      "{name: slow, action: degrade, link: [node0, sw0], set: {add_latency: 5us},"
                      " after: {first_traffic: node0}, for: 60s}")
    assert on != text
    p = tmp_path / "on.yaml"
    p.write_text(on)
    r = sf_run(str(p)).check_ok()
    (c,) = _faults_check(r)
    assert c["ok"] and re.search(
        r"fault #0 'slow' \(degrade\) was still on at the job's end \([0-9.]+ ms, fabric "
        r"time\): opened at [0-9.]+ ms, to close at [0-9.]+ ms", c["detail"]), c
    # a third node the job does not use: its link is on all along and carries nothing
    idle = on.replace("count: 2,", "count: 3,").replace("[[node0, node1], sw0]",
                                                        "[[node0, node1, node2], sw0]")
    idle = idle.replace("  program: harness\n", "  program: harness\n  nodes: 2\n")
    idle = idle.replace("link: [node0, sw0], set", "link: [node2, sw0], set").replace(
        "after: {first_traffic: node0}, for: 60s", "at: 0, for: 60s")
    assert "nodes: 2\n" in idle and "count: 3," in idle and "[node2, sw0], set" in idle and "at: 0, for: 60s" in idle
    p.write_text(idle)
    r = sf_run(str(p))
    assert r.rc == 1, r.explain()
    (c,) = _faults_check(r)
    assert not c["ok"] and "fault #0 'slow' was still on at the job's end" in c["detail"] and \
        "after 1 window(s) and hit nothing" in c["detail"], c


# ---- docs/usage.md is a reference, and every link into it lands -------------------------------

def _md_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.md"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if os.path.isfile(os.path.join(ROOT, f))]


def _slug(heading):
    return re.sub(r"[^a-z0-9 -]", "", heading.strip().lower()).replace(" ", "-")


def test_34_13_every_link_into_usage_md_lands_on_a_heading():
    with open(os.path.join(ROOT, "docs", "usage.md")) as f:
        usage = f.read()
    heads = {_slug(h) for h in re.findall(r"^#+ (.*)$", usage, re.M)}
    seen = 0
    for name in _md_files():
        with open(os.path.join(ROOT, name)) as f:
            text = f.read()
        base = os.path.dirname(os.path.join(ROOT, name))
        for target, anchor in re.findall(r"\]\(([^)#\s]*usage\.md)(#[^)\s]*)?\)", text):
            path = os.path.relpath(os.path.normpath(os.path.join(base, target)), ROOT)
            if path != "docs/usage.md":
                continue
            seen += 1
            assert not anchor or anchor[1:] in heads, (name, target + anchor, sorted(heads))
    assert seen >= 4, seen


def test_34_14_usage_md_is_a_reference_and_the_history_is_in_the_changelog():
    """docs/usage.md says what to run, not what was measured once: no benchmark figures (they
    are the CHANGELOG's, which keeps them)."""
    with open(os.path.join(ROOT, "docs", "usage.md")) as f:
        usage = " ".join(f.read().split())
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        changelog = " ".join(f.read().split())
    figures = re.findall(r"\b\d+\.\d+ GB/s\b|\b\d+(?:\.\d+)? ?(?:us|µs|ms) against|H200|"
                         r"\bone round\b|\bTold 400 Gb/s\b|capped a 2-rank", usage)
    assert not figures, figures
    for kept in ("51.1 GB/s", "Told 400 Gb/s", "capped a 2-rank allreduce at 5 GB/s"):
        assert kept in changelog, kept
