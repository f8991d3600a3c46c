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
import shutil
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
    assert "Traceback" not in r.out and "launch.py" not in r.out, str(r)


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


# ---- pkg-config: the header that make install puts in, and where the plugin is ----------------

PLUGIN_SRC = '''\
#include <stddef.h>
#include <ncclnet.h>
/* a plugin writer's file: the ABI's types come from the installed header */
size_t sizes[] = {sizeof(ncclNet_v12_t), sizeof(ncclNet_v8_t)};
'''


@pytest.mark.skipif(not shutil.which("pkg-config"), reason="no pkg-config here")
def test_34_15_make_install_writes_a_pkg_config_file(tmp_path):
    """The issue asked for one where headers are installed: --cflags finds ncclnet.h (a plugin
    writer's file compiles with it), --variable=plugin names the installed plugin, the version
    is simfabric's; uninstall removes it (test_25_08 checks no file is left)."""
    from test_25_install import LIBDIR, PREFIX, make
    dest = tmp_path / "dest"
    make("install", dest)
    pcdir = str(dest) + LIBDIR + "/pkgconfig"
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=str(dest))

    def pc(*args):
        p = subprocess.run(["pkg-config"] + list(args) + ["simfabric"], capture_output=True,
                           text=True, env=env, timeout=30)
        assert p.returncode == 0, (args, p.stderr)
        return p.stdout.strip()

    with open(os.path.join(ROOT, "sim", "core", "version.h")) as f:
        assert pc("--modversion") == re.search(r'SF_VERSION "([^"]+)"', f.read()).group(1)
    cflags = pc("--cflags")
    assert cflags == "-I%s%s/include/simfabric" % (dest, PREFIX), cflags
    src = tmp_path / "mine.c"
    src.write_text(PLUGIN_SRC)
    cc = subprocess.run(["cc", "-c", "-o", str(tmp_path / "mine.o"), str(src)] + cflags.split(),
                        capture_output=True, text=True, timeout=60)
    assert cc.returncode == 0, cc.stderr
    def staged(path):  # pkg-config puts the sysroot before variables too, in some versions
        return path if path.startswith(str(dest)) else str(dest) + path

    plugin = pc("--variable=plugin")
    assert plugin.endswith(LIBDIR + "/libnccl-net-simfabric.so"), plugin
    assert os.path.isfile(staged(plugin)), plugin
    assert os.path.isdir(staged(pc("--variable=scenariodir")))
    make("uninstall", dest)
    assert not os.path.exists(os.path.join(pcdir, "simfabric.pc"))


TORCH_VARS = ("RANK", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_NAME", "ROLE_RANK",
              "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
              "TORCHELASTIC_RUN_ID")


def test_34_16_ranks_get_the_rest_of_torchruns_variables(sf_launch):
    """What torchrun's elastic agent sets beside RANK and WORLD_SIZE (the review listed
    GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, TORCHELASTIC_RUN_ID as missing)."""
    show = "import os; print('VARS', *[os.environ.get(k, '-') for k in %r])" % (TORCH_VARS,)
    r = sf_launch([sys.executable, "-c", show], nodes=2, gpus_per_node=2, timeout=60).check_ok()
    run_id = os.path.basename(r.run_dir.rstrip("/"))
    got = sorted(ln.split("VARS ", 1)[1] for rank in range(4)
                 for ln in r.output(rank).splitlines() if "VARS " in ln)
    assert got == ["%d %d 2 default %d 4 0 0 %s" % (k, k // 2, k, run_id) for k in range(4)], got


def test_34_17_report_of_a_hand_run_says_its_faults_were_not_recorded(sf_run, tmp_path):
    """The review's hand-run route (simfabric up, the harness, then report --fabric) said
    "the fabric had no faults" of a fabric that had one."""
    sc = os.path.join(ROOT, "scenarios", "job-harness-flap.yaml")
    r = sf_run(sc).check_ok()
    os.remove(os.path.join(r.run_dir, "faults.json"))
    p = subprocess.run([sys.executable, CLI, "report", r.run_dir, "--fabric", sc, "--format",
                        "text", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "the fabric had no faults" not in p.stdout, p.stdout
    assert "1 in the fabric ('flap'), but no faults.json: what they hit was not recorded" in \
        p.stdout, p.stdout


@pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="no dpkg-deb here (not Debian)")
def test_34_18_make_deb_packages_the_install(tmp_path):
    """The issue's optional .deb: make deb packs what make install puts in, for /usr and the
    multiarch library directory, with its run-time dependencies; unpacked, its programs run."""
    deb, root = tmp_path / "sf.deb", tmp_path / "root"
    p = subprocess.run(["make", "--no-print-directory", "deb", "DEB=%s" % deb,
                        "DEB_ROOT=%s" % root], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0 and deb.exists(), p.stdout[-3000:] + p.stderr[-3000:]
    f = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Depends"],
                       capture_output=True, text=True, check=True).stdout
    assert "Package: simfabric" in f and "libevent-core-2.1-7" in f and "python3" in f, f
    names = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                           check=True).stdout
    arch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                          text=True).stdout.strip() or "x86_64-linux-gnu"
    for want in ("./usr/bin/simfabric\n", "./usr/bin/simfabricd\n", "./usr/bin/simfabric-harness",
                 "./usr/lib/%s/libnccl-net-simfabric.so" % arch,
                 "./usr/lib/%s/pkgconfig/simfabric.pc" % arch,
                 "./usr/lib/simfabric/python/simfabric_pytest.py",
                 "./usr/share/simfabric/scenarios/job-harness-flap.yaml",
                 "./usr/share/man/man1/simfabricd.1", "./usr/include/simfabric/ncclnet.h"):
        assert want in names + "\n", (want, names)
    assert "deb-root" not in names and "DEBIAN" not in names, names
    x = tmp_path / "x"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(x)], check=True, timeout=120)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for prog in ("simfabric", "simfabricd", "simfabric-harness"):
        v = subprocess.run([str(x / "usr" / "bin" / prog), "--version"], capture_output=True,
                           text=True, env=env, timeout=60)
        assert v.returncode == 0 and re.search(r"\d+\.\d+\.\d+", v.stdout), (prog, v)


# job-harness-flap.yaml's fabric with 4 nodes; node1's cable down past the retry budget
ABORT_TAIL = """
faults:
  - {name: cut, action: link_down, link: [node1, sw0], after: {first_traffic: node1}, at: 1ms,
     for: 10s}
job:
  program: harness
  nodes: 4
  tests: [faults]
  args: [--fault-msgs, "1500", --fault-gap-us, "100", --fault-expect, ok]
  timeout_s: 60
"""


def test_34_19_a_rank_stopped_by_anothers_failure_does_not_say_timed_out(sf_run, tmp_path):
    """The review's "FAIL test=faults rank=3: timed out: 671 of 1500 sends ..." after 0.27 s:
    a rank whose message stream stopped because another rank failed says so."""
    with open(os.path.join(ROOT, "scenarios", "job-harness-flap.yaml")) as f:
        head = f.read().split("\nfaults:")[0]
    four = head.replace("count: 2,", "count: 4,").replace("[[node0, node1], sw0]",
                                                          "[[node0, node1, node2, node3], sw0]")
    assert four.count("node3") == 1 and "count: 4," in four
    sc = tmp_path / "abort.yaml"
    sc.write_text(four + ABORT_TAIL)
    r = sf_run(str(sc))
    assert r.rc == 1, r.explain()
    with open(os.path.join(r.run_dir, "harness.log")) as f:
        log = f.read()
    fails = [ln for ln in log.splitlines() if ln.startswith("FAIL test=faults")]
    assert len(fails) == 4, log
    assert not [ln for ln in fails if "timed out" in ln], fails


def test_34_20_status_and_the_pytest_plugin_say_the_version(sf_env, sf_fabric, tmp_path):
    """The issue's "one version, everywhere": beyond --version and the plugin's init line
    (test_24), `simfabric status` says the daemon's, and pytest's header the plugin's."""
    with open(os.path.join(ROOT, "sim", "core", "version.h")) as f:
        v = re.search(r'SF_VERSION "([^"]+)"', f.read()).group(1)
    p = subprocess.run([sys.executable, CLI, "status", "--socket", sf_fabric.socket],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "simfabricd %s)" % v in p.stdout.splitlines()[0], p.stdout
    d = tmp_path / "project"
    d.mkdir()
    (d / "pytest.ini").write_text("[pytest]\n")
    (d / "test_x.py").write_text("def test_x():\n    pass\n")
    r = user_pytest(d, PYTESTS, "-p", "simfabric_pytest")
    assert r.rc == 0 and ("simfabric %s: checkout %s" % (v, ROOT)) in r.out, str(r)


def test_34_21_license_changelog_and_no_stale_dependency():
    """A LICENSE that says what the sources' SPDX lines say, a CHANGELOG, and python3-yaml
    gone from the dependencies now that no Python file imports yaml."""
    with open(os.path.join(ROOT, "LICENSE")) as f:
        assert "MIT License" in f.read()
    assert os.path.isfile(os.path.join(ROOT, "CHANGELOG.md"))
    files = subprocess.run(["git", "ls-files", "*.py", "tools/simfabric", "tools/scripts/*.sh",
                            "README.md", "docs/*.md"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    me = os.path.relpath(os.path.realpath(__file__), ROOT)
    for f in files:
        if f == me:
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
            text = fh.read()
        assert not re.search(r"^\s*(import yaml|from yaml )", text, re.M), f
        assert "python3-yaml" not in text, f


# The newcomer review's own scenario: 0.1 % loss, NCCL's default ACK timeout (4.3 s).
LOSSY = """\
name: my-4node
fabric:
  defaults:
    link: {rate: 25gbit, latency: 5us, loss: 0.1%}
NIC  nodes: {count: 4, name: "node{i}"}
  switches:
    - {name: sw0}
  links:
    - ends: [[node0, node1, node2, node3], sw0]
"""


def test_34_22_a_lossy_fabric_with_a_seconds_long_ack_timeout_is_warned_about(sf_env, tmp_path):
    """Its try 3 took 8.7 s instead of 0.5 s with no word why: one warning line, naming a link
    and the NIC, the timeout and the remedy; none with timeout_exp 10."""
    said = {}
    for nic in ("", "    nic: {timeout_exp: 10}\n"):
        sc = tmp_path / "mine.yaml"
        sc.write_text(LOSSY.replace("NIC", nic))
        p = subprocess.run([sf_env.daemon, "--check", "--scenario", str(sc)],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and "ok: fabric explicit 'my-4node'" in p.stdout, p.stderr
        said[nic] = [ln for ln in p.stderr.splitlines() if " warn: " in ln]
    assert said["    nic: {timeout_exp: 10}\n"] == [], said
    (w,) = said[""]
    assert "link 0 (node0/0 -> sw0, loss bernoulli, 0.1 % of packets) and 7 more lossy link(s) " \
        "carry traffic from NICs with timeout_exp 18 or more (node0-nic0: 20): a lost packet " \
        "that ends a message is retried only after an ACK timeout of 4.29 s" in w, w
    assert "a timeout_exp of 10 to 14 (4.2 to 67 ms)" in w, w


def test_34_23_ranks_per_node_is_gpus_per_node(tmp_path):
    """The review: --gpus-per-node counts ranks (they may share a GPU); --ranks-per-node says
    so, as the same option."""
    show = "import os; print('ENV', os.environ['RANK'], os.environ['LOCAL_RANK'])"
    p = subprocess.run([sys.executable, CLI, "launch", "--nodes", "2", "--ranks-per-node", "2",
                        "--run-dir", str(tmp_path / "run"), "--", sys.executable, "-c", show],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert sorted(ln.split("ENV ", 1)[1] for ln in p.stdout.splitlines() if "ENV " in ln) == \
        ["0 0", "1 1", "2 0", "3 1"], p.stdout
