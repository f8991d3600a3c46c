# SPDX-License-Identifier: MIT
"""The spellings users already know (issue 16): `simfabric launch` takes torchrun's --nnodes and
--nproc-per-node, and the NCCL job program takes nccl-tests' -b -e -f -n -w -c. Giving one option
in both spellings with different values is a usage error. CPU only (the job program through
--dry-run)."""
import json
import os
import subprocess
import sys

import pytest

import simfabric_pytest
from test_12_nccljob import nccljob  # noqa: F401 - the built program, else a skip

ROOT = simfabric_pytest.ROOT
CLI = os.path.join(ROOT, "tools", "simfabric")
PY = sys.executable
SHOW = "import os; print('ENV', os.environ['RANK'], os.environ['LOCAL_RANK'], " \
       "os.environ['WORLD_SIZE'], os.environ['NCCL_HOSTID'])"


def cli(*args, env=None, timeout=120):
    return subprocess.run([PY, CLI] + list(args), capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


def env_lines(out):
    return sorted(ln.split(" ENV ", 1)[1] for ln in out.splitlines() if " ENV " in ln)


# ---- simfabric launch: torchrun's spellings ---------------------------------------------------

def test_28_01_help_names_torchruns_spellings():
    p = cli("launch", "--help")
    assert p.returncode == 0, p.stderr
    for opt in ["--nnodes", "--nproc-per-node", "--nodes", "--gpus-per-node", "MIN:MAX",
                "auto/gpu/cpu"]:
        assert opt in p.stdout, opt


@pytest.mark.parametrize("spelling", [
    ["--nnodes", "2", "--nproc-per-node", "2"],
    ["--nnodes", "2", "--nproc_per_node", "2"],
    ["--nodes", "2", "--nproc-per-node", "2"],
    ["--nnodes", "2", "--nodes", "2", "--gpus-per-node", "2", "--nproc-per-node", "2"],
], ids=["torchrun", "torchrun-underscore", "mixed", "both-agreeing"])
def test_28_02_torchruns_spellings_launch_the_same_ranks(sf_env, tmp_path, spelling):
    p = cli("launch", *spelling, "--run-dir", str(tmp_path / "run"), "--", PY, "-c", SHOW)
    assert p.returncode == 0, p.stderr
    # as --nodes 2 --gpus-per-node 2 (test_10_01): rank = node x 2 + local rank
    assert env_lines(p.stdout) == ["0 0 4 node0", "1 1 4 node0", "2 0 4 node1",
                                   "3 1 4 node1"], p.stdout
    assert "2 node(s) x 2" in p.stderr, p.stderr


@pytest.mark.parametrize("args,says", [
    (["--nnodes", "2", "--nodes", "3"], "--nodes 3 and --nnodes 2 disagree"),
    (["--nodes", "2", "--gpus-per-node", "1", "--nproc-per-node", "2"],
     "--gpus-per-node 1 and --nproc-per-node 2 disagree"),
    ([], "--nodes N (or torchrun's --nnodes N)"),
    (["--nnodes", "0"], "at least 1"),
    (["--nnodes", "2", "--nproc-per-node", "auto"], "invalid int value: 'auto'"),
])
def test_28_03_disagreeing_spellings_are_usage_errors(tmp_path, args, says):
    p = cli("launch", *args, "--", "true", env={"SIMFABRIC_RUNS": str(tmp_path)})
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert says in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    if "invalid int" not in says:  # ours: one line (argparse's own add the usage)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not list(tmp_path.glob("simfabric-*")), "a run directory was made"


# ---- the NCCL job program: nccl-tests' spellings ----------------------------------------------

def job1(prog, *args, tmp=None):
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    argv = [prog, "--dry-run"] + list(args)
    if tmp is not None:
        argv += ["--json", str(tmp / "j.json")]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=e)
    d = None
    if tmp is not None and p.returncode == 0:
        with open(tmp / "j.json") as f:
            d = json.load(f)
    return p, d


def test_28_04_help_lists_nccl_tests_spellings(nccljob):
    p, _ = job1(nccljob, "--help")
    assert p.returncode == 0, p.stderr
    for s in ["-b, -e, -f", "-w N, -n N", "-c 0|1", "both spellings"]:
        assert s in p.stdout, s


@pytest.mark.parametrize("short,long_", [
    (["-b", "8", "-e", "64M", "-f", "4"], ["--min", "8", "--max", "64M", "--factor", "4"]),
    (["-b", "1K", "-e", "16K"], ["--min", "1K", "--max", "16K"]),
    (["-b", "4K", "-e", "4K", "-n", "3", "-w", "2", "-c", "0"],
     ["--min", "4K", "--max", "4K", "--iters", "3", "--warmup", "2", "--check", "0"]),
    (["-e", "256", "-c", "1", "--iters", "2", "-n", "2"],
     ["--max", "256", "--check", "1", "--iters", "2"]),
], ids=["sweep", "suffixes", "iters-warmup-check", "both-agreeing"])
def test_28_05_short_spellings_run_what_the_long_ones_do(nccljob, tmp_path, short, long_):
    (tmp_path / "s").mkdir()
    (tmp_path / "l").mkdir()
    ps, ds = job1(nccljob, *(short + ["--iters", "1"] if "-n" not in short else short),
                  tmp=tmp_path / "s")
    pl, dl = job1(nccljob, *(long_ + ["--iters", "1"] if "--iters" not in long_ else long_),
                  tmp=tmp_path / "l")
    assert ps.returncode == 0 and pl.returncode == 0, (ps.stderr, pl.stderr)
    for k in ("warmup", "iters", "check"):
        assert ds[k] == dl[k], k
    assert [r["bytes"] for r in ds["results"]] == [r["bytes"] for r in dl["results"]]
    assert ds["status"] == "ok"


def test_28_06_b_e_f_make_nccl_tests_geometric_sweep(nccljob, tmp_path):
    _, d = job1(nccljob, "-b", "8", "-e", "64M", "-f", "8", "-n", "1", "-w", "0", tmp=tmp_path)
    assert [r["bytes"] for r in d["results"]] == [8 * 8 ** i for i in range(8)]  # to 16M: 128M is past -e
    assert (d["iters"], d["warmup"]) == (1, 0)


@pytest.mark.parametrize("args,says", [
    (["--sizes", "8,16", "-b", "8"], "--sizes and --min/--max/--factor (-b/-e/-f) do not go"),
    (["-e", "1M", "--sizes", "8"], "do not go together"),
    (["-b", "8", "--min", "16"], "-b 8 and --min 16 disagree"),
    (["-e", "1K", "--max", "1M"], "-e 1024 and --max 1048576 disagree"),
    (["-f", "2", "--factor", "4"], "-f 2 and --factor 4 disagree"),
    (["-n", "3", "--iters", "4"], "-n 3 and --iters 4 disagree"),
    (["--warmup", "1", "-w", "2"], "-w 2 and --warmup 1 disagree"),
    (["-c", "0", "--check", "1"], "-c 0 and --check 1 disagree"),
    (["-c", "2"], "-c: '2' is not 0 or 1"),
    (["-b", "12Q"], "-b: '12Q' is not a size"),
    (["-f", "1"], "-f: '1' is not an integer from 2"),
    (["-n"], "-n needs a value"),
    (["-b", "1M", "-e", "1K"], "need 0 < min <= max"),
])
def test_28_07_conflicts_are_usage_errors(nccljob, args, says):
    p, _ = job1(nccljob, *args)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert says in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
