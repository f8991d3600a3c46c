# SPDX-License-Identifier: MIT
"""The spellings users already know (issue 16): `simfabric launch` takes torchrun's --nnodes and
--nproc-per-node, and the NCCL job program takes nccl-tests' -b -e -f -n -w -c. Giving one option
in both spellings with different values is a usage error. CPU only (the job program through
--dry-run)."""
import os
import subprocess
import sys

import pytest

import simfabric_pytest

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
