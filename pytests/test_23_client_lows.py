# SPDX-License-Identifier: MIT
"""The low red-team findings of December 2026 on the client side (issue 15, item 7), each held
by a test: a bad SIMFABRIC_COPY_THREADS is named in a WARN (finding 9), trace and profcheck
temp files are never written through a planted link (finding 8), and the CLI gives one-line
errors, not tracebacks (finding 13)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.realpath(__file__))


@pytest.mark.parametrize("value,said", [
    ("4x", "ignoring SIMFABRIC_COPY_THREADS=4x: not a number of threads"),
    ("-1", "ignoring SIMFABRIC_COPY_THREADS=-1: not a number of threads"),
    ("10000", "SIMFABRIC_COPY_THREADS=10000 is above the limit of 32 threads; using 32"),
])
def test_23_01_a_bad_copy_threads_value_is_named(harness, value, said):
    """Finding 9: -1, abc or 4x silently meant 0 copy threads and 10000 silently meant 32,
    though copyq.c's comment said the plugin warns. It does now, through NCCL's logger."""
    r = harness(nranks=2, tests="connect", env={"SIMFABRIC_COPY_THREADS": value}, timeout=60)
    r.check_ok()
    assert said in r.stderr, r.report()


def test_23_02_a_good_copy_threads_value_says_nothing(harness):
    r = harness(nranks=2, tests="connect", env={"SIMFABRIC_COPY_THREADS": "2"}, timeout=60)
    r.check_ok()
    assert "SIMFABRIC_COPY_THREADS" not in r.stderr, r.report()


# Plant a link at OUT.tmp.<the pid the writer will have> (exec keeps the pid), then run the writer.
PLANT = 'ln -s "$1" "$2.tmp.$$" && shift 2 && exec "$@"'


def _planted(tmp_path, out, argv, env):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    p = subprocess.run(["sh", "-c", PLANT, "sh", str(victim), str(out)] + argv, env=env,
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, "%s failed (%s):\n%s\n%s" % (argv, p.returncode, p.stdout,
                                                          p.stderr)
    assert victim.read_text() == "precious\n", "the write went through the planted link"
    assert not [f for f in os.listdir(str(tmp_path)) if ".tmp." in f], os.listdir(str(tmp_path))
    assert out.is_file() and not out.is_symlink()
    return p


def test_23_03_a_trace_never_writes_through_a_planted_link(sf_env, fabric, tmp_path):
    """Finding 8: the trace's init probe and its write at exit opened FILE.tmp.PID with
    fopen("w"), so a link planted there truncated or overwrote what it points to."""
    out = tmp_path / "trace.json"
    env = dict(os.environ, SIMFABRIC_SOCKET=fabric.socket, SIMFABRIC_NODE="edge",
               SIMFABRIC_TRACE=str(out))
    _planted(tmp_path, out, [sys.executable, os.path.join(HERE, "apidrv.py"), sf_env.plugin,
                             "props"], env)
    assert out.read_text().startswith("{"), out.read_text()[:200]


def test_23_04_profcheck_never_writes_through_a_planted_link(sf_env, tmp_path):
    """Finding 8, the test profiler's summary (SIMFABRIC_PROFCHECK_OUT) the same way."""
    prof = os.path.join(sf_env.build, "libnccl-profiler-simfabric-check.so")
    sf_env.require(prof)
    out = tmp_path / "prof.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMFABRIC_PROFCHECK_")}
    env["SIMFABRIC_PROFCHECK_OUT"] = str(out)
    _planted(tmp_path, out, [sys.executable, os.path.join(HERE, "profdrv.py"), prof, "env"], env)
    assert '"ok"' in out.read_text()


def _cli(sf_env, fabric, *args, stdout=subprocess.PIPE):
    env = dict(os.environ, SIMFABRIC_SOCKET=fabric.socket)
    return subprocess.run([os.path.join(sf_env.root, "tools", "simfabric")] + list(args),
                          env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60)


@pytest.fixture
def links_fabric(sf_env, fabric_factory):
    return fabric_factory(args=["--scenario", os.path.join(sf_env.root, "scenarios",
                                                           "hdr-2node.yaml")])


def test_23_05_fault_list_into_a_closed_pipe_is_quiet(sf_env, links_fabric):
    """Finding 13: `simfabric fault list | head -1` ended in a BrokenPipeError traceback. The
    reader here has gone before the CLI starts, so every write it makes fails."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = _cli(sf_env, links_fabric, "fault", "list", stdout=w)
    finally:
        os.close(w)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    assert p.returncode == 141, (p.returncode, p.stderr)


@pytest.mark.parametrize("spec", ["{name: café, action: link_down, link: [node0, ib-sw0]}",
                                  "{name: x,\n action: link_down, link: [node0, ib-sw0]}"])
def test_23_06_a_spec_the_protocol_cannot_carry_is_one_line(sf_env, links_fabric, spec):
    """Finding 13: a non-ASCII spec gave a UnicodeEncodeError traceback, and a newline was sent
    raw, framed as protocol lines. Both are refused in one line, naming the character, as the
    usage errors they are (exit 2)."""
    p = _cli(sf_env, links_fabric, "fault", "apply", spec)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot carry" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert "0 fault(s)" in _cli(sf_env, links_fabric, "fault", "list").stdout
