# SPDX-License-Identifier: MIT
"""docs/net-plugin-guide.md runs: every ```sh block in it is a test, as the guide's top says.

Convention (stated in the guide, enforced here):
  * every fenced block whose info string is `sh` runs under `bash -e -o pipefail`, from the
    repository root, with a fresh simfabricd on a private socket (SIMFABRIC_SOCKET), build/ and
    tools/ on PATH, TMPDIR a fresh empty directory, and no NCCL_* / SIMFABRIC_* / BUGGY_*
    variables inherited; it must exit 0;
  * HTML comments on the lines directly above the fence annotate it:
      <!-- expect: TEXT -->     TEXT must appear in its stdout or stderr (repeatable)
      <!-- daemon: ARGS -->     extra simfabricd arguments for its daemon (e.g. --nics 2)
      <!-- requires: gpu -->    skipped with a reason unless an NVIDIA GPU and PyTorch with CUDA
      <!-- timeout: SECONDS --> its limit (default 60 s)
  * blocks in any other language (text, c, console, ...) are never run and take no annotation.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT
GUIDE = os.path.join(ROOT, "docs", "net-plugin-guide.md")
KEYS = ("expect", "daemon", "requires", "timeout")
REQUIRES = ("gpu",)
DEFAULT_TIMEOUT = 60
OPEN = re.compile(r"^(`{3,})\s*([^`\s]*)[^`]*$")
NOTE = re.compile(r"^<!--\s*([A-Za-z_-]+)\s*:\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, lang, line, code, notes):
        self.lang, self.line, self.code, self.notes = lang, line, code, notes

    def get(self, key):
        return [v for k, v in self.notes if k == key]

    def __repr__(self):
        return "%s block at docs/net-plugin-guide.md:%d" % (self.lang or "plain", self.line)


def parse(path):
    """Every fenced block, with the annotations directly above it. Raises ValueError."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, lang, start = m.group(1), m.group(2), i
        notes, j = [], i - 1
        while j >= 0 and NOTE.match(lines[j]):
            notes.insert(0, NOTE.match(lines[j]).groups())
            j -= 1
        close = re.compile(r"^`{%d,}\s*$" % len(ticks))
        i += 1
        body = []
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            raise ValueError("docs/net-plugin-guide.md:%d: code block never closed" % (start + 1))
        blocks.append(Block(lang, start + 1, "\n".join(body) + "\n", notes))
        i += 1
    return blocks


try:
    BLOCKS = parse(GUIDE)
    PARSE_ERROR = None
except (OSError, ValueError) as e:
    BLOCKS, PARSE_ERROR = [], str(e)
SH = [b for b in BLOCKS if b.lang == "sh"]


def have_gpu():
    """What a gpu block needs: nvidia-smi, and torch with CUDA in the python3 it will run."""
    if not shutil.which("nvidia-smi"):
        return False
    py = os.path.join(os.path.dirname(sys.executable), "python3")
    try:
        p = subprocess.run([py if os.access(py, os.X_OK) else "python3", "-c",
                            "import sys, torch; "
                            "sys.exit(0 if torch.cuda.is_available() else 1)"],
                           capture_output=True, timeout=120)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _params():
    gpu = None
    out = []
    for b in SH:
        marks = []
        if "gpu" in b.get("requires"):
            if gpu is None:
                gpu = have_gpu()
            marks += [pytest.mark.gpu, pytest.mark.skipif(
                not gpu, reason="needs an NVIDIA GPU and PyTorch with CUDA (none found here)")]
        out.append(pytest.param(b, id="line%d" % b.line, marks=marks))
    return out or [pytest.param(None, id="no-blocks")]


def test_11_01_the_guide_follows_its_convention():
    assert PARSE_ERROR is None, PARSE_ERROR
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    assert "pytests/test_11_guide.py" in text, "the guide must state how its blocks are tested"
    assert len(SH) >= 12, "only %d runnable blocks in the guide" % len(SH)
    problems = []
    for b in BLOCKS:
        for k, v in b.notes:
            if b.lang != "sh":
                problems.append("%r: annotation %s on a block that never runs" % (b, k))
            elif k not in KEYS:
                problems.append("%r: unknown annotation %r (known: %s)" % (b, k, ", ".join(KEYS)))
            elif k == "requires" and v not in REQUIRES:
                problems.append("%r: unknown requirement %r" % (b, v))
            elif k == "timeout" and not re.match(r"^\d+$", v):
                problems.append("%r: timeout %r is not whole seconds" % (b, v))
            elif k == "expect" and not v:
                problems.append("%r: empty expect" % b)
        if b.lang == "sh" and not b.code.strip():
            problems.append("%r: empty" % b)
    assert not problems, "\n".join(problems)


def test_11_02_what_the_guide_cites_exists(sf_env):
    """The code names, files and harness tests the guide mentions are real (no doc rot).

    Code names: every all-lowercase identifier with an underscore written in backticks
    (`sfnet_isend`, `comm_fail()`, `close_inflight`) must occur in plugin/, sim/ or tools/.
    """
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    src = []
    for d in ("plugin", "sim", "tools"):
        for top, dirs, names in os.walk(os.path.join(ROOT, d)):
            dirs[:] = sorted(x for x in dirs if x not in ("test", "fuzz", "__pycache__"))
            for name in sorted(names):
                if name.endswith((".c", ".h", ".py")) or name == "simfabric":
                    with open(os.path.join(top, name), encoding="utf-8", errors="replace") as f:
                        src.append(f.read())
    src = "\n".join(src)
    names = set(re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]*)(?:\(\))?`", text))
    missing = sorted(n for n in names if not re.search(r"\b%s\b" % re.escape(n), src))
    assert not missing, "the guide names code that plugin/, sim/ and tools/ do not have: %s" % (
        ", ".join(missing))
    files = sorted({p for p in re.findall(
        r"(?<![\w/.-])((?:docs|plugin|tools|sim|pytests|scenarios)/[\w./-]*\w)", text)
        if not os.path.exists(os.path.join(ROOT, p))})
    assert not files, "the guide names files that do not exist: %s" % ", ".join(files)
    listed = subprocess.run([sf_env.harness, "--list"], capture_output=True, text=True,
                            timeout=30).stdout
    known = {ln.split()[0] for ln in listed.splitlines() if ln.strip()}
    used = set()
    for b in SH:
        for arg in re.findall(r"--tests[ =]([\w,]+)", b.code):
            used.update(x for x in arg.split(",") if x != "all")
    assert used <= known, "blocks run harness tests that --list does not know: %s" % (
        ", ".join(sorted(used - known)))


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.mark.parametrize("block", _params())
def test_11_03_guide_block_runs(block, sf_env, fabric_factory, tmp_path):
    assert PARSE_ERROR is None, PARSE_ERROR
    assert block is not None, "no ```sh blocks in docs/net-plugin-guide.md"
    build = os.path.join(ROOT, "build")
    if os.path.realpath(sf_env.build) != os.path.realpath(build):
        pytest.skip("the guide's commands use build/; %s was given as --build-dir" % sf_env.build)
    fab = fabric_factory(args=shlex.split(" ".join(block.get("daemon"))))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "SIMFABRIC_", "BUGGY_"))}
    env.update(SIMFABRIC_SOCKET=fab.socket, TMPDIR=str(tmp), PATH=os.pathsep.join(
        [build, os.path.join(ROOT, "tools"), os.path.dirname(sys.executable),
         os.environ.get("PATH", "/usr/bin:/bin")]))
    limit = int((block.get("timeout") or [DEFAULT_TIMEOUT])[-1])
    p = subprocess.Popen(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                          block.code], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        _kill_group(p.pid)
        out, err = p.communicate()
        rc = "timeout after %d s" % limit
    _kill_group(p.pid)  # whatever the block left running in the background
    report = "%r exited with %s\n--- block ---\n%s--- stdout ---\n%s\n--- stderr ---\n%s" % (
        block, rc, block.code, out[-8000:], err[-8000:])
    assert rc == 0, report
    for want in block.get("expect"):
        assert want in out or want in err, "expected %r in the output of %s" % (want, report)
