# SPDX-License-Identifier: MIT
"""First contact (issue 16): what a newcomer meets first. `make` on a machine without the
libraries says which packages to install instead of dying on a missing header. CPU only."""
import os
import subprocess

import simfabric_pytest

ROOT = simfabric_pytest.ROOT


def _make(args, env, timeout=120):
    return subprocess.run(["make", "--no-print-directory"] + args, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_25_01_make_without_the_libraries_names_the_packages(tmp_path):
    """An empty PKG_CONFIG_LIBDIR makes pkg-config find neither libevent nor libyaml, as on a
    fresh machine: make stops before compiling anything and prints the Debian packages and the
    apt-get command (it used to die with `event2/event.h: No such file or directory`)."""
    empty = tmp_path / "pkgconfig"
    empty.mkdir()
    build = tmp_path / "build"
    p = _make(["B=%s" % build, "all"], dict(os.environ, PKG_CONFIG_LIBDIR=str(empty)))
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "libevent-dev" in out and "libyaml-dev" in out, out
    assert "apt-get install -y libevent-dev libyaml-dev" in out, out
    assert "No such file or directory" not in out and "  CC " not in out, out
    assert not (build / "obj").exists(), "make compiled something before checking"


def test_25_02_without_pkg_config_the_compiler_is_asked(tmp_path):
    """Where there is no pkg-config, deps.sh --build compiles the headers instead: found, it
    passes; a compiler that cannot see them (-nostdinc) names the packages."""
    script = os.path.join(ROOT, "tools", "scripts", "deps.sh")
    env = dict(os.environ, PKG_CONFIG=str(tmp_path / "no-pkg-config"))
    p = subprocess.run([script, "--build"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stderr, (p.returncode, p.stderr)
    env["CC"] = "cc -nostdinc"
    p = subprocess.run([script, "--build"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "libevent-dev libyaml-dev" in p.stderr, p.stderr
