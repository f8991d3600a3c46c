# SPDX-License-Identifier: MIT
"""The pytest plugin as a user loads it (issue 16, docs/pytest-plugin.md): a throwaway project
of the user's own, with an unrelated test_config.yaml and a test on simfabric's fixtures, run by
pytest in a fresh process with --strict-markers: loaded with -p from the checkout, from an
install's lib/simfabric/python, and by its entry point after `pip install` (no network). The
user's yaml is never collected, the fixtures work, the markers are known, --help lists the
options, scenario files are tests only when asked for. CPU only, a few seconds."""
import os
import subprocess
import sys

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT
PYTESTS = os.path.join(ROOT, "pytests")

USER_TEST = '''\
import os

import pytest


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.timing
def test_over_simfabric(sf_fabric, sf_harness):
    r = sf_harness(nranks=2, tests="connect", fabric=sf_fabric, timeout=60)
    r.check_ok()
    assert sf_fabric.alive()


def test_programs_from(sf_env):
    want = os.environ.get("SF_TEST_PREFIX")  # the install the plugin should have found
    if want:
        assert (sf_env.prefix, sf_env.daemon) == (want, os.path.join(want, "bin", "simfabricd"))
'''

# A scenario of the user's with a CPU-only job: a test only with --simfabric-scenarios.
USER_SCENARIO = """\
name: job-mine
fabric:
  kind: ideal
job:
  program: harness
  nodes: 2
  tests: [connect]
  timeout_s: 60
expect:
  data: exact
"""

USER_TESTS = ["test_user.py::test_over_simfabric PASSED", "test_user.py::test_programs_from PASSED"]


def make_project(tmp_path, scenario=False):
    d = tmp_path / "project"
    d.mkdir(parents=True)
    (d / "pytest.ini").write_text("[pytest]\n")
    (d / "test_config.yaml").write_text("# the user's own settings, not a test\nretries: 3\n")
    (d / "test_user.py").write_text(USER_TEST)
    if scenario:
        (d / "job-mine.yaml").write_text(USER_SCENARIO)
    return d


class Run:
    def __init__(self, argv, cp, pythonpath):
        self.argv, self.rc, self.out = argv, cp.returncode, cp.stdout + cp.stderr
        self.pythonpath = pythonpath

    def __str__(self):
        return "$ PYTHONPATH=%s %s\nexit status %s\n%s" % (self.pythonpath, " ".join(self.argv),
                                                          self.rc, self.out[-12000:])

    def check(self, passed, lines=()):
        """Exit 0, `passed` tests passed, each of lines in the output, no yaml but ours."""
        assert self.rc == 0 and ("%d passed" % passed) in self.out, str(self)
        for line in lines:
            assert line in self.out, "%r not in the output\n%s" % (line, self)
        assert "test_config.yaml" not in self.out, "the user's yaml was collected\n%s" % self
        return self


def user_pytest(project, pythonpath, *args, env=None):
    """pytest -v --strict-markers ARGS in the user's project, as a user runs it: PYTHONPATH,
    none of this suite's settings (SIMFABRIC_*, PYTEST_*) in the environment."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("SIMFABRIC_", "PYTEST_")) and k != "PYTHONPATH"}
    e["PYTHONPATH"] = pythonpath
    e.update(env or {})
    argv = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--strict-markers"]
    argv += list(args)
    cp = subprocess.run(argv, cwd=str(project), env=e, capture_output=True, text=True,
                        timeout=120)
    return Run(argv, cp, pythonpath)


def test_26_01_loaded_with_p_from_the_checkout(sf_env, tmp_path):
    d = make_project(tmp_path)
    user_pytest(d, PYTESTS, "-p", "simfabric_pytest", "--simfabric-build-dir",
                sf_env.build).check(2, USER_TESTS)


def test_26_02_help_lists_the_options(tmp_path):
    r = user_pytest(make_project(tmp_path), PYTESTS, "-p", "simfabric_pytest", "--help")
    assert r.rc == 0, str(r)
    for opt in ("--simfabric-build-dir", "--simfabric-keep-logs", "--simfabric-no-timing",
                "--simfabric-scenarios", "simfabric_scenarios"):
        assert opt in r.out, "%s not in --help\n%s" % (opt, r)
    for opt in ("--build-dir", "--keep-logs", "--no-timing"):  # the suite's own (conftest.py)
        assert " %s" % opt not in r.out, "the plugin takes %s from every project\n%s" % (opt, r)
    r = user_pytest(make_project(tmp_path / "m"), PYTESTS, "-p", "simfabric_pytest", "--markers")
    for m in ("@pytest.mark.gpu:", "@pytest.mark.timing:", "@pytest.mark.slow:"):
        assert m in r.out, str(r)


def test_26_03_scenario_files_only_when_asked(sf_env, tmp_path):
    d = make_project(tmp_path, scenario=True)
    args = ("-p", "simfabric_pytest", "--simfabric-build-dir", sf_env.build)
    r = user_pytest(d, PYTESTS, *args).check(2, USER_TESTS)
    assert "job-mine.yaml" not in r.out, str(r)
    mine = ["job-mine.yaml::job-mine.yaml PASSED"]
    user_pytest(d, PYTESTS, *args, "--simfabric-scenarios", "job-*.yaml").check(3, mine)
    user_pytest(d, PYTESTS, *args, "-o", "simfabric_scenarios=job-*.yaml").check(3, mine)


def test_26_04_an_install_directory(sf_env, tmp_path):
    """What `make install` lays out: the tools' modules and the plugin in
    $PREFIX/lib/simfabric/python, the programs in $PREFIX/bin and $PREFIX/lib; the plugin finds
    them with no option."""
    prefix = tmp_path / "prefix"
    py = prefix / "lib" / "simfabric" / "python"
    py.mkdir(parents=True)
    (prefix / "bin").mkdir()
    # Copies, as installed: links into the checkout would lead the plugin back to it.
    tools = os.path.join(ROOT, "tools")
    for f in [os.path.join(tools, f) for f in os.listdir(tools) if f.endswith(".py")] + [
            os.path.join(PYTESTS, "simfabric_pytest.py")]:
        (py / os.path.basename(f)).write_text(open(f).read())
    (py / "sf").mkdir()
    for f in os.listdir(os.path.join(tools, "sf")):
        if f.endswith(".py"):
            (py / "sf" / f).write_text(open(os.path.join(tools, "sf", f)).read())
    for f in ("simfabricd", "simfabric-harness"):
        os.symlink(os.path.join(sf_env.build, f), str(prefix / "bin" / f))
    os.symlink(sf_env.plugin, str(prefix / "lib" / "libnccl-net-simfabric.so"))
    d = make_project(tmp_path)
    user_pytest(d, str(py), "-p", "simfabric_pytest",
                env={"SF_TEST_PREFIX": os.path.realpath(str(prefix))}).check(2, USER_TESTS)


def pip_install(tmp_path):
    """`pip install --no-build-isolation --target T pytests/` of a copy of the checkout's
    packaging files (setuptools builds in the source tree), offline: T, or a skip with why."""
    src = tmp_path / "src"
    (src / "pytests").mkdir(parents=True)
    (src / "sim" / "core").mkdir(parents=True)
    for f in ("pyproject.toml", "setup.py", "simfabric_pytest.py"):
        (src / "pytests" / f).write_text(open(os.path.join(PYTESTS, f)).read())
    (src / "sim" / "core" / "version.h").write_text(
        open(os.path.join(ROOT, "sim", "core", "version.h")).read())
    target = tmp_path / "site"
    argv = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
            "--no-cache-dir", "--disable-pip-version-check", "--target", str(target),
            str(src / "pytests")]
    e = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    try:
        cp = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=120)
    except OSError as ex:
        pytest.skip("pip does not run here: %s" % ex)
    if cp.returncode != 0 and "No module named pip" in cp.stderr:
        pytest.skip("no pip for %s" % sys.executable)
    assert cp.returncode == 0, "$ %s\n%s%s" % (" ".join(argv), cp.stdout, cp.stderr)
    return target


def test_26_05_pip_installed_loads_by_its_entry_point(sf_env, tmp_path):
    site = pip_install(tmp_path)
    dist = [f for f in os.listdir(str(site)) if f.endswith(".dist-info")]
    assert len(dist) == 1, os.listdir(str(site))
    with open(str(site / dist[0] / "entry_points.txt")) as f:
        assert "simfabric_pytest = simfabric_pytest" in f.read()
    with open(os.path.join(ROOT, "sim", "core", "version.h")) as f:
        assert '"%s"' % dist[0].split("-")[1][:-len(".dist")] in f.read(), dist
    d = make_project(tmp_path)
    home = {"SIMFABRIC_HOME": ROOT}  # the package holds the plugin only; the tools are there
    args = ("--simfabric-build-dir", sf_env.build)
    user_pytest(d, str(site), *args, env=home).check(2, USER_TESTS)
    # Named as well (-p, or pytest_plugins in a conftest.py): loaded once, not twice.
    user_pytest(d, str(site), "-p", "simfabric_pytest", *args, env=home).check(2, USER_TESTS)
    r = user_pytest(d, str(site), "-p", "no:simfabric_pytest", env=home)  # and off: no markers
    assert r.rc != 0 and "'gpu' not found in `markers`" in r.out, str(r)


def test_26_06_the_suites_own_option_names(tmp_path):
    """This suite's --build-dir, --no-timing, --keep-logs (pytests/conftest.py) set the plugin's
    options."""
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
            "--build-dir", str(tmp_path / "nobuild"), "--keep-logs", "--no-timing"]
    cp = subprocess.run(argv + ["test_24_version.py::test_24_02_the_plugins_init_line_says_it"],
                        cwd=PYTESTS, capture_output=True, text=True, timeout=120)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 1 and "nobuild/simfabricd is missing" in out, out
    cp = subprocess.run(argv + ["-m", "timing", "test_09_models.py", "test_13_faults.py"],
                        cwd=PYTESTS, capture_output=True, text=True, timeout=120)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0 and "--simfabric-no-timing given" in out and " passed" not in out, out


HUNG_DAEMON = """
import os, signal


def test_fine(sf_fabric):
    assert sf_fabric.alive()


def test_daemon_stops_answering(sf_fabric):
    os.kill(sf_fabric.proc.pid, signal.SIGSTOP)  # it will never act on SIGTERM
"""


def test_26_09_a_daemon_that_hangs_at_teardown_fails_its_test(sf_env, tmp_path):
    """A daemon that does not exit on SIGTERM is a bug (audit F18): the fixture's teardown
    SIGKILLs it after 10 s and fails the test that used it, with its log; the other passes."""
    d = tmp_path / "hung"
    d.mkdir()
    (d / "pytest.ini").write_text("[pytest]\n")
    (d / "test_hung.py").write_text(HUNG_DAEMON)
    r = user_pytest(d, PYTESTS, "-p", "simfabric_pytest", "--simfabric-build-dir", sf_env.build)
    assert r.rc == 1, str(r)
    assert "test_fine PASSED" in r.out, str(r)
    assert "did not exit within 10 s of SIGTERM at teardown" in r.out, str(r)
    assert "2 passed, 1 error" in r.out, str(r)  # the second errs in its teardown
