# SPDX-License-Identifier: MIT
"""`make install` and `make uninstall` (docs/install.md): the installed tree works from outside
the checkout with a clean environment (no PYTHONPATH, nothing of the checkout on any path): the
CLI, a scenario's job over the installed daemon, harness and plugin, the man pages, the bash
completion, and the installed pytest plugin; uninstall leaves no file behind. CPU only."""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT
PREFIX = "/usr"
LIBDIR = "/usr/lib64"  # not the default: the knob must reach sflaunch's Paths
PROGRAMS = ("simfabric", "simfabricd", "simfabric-harness")


def sh(argv, cwd, env=None, timeout=120):
    """Run argv; returns (CompletedProcess, a text for assertion messages: the command and all
    it printed)."""
    p = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True,
                       timeout=timeout)
    return p, "$ %s\nexit status %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        " ".join(map(str, argv)), p.returncode, p.stdout[-8000:], p.stderr[-8000:])


def make(target, destdir):
    p, said = sh(["make", "--no-print-directory", target, "DESTDIR=%s" % destdir,
                  "PREFIX=%s" % PREFIX, "LIBDIR=%s" % LIBDIR], ROOT, timeout=600)
    if p.returncode != 0:
        pytest.fail("make %s failed:\n%s" % (target, said), pytrace=False)


class Tree:
    """An installed tree under destdir: where its parts are, and a clean environment to run
    them in (home: a directory of its own; PATH: the system's, then the tree's bin/)."""

    def __init__(self, destdir, home):
        self.destdir = str(destdir)
        self.bin = os.path.join(self.destdir, PREFIX.lstrip("/"), "bin")
        self.libdir = os.path.join(self.destdir, LIBDIR.lstrip("/"))
        self.pydir = os.path.join(self.destdir, PREFIX.lstrip("/"), "lib", "simfabric", "python")
        self.share = os.path.join(self.destdir, PREFIX.lstrip("/"), "share")
        self.cli = os.path.join(self.bin, "simfabric")
        os.makedirs(str(home), exist_ok=True)
        self.env = {"PATH": "/usr/bin:/bin:" + self.bin, "HOME": str(home), "LANG": "C.UTF-8"}

    def files(self):
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(self.destdir) for f in fs)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    make("install", base / "dest")
    return Tree(base / "dest", base / "home")


def header_version():
    with open(os.path.join(ROOT, "sim", "core", "version.h")) as f:
        return re.search(r'#define SF_VERSION "([^"]+)"', f.read()).group(1)


def test_25_01_the_tree_has_every_part_with_installs_modes(tree):
    want = [os.path.join(tree.bin, p) for p in PROGRAMS] + [
        os.path.join(tree.libdir, "libnccl-net-simfabric.so"),
        os.path.join(tree.libdir, "libnccl-profiler-simfabric-check.so"),
        os.path.join(tree.pydir, "sfctl.py"), os.path.join(tree.pydir, "sflaunch.py"),
        os.path.join(tree.pydir, "sf", "daemon.py"), os.path.join(tree.pydir, "sf", "launch.py"),
        os.path.join(tree.pydir, "simfabric_pytest.py"),
        os.path.join(tree.pydir, "sfpyhook", "sitecustomize.py"),
        os.path.join(tree.share, "simfabric", "scenarios", "job-harness-ideal.yaml"),
        os.path.join(tree.destdir, PREFIX.lstrip("/"), "include", "simfabric", "ncclnet.h"),
        os.path.join(tree.share, "bash-completion", "completions", "simfabric")]
    files = tree.files()
    assert not [w for w in want if w not in files], "\n".join(files)
    for f in files:
        mode = stat.S_IMODE(os.stat(f).st_mode)
        runs = f.startswith(tree.bin + "/") or f.endswith((".so", ".sh"))
        assert mode == (0o755 if runs else 0o644), "%s: mode %o" % (f, mode)


def test_25_02_the_installed_cli_says_its_version_and_help(tree, tmp_path):
    p, said = sh([tree.cli, "--version"], tmp_path, tree.env)
    assert p.returncode == 0 and p.stdout.split() == ["simfabric", header_version()], said
    p, said = sh([tree.cli, "--help"], tmp_path, tree.env)
    assert p.returncode == 0 and "usage: simfabric" in p.stdout and "launch" in p.stdout, said
    for prog in PROGRAMS[1:]:
        p, said = sh([os.path.join(tree.bin, prog), "--version"], tmp_path, tree.env)
        assert p.returncode == 0 and header_version() in p.stdout + p.stderr, said


def test_25_03_simfabric_run_passes_an_installed_scenario_over_the_installed_tree(tree,
                                                                                  tmp_path):
    scenario = os.path.join(tree.share, "simfabric", "scenarios", "job-harness-ideal.yaml")
    run_dir = str(tmp_path / "run")
    argv = [tree.cli, "run", scenario, "--run-dir", run_dir, "--quiet"]
    t0 = time.monotonic()
    p, _ = sh(argv, tmp_path, tree.env, timeout=180)
    r = simfabric_pytest.ScenarioRun(scenario, argv, p.returncode, p.stdout, p.stderr, run_dir,
                                     time.monotonic() - t0).check_ok()
    # the job ran the installed harness and plugin, not the checkout's
    with open(os.path.join(run_dir, "job.json")) as f:
        argv_run = json.load(f)["argv"]
    assert argv_run[0] == os.path.join(tree.bin, "simfabric-harness"), (argv_run, r.explain())
    assert os.path.join(tree.libdir, "libnccl-net-simfabric.so") in argv_run, argv_run


def test_25_04_the_man_pages_are_troff_that_man_reads(tree, tmp_path):
    for prog in PROGRAMS:
        page = os.path.join(tree.share, "man", "man1", prog + ".1")
        with open(page) as f:
            text = f.read()
        assert re.search(r'^\.TH %s 1 ' % re.escape(prog.upper()), text, re.M), text[:2000]
        assert "\n.SH DESCRIPTION\n" in text and "usage: %s" % prog in text.replace("\\-", "-")
        if not shutil.which("man"):
            continue
        env = dict(tree.env, MANWIDTH="80", MANPAGER="cat", PAGER="cat")
        p, said = sh(["man", "-l", page], tmp_path, env)
        assert p.returncode == 0 and "NAME" in p.stdout and prog in p.stdout, said


def test_25_05_the_bash_completion_completes_subcommands_and_options(tree, tmp_path):
    comp = os.path.join(tree.share, "bash-completion", "completions", "simfabric")
    script = ('source "%s"; t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
              'COMPREPLY=(); _simfabric; echo "${COMPREPLY[*]}"; }; '
              't simfabric r; t simfabric trace ""; t simfabric report --format s' % comp)
    p, said = sh(["bash", "--norc", "-c", script], tmp_path, tree.env)
    assert p.returncode == 0 and p.stdout.splitlines() == ["run report", "merge summary",
                                                           "svg"], said


def test_25_06_the_installed_pytest_plugin_gives_a_fabric(tree, tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    (work / "test_uses_simfabric.py").write_text(
        "def test_two_ranks_connect(sf_env, harness):\n"
        "    assert sf_env.plugin.startswith(%r), sf_env.plugin\n"
        "    harness(nranks=2, tests='connect').check_ok()\n" % tree.destdir)
    env = dict(tree.env, PYTHONPATH=tree.pydir)
    p, said = sh([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                  "simfabric_pytest", "test_uses_simfabric.py"], work, env, timeout=180)
    assert p.returncode == 0 and "1 passed" in p.stdout, said


def test_25_06b_the_installed_demo_runs_in_one_screen(tree, tmp_path):
    """`simfabric demo` from the installed tree: the installed programs and scenarios, one
    screen (at most 40 lines of at most 100 columns), PASS."""
    p, said = sh([tree.cli, "demo", "--out", str(tmp_path / "demo")], tmp_path, tree.env,
                 timeout=300)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and any(ln.startswith("PASS") for ln in lines), said
    assert len(lines) <= 40 and max(len(ln) for ln in lines) <= 100, said
    assert os.path.join(tree.libdir, "libnccl-net-simfabric.so") in p.stdout, said
    assert "scenarios: " + os.path.join(tree.share, "simfabric", "scenarios") in p.stdout, said
    assert "4. A fault: job-harness-flap.yaml" in p.stdout, said


def test_25_07_the_installed_header_compiles_on_its_own(tree, tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler")
    src = tmp_path / "uses_ncclnet.c"
    src.write_text("#include <simfabric/ncclnet.h>\n"
                   "int main(void) { return sizeof(ncclNet_v12_t) == 0; }\n")
    p, said = sh([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I",
                  os.path.join(tree.destdir, PREFIX.lstrip("/"), "include"), "-c", str(src),
                  "-o", str(tmp_path / "uses_ncclnet.o")], tmp_path, tree.env)
    assert p.returncode == 0, said


def test_25_08_uninstall_leaves_no_file_behind(tmp_path):
    make("install", tmp_path / "dest")
    t = Tree(tmp_path / "dest", tmp_path / "home")
    p, said = sh([t.cli, "--version"], tmp_path, t.env)  # leaves the modules' bytecode
    assert p.returncode == 0, said
    make("uninstall", tmp_path / "dest")
    assert t.files() == [], "left behind:\n" + "\n".join(t.files())
    assert not os.path.exists(os.path.join(t.destdir, PREFIX.lstrip("/"), "lib", "simfabric"))
    assert not os.path.exists(os.path.join(t.share, "simfabric"))
