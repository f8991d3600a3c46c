# SPDX-License-Identifier: MIT
"""simfabric's pytest plugin: a running fabric and a launcher, as fixtures.

Use it from your own project's conftest.py:

    pytest_plugins = ["simfabric_pytest"]      # with tools/ and pytests/ on sys.path

    def test_my_plugin(fabric, harness):
        r = harness(nranks=4, tests="sizes,allreduce")
        r.check_ok()

Fixtures (each a fresh process, per test):
  sf_env    paths of the built daemon, plugin and harness (session scope)
  fabric    a simfabricd on a run-time socket under the test's tmp_path; .show(), .log()
  harness   harness(nranks, tests, plugin=None, ...) -> HarnessResult with .json and check_*()
Failures print the daemon's and every rank's logs.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import sfctl  # noqa: E402


def pytest_addoption(parser):
    g = parser.getgroup("simfabric")
    g.addoption("--build-dir", default=os.environ.get("SIMFABRIC_BUILD", os.path.join(ROOT, "build")),
                help="where the built daemon, plugin and harness are (default: build/)")
    g.addoption("--keep-logs", action="store_true", help="print logs of passing tests too")
    g.addoption("--no-timing", action="store_true", help="skip tests marked timing")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--no-timing"):
        skip = pytest.mark.skip(reason="--no-timing given")
        for it in items:
            if "timing" in it.keywords:
                it.add_marker(skip)


class Env:
    def __init__(self, build):
        self.build = os.path.realpath(build)
        self.daemon = os.path.join(self.build, "simfabricd")
        self.plugin = os.path.join(self.build, "libnccl-net-simfabric.so")
        self.harness = os.path.join(self.build, "simfabric-harness")
        self.cli = os.path.join(ROOT, "tools", "simfabric")
        self.root = ROOT

    def require(self, *paths):
        for p in paths:
            if not os.path.exists(p):
                pytest.fail("%s is missing: run `make` first" % p, pytrace=False)


@pytest.fixture(scope="session")
def sf_env(request):
    e = Env(request.config.getoption("--build-dir"))
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


class Fabric:
    """One simfabricd process on a socket of its own."""

    def __init__(self, env, rundir, args=()):
        self.env = env
        self.rundir = rundir
        os.makedirs(rundir, mode=0o700, exist_ok=True)
        os.chmod(rundir, 0o700)
        self.socket = os.path.join(rundir, "ctl.sock")
        self.logpath = os.path.join(rundir, "simfabricd.log")
        self.args = list(args)
        self.proc = None

    def start(self, wait=True):
        self._log = open(self.logpath, "ab")
        self.proc = subprocess.Popen([self.env.daemon, "--socket", self.socket, "-v"] + self.args,
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        if wait:
            try:
                sfctl.wait_ready(self.socket, timeout=10, proc=self.proc)
            except sfctl.CtlError as e:
                pytest.fail("%s\n--- simfabricd log ---\n%s" % (e, self.log()), pytrace=False)
        return self

    def env_vars(self):
        return {"SIMFABRIC_SOCKET": self.socket}

    def show(self):
        return sfctl.show(self.socket)

    def request(self, op, **kv):
        return sfctl.request(self.socket, op, **kv)

    def log(self):
        return _tail(self.logpath)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stop the daemon; returns its exit status (None if it had to be SIGKILLed)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._log.close()
                return None
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def fabric_factory(sf_env, tmp_path, request):
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
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for f in made:
        rc = f.stop()
        if failed or request.config.getoption("--keep-logs"):
            sys.stderr.write("\n--- simfabricd log (%s) ---\n%s\n" % (f.rundir, f.log()))
        if rc not in (0, None, -9) and f.proc.returncode != -9:
            pytest.fail("simfabricd exited with status %s at teardown\n%s" % (rc, f.log()),
                        pytrace=False)


@pytest.fixture
def fabric(fabric_factory):
    return fabric_factory()


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
def harness(sf_env, fabric_factory, tmp_path):
    """harness(nranks=2, tests='all', fabric=None, extra=(), env=None, timeout=300)."""
    n = [0]

    def run(nranks=2, tests="all", fabric=None, extra=(), env=None, timeout=300, plugin=None,
            popen=False):
        if fabric is None:
            fabric = fabric_factory()
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
    setattr(item, "rep_" + rep.when, rep)
