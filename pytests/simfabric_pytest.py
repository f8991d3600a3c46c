# SPDX-License-Identifier: MIT
"""simfabric's pytest plugin: a running fabric and a launcher, as fixtures.

Load it (docs/pytest-plugin.md):
  installed (`pip install --no-build-isolation ./pytests`): pytest loads it by itself (entry
      point pytest11 `simfabric_pytest`; `-p no:simfabric_pytest` turns it off);
  or from a directory: PYTHONPATH=DIR pytest -p simfabric_pytest, DIR being a checkout's pytests/
      or an installed $PREFIX/lib/simfabric/python; or `pytest_plugins = ["simfabric_pytest"]`
      in your conftest.py (with DIR on sys.path).

    def test_my_plugin(sf_fabric, sf_harness):
        r = sf_harness(nranks=4, tests="sizes,allreduce")
        r.check_ok()

Fixtures (each a fresh process, per test):
  sf_env     paths of the daemon, plugin, harness and CLI (session scope): .daemon, .plugin, ...
  sf_fabric  a simfabricd on a run-time socket under the test's tmp_path; .show(), .log()
  sf_fabric_factory  sf_fabric_factory(args=(), name="fabric", start=True) -> another fabric
  sf_harness sf_harness(nranks, tests, plugin=None, ...) -> HarnessResult with .json, check_*()
  sf_launch  sf_launch(cmd=[...], nodes=2, gpus_per_node=1, scenario=None, fabric=None, env=None,
             timeout=120) -> sf.launch.LaunchResult: every rank's exit status, outcome(), log
             (output(rank)) and check_ok(); ranks get what `simfabric launch` gives them
  sf_nccl_gpu  sf.paths.Paths of the build, for a test that runs the NCCL job program on a GPU;
             skips with the reason where there is no GPU or the program is not built
  sf_run     sf_run(scenario) -> ScenarioRun: `simfabric run` of a scenario file in a fresh
             process under a hard timeout (every rank's stack dumped when it fires); .passed,
             .report, check_ok()
The unprefixed names of earlier versions (fabric, fabric_factory, harness, nccl_gpu) still work.
Failures print the daemon's and every rank's logs. Markers: gpu, timing, slow.

Options: --simfabric-build-dir DIR, --simfabric-keep-logs, --simfabric-no-timing,
--simfabric-scenarios GLOB (ini: simfabric_scenarios).

Scenario files as tests: a test module that says

    test_my_scenarios = simfabric_pytest.scenario_tests("path/to/scenarios/job-*.yaml")

gets one test per file with a job: section (test_my_scenarios::job-x.yaml), run by `simfabric
run` and marked gpu (programs nccl and torch: skipped with the reason where there is no GPU),
timing (expect: timing:) and slow. Files that pytest meets while collecting are collected the
same way only when they match a glob of --simfabric-scenarios or of the ini option
simfabric_scenarios (a glob without '/' matches the file's name, one with '/' the end of its
path); by default no .yaml file is collected.
"""
import fnmatch
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.realpath(__file__))


def _tools_of(d):
    """The directory of simfabric's Python modules in d, a checkout (tools/) or an install
    prefix (lib/simfabric/python/), else None."""
    for t in (os.path.join(d, "tools"), os.path.join(d, "lib", "simfabric", "python")):
        if os.path.isfile(os.path.join(t, "sf", "ctl.py")):
            return os.path.realpath(t)
    return None


def _find_tools():
    """Where simfabric's Python package (sf) is, the first of: under
    $SIMFABRIC_HOME (a checkout or an install prefix); the checkout this file is in (its
    pytests/); this directory (installed next to them, $PREFIX/lib/simfabric/python); under
    the simfabric whose `simfabric` is on PATH. None: wherever `import sf` finds it."""
    if os.environ.get("SIMFABRIC_HOME"):
        return _tools_of(os.environ["SIMFABRIC_HOME"])
    if os.path.isfile(os.path.join(HERE, "sf", "ctl.py")):
        return HERE
    cands = [os.path.dirname(HERE)]
    cli = shutil.which("simfabric")
    if cli:  # a checkout's tools/simfabric, or $PREFIX/bin/simfabric
        cands.append(os.path.dirname(os.path.dirname(os.path.realpath(cli))))
    for c in cands:
        if _tools_of(c):
            return _tools_of(c)
    return None


def _layout(tools):
    """(root, prefix): the checkout whose tools/ this is, or the prefix whose
    lib/simfabric/python it is; (None, None) for modules anywhere else."""
    up = os.path.dirname(tools)
    if os.path.basename(tools) == "tools" and os.path.isfile(os.path.join(up, "sim", "core",
                                                                          "version.h")):
        return up, None
    if tools.endswith(os.path.join(os.sep, "lib", "simfabric", "python")):
        return None, os.path.dirname(os.path.dirname(up))
    return None, None


TOOLS = _find_tools()
if TOOLS and TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)
try:
    from sf import ctl as sfctl
    from sf.daemon import Daemon
except ImportError:  # the fixtures say so (sf_env); the options and markers still load
    sfctl, Daemon = None, object
else:
    TOOLS = os.path.dirname(os.path.dirname(os.path.realpath(sfctl.__file__)))
# ROOT: the simfabric checkout (None when installed); PREFIX: the install prefix (None in one).
ROOT, PREFIX = _layout(TOOLS) if TOOLS else (None, None)


def _not_found():
    return ("simfabric's Python package (sf/) is not found%s: set "
            "SIMFABRIC_HOME to a simfabric checkout or install prefix, or put its "
            "lib/simfabric/python (a checkout's tools/) on PYTHONPATH" % (
                " under SIMFABRIC_HOME=%s" % os.environ["SIMFABRIC_HOME"]
                if os.environ.get("SIMFABRIC_HOME") else ""))


# Option names: the --simfabric-* spellings (pytests/conftest.py adds the suite's old ones).
OPT_BUILD, OPT_KEEP, OPT_NO_TIMING = ("--simfabric-build-dir", "--simfabric-keep-logs",
                                      "--simfabric-no-timing")
MARKERS = (
    "gpu: needs an NVIDIA GPU with NCCL (skipped with a reason elsewhere)",
    "timing: asserts timing against the model; may be skipped on noisy machines "
    "(--simfabric-no-timing)",
    "slow: takes more than a few seconds (run by default; deselect with -m \"not slow\")",
)


def pytest_addoption(parser):
    g = parser.getgroup("simfabric")
    g.addoption(OPT_BUILD, dest="simfabric_build_dir", metavar="DIR", default=None,
                help="where the built daemon, plugin and harness are (default: "
                     "$SIMFABRIC_BUILD, else build/ of the simfabric checkout, else the "
                     "install's bin/ and lib/)")
    g.addoption(OPT_KEEP, dest="simfabric_keep_logs", action="store_true",
                help="print logs of passing tests too")
    g.addoption(OPT_NO_TIMING, dest="simfabric_no_timing", action="store_true",
                help="skip tests marked timing")
    g.addoption("--simfabric-scenarios", dest="simfabric_scenarios", metavar="GLOB",
                action="append", default=[],
                help="collect scenario files matching GLOB as tests (repeatable; a GLOB without "
                     "/ matches file names: 'job-*.yaml'); none by default")
    parser.addini("simfabric_scenarios", type="args", default=[],
                  help="globs of scenario files collected as tests, as --simfabric-scenarios")
    parser.addini("simfabric_scenario_files", type="args", default=[],
                  help="old name of simfabric_scenarios")


def pytest_configure(config):
    for m in MARKERS:
        config.addinivalue_line("markers", m)


def pytest_report_header(config):
    """One line under pytest's own: which simfabric, and from where (a checkout or a prefix)."""
    if sfctl is None:
        return "simfabric: not found (%s)" % _not_found()
    return "simfabric %s: %s" % (sfctl.version(), ("checkout %s" % ROOT) if ROOT else (
        "installed in %s" % PREFIX) if PREFIX else "modules in %s" % TOOLS)


def pytest_collection_modifyitems(config, items):
    if config.getoption("simfabric_no_timing"):
        skip = pytest.mark.skip(reason="%s given" % OPT_NO_TIMING)
        for it in items:
            if "timing" in it.keywords:
                it.add_marker(skip)


def _installed_plugin(prefix):
    """The plugin of the install at prefix: in its LIBDIR, which the install's sf.paths knows
    (make install LIBDIR=...), else prefix/lib."""
    if sfctl is not None:
        from sf.paths import Paths
        plugin = Paths(os.path.join(prefix, "bin")).plugin
        if os.path.exists(plugin):
            return plugin
    return os.path.join(prefix, "lib", "libnccl-net-simfabric.so")


class Env:
    """Where simfabric's programs are: a build directory (build, default the checkout's build/),
    or, installed, $PREFIX/bin and $PREFIX/lib (prefix)."""

    def __init__(self, build=None, prefix=None):
        self.root, self.prefix = ROOT, None
        if build is None and prefix is None:
            build = os.environ.get("SIMFABRIC_BUILD") or (
                os.path.join(ROOT, "build") if ROOT else None)
            daemon = shutil.which("simfabricd")
            prefix = None if build else PREFIX or (
                os.path.dirname(os.path.dirname(os.path.realpath(daemon))) if daemon else None)
        if build is None and prefix is not None:  # installed
            self.prefix = os.path.realpath(prefix)
            self.build = os.path.join(self.prefix, "bin")
            self.plugin = _installed_plugin(self.prefix)
        else:
            self.build = os.path.realpath(build or "build")
            self.plugin = os.path.join(self.build, "libnccl-net-simfabric.so")
        self.daemon = os.path.join(self.build, "simfabricd")
        self.harness = os.path.join(self.build, "simfabric-harness")
        self.nccljob = os.path.join(self.build, "simfabric-nccljob")
        self.cli = (os.path.join(ROOT, "tools", "simfabric") if ROOT else
                    os.path.join(self.prefix, "bin", "simfabric") if self.prefix else
                    shutil.which("simfabric") or "simfabric")

    def require(self, *paths):
        if sfctl is None:
            pytest.fail(_not_found(), pytrace=False)
        for p in paths:
            if not os.path.exists(p):
                pytest.fail("%s is missing: %s" % (
                    p, "run `make` first" if self.prefix is None else
                    "is simfabric installed under %s (make install)?" % self.prefix),
                    pytrace=False)

    def paths(self):
        """sf.paths.Paths of these programs, for the launcher."""
        p = _sflaunch().paths.Paths(self.build)
        p.daemon, p.plugin, p.harness, p.nccljob = (self.daemon, self.plugin, self.harness,
                                                    self.nccljob)
        return p

    def run_env(self):
        """What a `simfabric` process needs in its environment to use these programs."""
        return {"SIMFABRIC_BUILD": self.build} if self.prefix is None else {}


def config_env(config):
    """The Env of this pytest run (--simfabric-build-dir), made once."""
    e = getattr(config, "_simfabric_env", None)
    if e is None:
        e = config._simfabric_env = Env(config.getoption("simfabric_build_dir"))
    return e


@pytest.fixture(scope="session")
def sf_env(request):
    """Env: where the daemon, plugin, harness and CLI are (--simfabric-build-dir)."""
    e = config_env(request.config)
    e.require(e.daemon, e.plugin, e.harness)
    return e


def _tail(path, n=12000):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return "(no log at %s)" % path
    text = data.decode("utf-8", "replace")
    return text if len(text) <= n else "...\n" + text[-n:]


class Fabric(Daemon):
    """One simfabricd process (sf.daemon.Daemon) on a socket of its own, for a test: a start
    that does not answer fails the test with the daemon's log."""

    def __init__(self, env, rundir, args=()):
        self.env = env
        self.rundir = rundir
        os.makedirs(rundir, mode=0o700, exist_ok=True)
        os.chmod(rundir, 0o700)
        self.args = list(args)
        super().__init__(env.daemon, os.path.join(rundir, "ctl.sock"),
                         os.path.join(rundir, "simfabricd.log"), ["-v"] + self.args)
        self.logpath = self.log_path

    def start(self, wait=True):
        try:
            return super().start(wait=wait, timeout=10)
        except sfctl.CtlError as e:
            pytest.fail("%s\n--- simfabricd log ---\n%s" % (e, self.log()), pytrace=False)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stop the daemon; returns its exit status (None if it had to be SIGKILLed: then
        self.hung says so, and the fixtures fail the test)."""
        rc = super().stop(sig, timeout)
        return None if self.hung else rc


def _failed(request):
    rep = getattr(request.node, "_simfabric_rep_call", None)
    return rep is not None and rep.failed


@pytest.fixture
def sf_fabric_factory(sf_env, tmp_path, request):
    """sf_fabric_factory(args=(), name="fabric", start=True) -> Fabric: a daemon of its own."""
    made = []

    def make(args=(), name="fabric", start=True):
        used = {os.path.basename(f.rundir) for f in made}
        base, k = name, 1
        while name in used:  # a second fabric in one test gets a directory of its own
            k += 1
            name = "%s-%d" % (base, k)
        f = Fabric(sf_env, str(tmp_path / name), args)
        made.append(f)
        return f.start() if start else f

    yield make
    failed = _failed(request)
    for f in made:
        rc = f.stop()
        if failed or request.config.getoption("simfabric_keep_logs"):
            sys.stderr.write("\n--- simfabricd log (%s) ---\n%s\n" % (f.rundir, f.log()))
        if getattr(f, "hung", False):
            pytest.fail("simfabricd did not exit within 10 s of SIGTERM at teardown (it was "
                        "SIGKILLed)\n%s" % f.log(), pytrace=False)
        if rc not in (0, None, -9) and f.proc.returncode != -9:
            pytest.fail("simfabricd exited with status %s at teardown\n%s" % (rc, f.log()),
                        pytrace=False)


@pytest.fixture
def sf_fabric(sf_fabric_factory):
    """A running simfabricd (Fabric) on a socket of its own under the test's tmp_path."""
    return sf_fabric_factory()


class HarnessResult:
    def __init__(self, argv, rc, out, err, jpath, seconds):
        self.argv, self.rc, self.stdout, self.stderr, self.seconds = argv, rc, out, err, seconds
        self.json = None
        if os.path.exists(jpath):
            with open(jpath) as f:
                try:
                    self.json = json.load(f)
                except ValueError as e:
                    self.json_error = str(e)

    def report(self):
        return ("$ %s\nexit status %s after %.1f s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
            " ".join(self.argv), self.rc, self.seconds, self.stdout[-8000:], self.stderr[-12000:]))

    def check_ok(self):
        assert self.rc == 0 and self.json is not None and self.json.get("ok"), self.report()
        return self

    def tests(self, name=None):
        ts = (self.json or {}).get("tests", [])
        return [t for t in ts if name is None or t.get("name") == name]


@pytest.fixture
def sf_harness(sf_env, sf_fabric_factory, tmp_path):
    """sf_harness(nranks=2, tests='all', fabric=None, extra=(), env=None, timeout=300,
    plugin=None, popen=False) -> HarnessResult (a fabric of its own unless fabric is given)."""
    n = [0]

    def run(nranks=2, tests="all", fabric=None, extra=(), env=None, timeout=300, plugin=None,
            popen=False):
        if fabric is None:
            fabric = sf_fabric_factory()
        n[0] += 1
        jpath = str(tmp_path / ("harness-%d.json" % n[0]))
        argv = [sf_env.harness, "--plugin", plugin or sf_env.plugin, "--nranks", str(nranks),
                "--tests", tests, "--json", jpath, "--timeout", str(int(timeout))] + list(extra)
        e = dict(os.environ)
        e.update(fabric.env_vars())
        e.setdefault("NCCL_DEBUG", "WARN")
        if env:
            e.update(env)
        t0 = time.monotonic()
        if popen:
            p = subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
            p.jpath, p.argv, p.t0 = jpath, argv, t0
            return p
        try:
            cp = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout + 30)
            rc, out, err = cp.returncode, cp.stdout, cp.stderr
        except subprocess.TimeoutExpired as ex:
            rc, out, err = "timeout", ex.stdout or "", ex.stderr or ""
            if isinstance(out, bytes):
                out, err = out.decode(), err.decode() if err else ""
        return HarnessResult(argv, rc, out, err, jpath, time.monotonic() - t0)

    return run


def finish(p, timeout):
    """Wait for a harness started with popen=True and wrap its result."""
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        rc = "timeout"
    return HarnessResult(p.argv, rc, out, err, p.jpath, time.monotonic() - p.t0)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "_simfabric_rep_" + rep.when, rep)


# ---- jobs: sf_launch, sf_run, scenario files as tests ------------------------------------------

def _sflaunch():
    """The sf package, with the modules the fixtures use (sf.launch, .ranks, .procs, .recipe,
    .paths) loaded."""
    if sfctl is None:
        pytest.fail(_not_found(), pytrace=False)
    import sf.launch
    import sf.paths
    import sf.procs
    import sf.ranks
    import sf.recipe  # noqa: F401 - loaded for sl.recipe
    return sf


@pytest.fixture
def sf_nccl_gpu(sf_env):
    """sf.paths.Paths of the programs; skips where there is no GPU or no NCCL job program."""
    sl = _sflaunch()
    paths = sf_env.paths()
    if not sl.ranks.gpu_ids():
        pytest.skip("needs an NVIDIA GPU (nvidia-smi %s)" % (
            "lists no GPU" if shutil.which("nvidia-smi") else "not found"))
    if not os.path.exists(paths.nccljob):
        pytest.skip("%s is not built (needs CUDA and NCCL at build time)" % paths.nccljob)
    return paths


@pytest.fixture
def sf_launch(sf_env, tmp_path, request):
    """sf_launch(cmd, nodes=2, gpus_per_node=1, scenario=None, fabric=None, env=None,
    timeout=120, mpi=False, mpi_args=(), **kw) runs cmd as nodes x gpus_per_node ranks, each its
    own emulated node (the ideal fabric by default, a scenario's, or a running `fabric`
    fixture's), and returns sf.launch.LaunchResult; kw goes to sf.launch.launch (grace,
    fail_grace, echo, ...).

    mpi=True is `simfabric launch --mpi`: cmd is an MPI program (nccl-tests' all_reduce_perf)
    started by one mpirun ($SIMFABRIC_MPIRUN, else mpirun on PATH; the test is skipped, with the
    reason, where there is none), each MPI rank with its node's NCCL_HOSTID and SIMFABRIC_NODE;
    mpi="PATH" names the mpirun (missing: the test fails); mpi_args are mpirun's own arguments
    (a list, or one string split as a shell would: "--mca btl self,vader"). mpirun is then the
    result's one process: output(0) is its whole output, its exit status the launch's."""
    sl = _sflaunch()
    made = []

    def run(cmd, nodes=2, gpus_per_node=1, scenario=None, fabric=None, env=None, timeout=120,
            mpi=False, mpi_args=(), **kw):
        d = tmp_path / ("launch-%d" % (len(made) + 1))
        kw.setdefault("echo", False)
        if isinstance(mpi_args, str):
            mpi_args = shlex.split(mpi_args)
        if mpi_args and not mpi:
            raise ValueError("sf_launch: mpi_args are for mpi=True (or mpi=PATH)")
        if isinstance(mpi, str):
            env = dict(env or {}, SIMFABRIC_MPIRUN=mpi)
        if mpi:
            missing = None
            try:
                sl.ranks.find_mpirun(dict(os.environ, **(env or {})))
            except sl.paths.LaunchError as e:
                missing = str(e)
            if missing and isinstance(mpi, str):  # the mpirun the test named: a mistake
                pytest.fail(missing, pytrace=False)
            if missing:  # mpi=True: this machine has none
                pytest.skip(missing)
        r = sl.launch.launch(list(cmd), nodes, gpus_per_node, scenario=scenario,
                      socket=fabric.socket if fabric is not None else None, run_dir=str(d),
                      env=env, timeout=timeout, paths=sf_env.paths(), mpi=bool(mpi),
                      mpi_args=list(mpi_args), **kw)
        made.append(r)
        return r

    yield run
    if _failed(request) or request.config.getoption("simfabric_keep_logs"):
        for r in made:
            sys.stderr.write("\n--- launch in %s ---\n%s\n" % (r.run_dir, r.logs()))


def nccljob(paths, tmp_path, name, args, nodes=2, gpus_per_node=1, scenario_text=None,
            env=None, timeout=300):
    """Run the NCCL job program (paths: sf.paths.Paths) with args over a fabric: the ideal one,
    or scenario_text written to tmp_path/<name>.yaml. Returns (LaunchResult, rank 0's JSON
    result or None). The run directory is tmp_path/<name>."""
    sl = _sflaunch()
    sc = None
    if scenario_text:
        sc = tmp_path / (name + ".yaml")
        sc.write_text(scenario_text)
    out = tmp_path / ("%s-%%r.json" % name)
    r = sl.launch.launch([paths.nccljob] + list(args) + ["--json", str(out)], nodes, gpus_per_node,
                  scenario=str(sc) if sc else None, run_dir=str(tmp_path / name), echo=False,
                  timeout=timeout + 60, paths=paths, env=env)
    p0 = str(out).replace("%r", "0")
    if not os.path.exists(p0):
        return r, None
    with open(p0) as f:
        return r, json.load(f)


class ScenarioRun:
    """`simfabric run` of one scenario: .rc, .report (text), .json (report.json), .passed,
    .run_dir; logs() has every rank's log, the daemon's and any stack dump."""

    def __init__(self, scenario, argv, rc, out, err, run_dir, seconds, hung=None):
        self.scenario, self.argv, self.rc, self.stdout, self.stderr = scenario, argv, rc, out, err
        self.run_dir, self.seconds, self.hung = run_dir, seconds, hung
        self.json = None
        try:
            with open(os.path.join(run_dir, "report.json")) as f:
                self.json = json.load(f)
        except (OSError, ValueError):
            pass
        try:
            with open(os.path.join(run_dir, "report.txt")) as f:
                self.report = f.read()
        except OSError:
            self.report = out

    @property
    def passed(self):
        return self.rc == 0 and bool(self.json and self.json.get("passed"))

    @property
    def skipped(self):
        return (self.json or {}).get("skipped")

    def logs(self, limit=8000):
        parts = []
        if os.path.isdir(self.run_dir):
            for name in sorted(os.listdir(self.run_dir)):
                if name.endswith((".log", ".txt")) and name != "report.txt":
                    parts.append("--- %s ---\n%s" % (os.path.join(self.run_dir, name),
                                                     _tail(os.path.join(self.run_dir, name),
                                                           limit)))
        return "\n".join(parts)

    def explain(self):
        head = "$ %s\nexit status %s after %.1f s%s" % (
            " ".join(self.argv), self.rc, self.seconds,
            "\nHARD TIMEOUT: %s" % self.hung if self.hung else "")
        return "%s\n%s\n--- stderr ---\n%s\n%s" % (head, self.report, self.stderr[-6000:],
                                                    self.logs())

    def check_ok(self):
        assert self.passed, self.explain()
        return self


def run_scenario_process(env, scenario, run_dir, extra=(), timeout=None):
    """`simfabric run SCENARIO` in a fresh process, under a hard timeout (the job's timeout_s
    plus a margin, or timeout): when it fires every process of the run gets its stack dumped
    into run_dir/hard-timeout-stacks.txt (gdb, else /proc; the launcher's own Python stack via
    SIGUSR1), then all of them are killed."""
    sl = _sflaunch()
    if timeout is None:
        try:
            job = sl.launch.dump_scenario(scenario, env.paths()).get("job") or {}
        except sl.paths.LaunchError:
            job = {}
        timeout = job.get("timeout_s", 600) + 90
    os.makedirs(run_dir, exist_ok=True)
    argv = [sys.executable, env.cli, "run", scenario, "--run-dir", run_dir, "--quiet"] + list(
        extra)
    e = dict(os.environ, **env.run_env())
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    hung = None
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = sl.procs.process_tree(p.pid)
        path = os.path.join(run_dir, "hard-timeout-stacks.txt")
        try:
            os.kill(p.pid, signal.SIGUSR1)  # the launcher's faulthandler: its Python stack
        except OSError:
            pass
        sl.procs.dump_stacks(tree, path)
        for q in reversed(tree):
            try:
                os.kill(q, signal.SIGKILL)
            except OSError:
                pass
        out, err = p.communicate()
        hung = "the run passed its %.0f s bound; stacks in %s" % (timeout, path)
    return ScenarioRun(scenario, argv, p.returncode, out, err, run_dir, time.monotonic() - t0,
                       hung)


@pytest.fixture
def sf_run(sf_env, tmp_path):
    """sf_run(scenario, extra=(), timeout=None) -> ScenarioRun (check_ok() asserts it passed)."""
    n = [0]

    def run(scenario, extra=(), timeout=None):
        n[0] += 1
        return run_scenario_process(sf_env, str(scenario), str(tmp_path / ("run-%d" % n[0])),
                                    extra, timeout)

    return run


class ScenarioTests:
    """A test module's `test_x = scenario_tests(glob)`: one test per scenario file with a job:."""

    def __init__(self, *patterns):
        self.patterns = patterns

    def files(self):
        import glob
        out = []
        for pat in self.patterns:
            out += sorted(glob.glob(str(pat)))
        return out


def scenario_tests(*patterns):
    return ScenarioTests(*patterns)


class ScenarioError(Exception):
    pass


class ScenarioItem(pytest.Item):
    """One scenario file's job, run by `simfabric run` in a fresh process."""

    def __init__(self, *, spath, dump=None, error=None, **kw):
        super().__init__(**kw)
        self.spath, self.dump, self.error = str(spath), dump, error
        job = (dump or {}).get("job") or {}
        expect = (dump or {}).get("expect") or {}
        sl = _sflaunch()
        if job and sl.recipe.needs_gpu(job):
            self.add_marker(pytest.mark.gpu)
            self.add_marker(pytest.mark.slow)
        if expect.get("timing"):
            self.add_marker(pytest.mark.timing)
        if job.get("program") == "harness" and "bench" in (job.get("tests") or ()):
            self.add_marker(pytest.mark.slow)
        self.run = None

    def runtest(self):
        if self.error:
            raise ScenarioError(self.error)
        sl = _sflaunch()
        env = config_env(self.config)
        why = sl.recipe.can_run(self.dump["job"], env.paths())
        if why:
            pytest.skip(why)
        try:
            base = self.config._tmp_path_factory.mktemp(os.path.basename(self.spath))
        except AttributeError:
            import tempfile
            base = tempfile.mkdtemp(prefix="sf-scn-")
        self.run = run_scenario_process(env, self.spath, str(base))
        if self.run.skipped:
            pytest.skip(self.run.skipped)
        if not self.run.passed:
            raise ScenarioError(self.run.explain())
        if self.config.getoption("simfabric_keep_logs"):
            sys.stderr.write("\n" + self.run.report + "\n")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ScenarioError):
            return "scenario %s failed:\n%s" % (self.spath, excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.spath, 0, "scenario %s" % os.path.basename(self.spath)


def _scenario_item(parent, path, name=None):
    """The item for a scenario file, or None if it has no job: (a bad file: a failing item)."""
    sl = _sflaunch()
    env = config_env(parent.config)
    try:
        dump = sl.launch.dump_scenario(str(path), env.paths())
    except sl.paths.LaunchError as e:
        return ScenarioItem.from_parent(parent, name=name or os.path.basename(str(path)),
                                        spath=path, error=str(e))
    if not dump.get("job"):
        return None
    return ScenarioItem.from_parent(parent, name=name or os.path.basename(str(path)), spath=path,
                                    dump=dump)


class ScenarioCollector(pytest.Collector):
    def collect(self):
        for f in self.obj.files():
            it = _scenario_item(self, f)
            if it is not None:
                yield it


class ScenarioFile(pytest.File):
    def collect(self):
        it = _scenario_item(self, self.path, name=self.path.name)
        if it is not None:
            yield it


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    if isinstance(obj, ScenarioTests):
        c = ScenarioCollector.from_parent(collector, name=name)
        c.obj = obj
        return c
    return None


def scenario_globs(config):
    """The globs of scenario files to collect: --simfabric-scenarios, else the ini option."""
    return (config.getoption("simfabric_scenarios") or config.getini("simfabric_scenarios") or
            config.getini("simfabric_scenario_files"))


def matches(path, pattern):
    """A glob without / matches the file's name; one with /, the end of its path."""
    path = str(path)
    if "/" not in pattern:
        return fnmatch.fnmatch(os.path.basename(path), pattern)
    return fnmatch.fnmatch(path, pattern if os.path.isabs(pattern) else "*/" + pattern)


def pytest_collect_file(parent, file_path):
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    if any(matches(file_path, p) for p in scenario_globs(parent.config)):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


# ---- the names of earlier versions, kept: fabric, fabric_factory, harness, nccl_gpu ----------

def _alias(old, new):
    def fixture(request):
        return request.getfixturevalue(new)
    fixture.__doc__ = "The old name of %s." % new
    return pytest.fixture(name=old)(fixture)


for _old in ("fabric", "fabric_factory", "harness", "nccl_gpu"):
    globals()["_alias_" + _old] = _alias(_old, "sf_" + _old)
