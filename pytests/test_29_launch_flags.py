# SPDX-License-Identifier: MIT
"""The spellings users already know (issue 16): `simfabric launch` takes torchrun's --nnodes and
--nproc-per-node, and the NCCL job program takes nccl-tests' -b -e -f -n -w -c. Giving one option
in both spellings with different values is a usage error. CPU only (the job program through
--dry-run)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from sf import ranks as sfranks
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

def test_29_01_help_names_torchruns_spellings():
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
def test_29_02_torchruns_spellings_launch_the_same_ranks(sf_env, tmp_path, spelling):
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
def test_29_03_disagreeing_spellings_are_usage_errors(tmp_path, args, says):
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


def test_29_04_help_lists_nccl_tests_spellings(nccljob):
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
def test_29_05_short_spellings_run_what_the_long_ones_do(nccljob, tmp_path, short, long_):
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


def test_29_06_b_e_f_make_nccl_tests_geometric_sweep(nccljob, tmp_path):
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
    (["-b", "12Q"], "-b: '12Q' has an unknown unit 'Q'"),
    (["-f", "1"], "-f: '1' is not an integer from 2"),
    (["-n"], "-n needs a value"),
    (["-b", "1M", "-e", "1K"], "need 0 < min <= max"),
])
def test_29_07_conflicts_are_usage_errors(nccljob, args, says):
    p, _ = job1(nccljob, *args)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert says in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


# ---- simfabric launch --mpi: MPI programs under mpirun -----------------------------------------

# A stand-in for Open MPI's mpirun: says it is Open MPI, writes what it was given, and runs -np N
# copies of the command after its options (from "sh") with OMPI_COMM_WORLD_RANK set, as
# mpirun does on one host.
FAKE_MPIRUN = r'''#!%s
import json, os, subprocess, sys
a = sys.argv[1:]
if a == ["--version"]:
    print("mpirun (Open MPI) 4.1.6")
    sys.exit(0)
with open(os.environ["FAKE_MPI_LOG"], "w") as f:
    json.dump({"argv": a, "env": dict(os.environ)}, f)
n = int(a[a.index("-np") + 1])
cmd = a[a.index("sh"):]
ps = [subprocess.Popen(cmd, env=dict(os.environ, OMPI_COMM_WORLD_RANK=str(r),
                                     OMPI_COMM_WORLD_LOCAL_RANK=str(r))) for r in range(n)]
sys.exit(max(p.wait() for p in ps))
''' % PY
MPI_SHOW = "echo ENV $RANK $LOCAL_RANK $WORLD_SIZE $NCCL_HOSTID $SIMFABRIC_NODE $NCCL_NET"


def wrapper(rank, env):
    """sfranks.MPI_WRAPPER as one MPI rank runs it, printing what the program would see."""
    e = {"PATH": os.environ["PATH"]}
    if rank is not None:
        e["OMPI_COMM_WORLD_RANK"] = str(rank)
    e.update(env)
    return subprocess.run(["sh", "-c", sfranks.MPI_WRAPPER, "w", "sh", "-c",
                           "echo $RANK $LOCAL_RANK $NODE_RANK $NCCL_HOSTID $SIMFABRIC_NODE "
                           "${CUDA_VISIBLE_DEVICES-unset}"], env=e, capture_output=True,
                          text=True, timeout=30)


def test_29_08_mpi_argv_and_env():
    """What --mpi gives mpirun: -np N x G, Open MPI's options, -x for what the launcher set
    (never a per-rank variable: the wrapper sets those), the user's arguments, then the wrapper
    and the program; another MPI gets -np only."""
    argv = sfranks.mpi_argv("/x/mpirun", ["all_reduce_perf", "-b", "8", "-e", "64M"], 4,
                             ["NCCL_NET", "SIMFABRIC_SOCKET", "RANK", "NCCL_HOSTID", "BAD-NAME"],
                             ["--mca", "btl", "self"])
    assert argv[:6] == ["/x/mpirun", "-np", "4", "--oversubscribe", "--bind-to", "none"]
    assert ("--allow-run-as-root" in argv) == (os.geteuid() == 0)
    xs = [argv[i + 1] for i, w in enumerate(argv) if w == "-x"]
    assert xs == ["NCCL_NET", "SIMFABRIC_SOCKET"], argv
    i = argv.index("sh")
    assert argv[i - 3:i] == ["--mca", "btl", "self"]
    assert argv[i:i + 2] == ["sh", "-c"] and argv[i + 2] == sfranks.MPI_WRAPPER
    assert argv[i + 4:] == ["all_reduce_perf", "-b", "8", "-e", "64M"]
    other = sfranks.mpi_argv("mpiexec", ["p"], 2, ["NCCL_NET"], [], flavour="other")
    assert other[:3] == ["mpiexec", "-np", "2"] and other[3] == "sh"
    assert sfranks.mpi_env(["a", "b"], 2, ["0", "1", "2"]) == {
        "SIMFABRIC_MPI_NODES": "a b", "SIMFABRIC_MPI_GPN": "2", "SIMFABRIC_MPI_GPUS": "0 1 2 0"}
    assert sfranks.mpi_env(["a"], 3, [])["SIMFABRIC_MPI_GPUS"] == ""


def test_29_09_the_wrapper_gives_each_mpi_rank_its_node():
    env = {"SIMFABRIC_MPI_NODES": "alpha beta", "SIMFABRIC_MPI_GPN": "2",
           "SIMFABRIC_MPI_GPUS": "0 1 0 1"}
    got = [wrapper(r, env).stdout.strip() for r in range(4)]
    assert got == ["0 0 0 alpha alpha 0", "1 1 0 alpha alpha 1", "2 0 1 beta beta 0",
                   "3 1 1 beta beta 1"], got
    no_gpus = wrapper(1, dict(env, SIMFABRIC_MPI_GPUS=""))
    assert no_gpus.stdout.strip() == "1 1 0 alpha alpha unset", no_gpus
    for rank, env2, says in [(4, env, "MPI rank 4 is past the 2 node(s) x 2 rank(s)"),
                             (None, env, "no MPI rank here")]:
        p = wrapper(rank, env2)
        assert p.returncode == 127 and says in p.stderr, (p.returncode, p.stderr)
    pmix = wrapper(None, dict(env, PMIX_RANK="3"))
    assert pmix.stdout.startswith("3 1 1 beta"), pmix


@pytest.mark.parametrize("env,says", [
    ({"PATH": "/nonexistent"}, "--mpi: mpirun not found on PATH (install Open MPI"),
    ({"SIMFABRIC_MPIRUN": "/nonexistent/mpirun"}, "--mpi: /nonexistent/mpirun not found"),
])
def test_29_10_without_mpirun_one_line_and_127(tmp_path, env, says):
    """No mpirun: said in one line naming what is missing, exit 127 (a command that cannot be
    started), before any daemon or run directory."""
    p = subprocess.run([PY, CLI, "launch", "--mpi", "--nnodes", "2", "--", "all_reduce_perf"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SIMFABRIC_RUNS=str(tmp_path), **env))
    assert p.returncode == 127, (p.returncode, p.stderr)
    assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not list(tmp_path.glob("simfabric-*")), "a run directory was made"


def test_29_11_mpirun_args_need_mpi():
    p = cli("launch", "--nnodes", "2", "--mpirun-args=--mca btl self", "--", "true")
    assert p.returncode == 2 and "--mpirun-args is for --mpi" in p.stderr, p.stderr


def test_29_12_mpi_launch_end_to_end_with_a_stand_in_mpirun(sf_env, tmp_path):
    """The whole path through a stand-in mpirun (Open MPI is not on the CPU machines): every rank
    gets its node's NCCL_HOSTID and SIMFABRIC_NODE from the wrapper, and mpirun the fabric's
    socket, the plugin and the user's --mpirun-args."""
    fake = tmp_path / "mpirun"
    fake.write_text(FAKE_MPIRUN)
    fake.chmod(0o755)
    log = tmp_path / "mpirun-args.json"
    d = tmp_path / "run"
    p = cli("launch", "--mpi", "--nnodes", "2", "--nproc-per-node", "2", "--run-dir", str(d),
            "--mpirun-args=--mca btl self", "--", "sh", "-c", MPI_SHOW,
            env={"SIMFABRIC_MPIRUN": str(fake), "FAKE_MPI_LOG": str(log)})
    assert p.returncode == 0, p.stderr
    assert env_lines(p.stdout) == ["0 0 4 node0 node0 simfabric", "1 1 4 node0 node0 simfabric",
                                   "2 0 4 node1 node1 simfabric",
                                   "3 1 4 node1 node1 simfabric"], p.stdout
    assert "mpirun and its 4 rank(s) exited 0" in p.stderr, p.stderr
    assert (d / "mpirun.log").exists()
    got = json.loads(log.read_text())
    a, e = got["argv"], got["env"]
    assert a[:2] == ["-np", "4"] and ["--mca", "btl", "self"] == a[a.index("sh") - 3:
                                                                   a.index("sh")]
    for k in ("NCCL_NET", "NCCL_NET_PLUGIN", "SIMFABRIC_SOCKET", "SIMFABRIC_MPI_NODES"):
        assert k in a[a.index("-x"):], k
    assert e["SIMFABRIC_SOCKET"].endswith("ctl.sock") and e["SIMFABRIC_RUN_DIR"] == str(d)
    assert e["NCCL_NET_PLUGIN"].endswith("libnccl-net-simfabric.so")
    assert e["SIMFABRIC_MPI_NODES"] == "node0 node1"


def test_29_13_mpi_rank_failing_fails_the_launch(sf_env, tmp_path):
    fake = tmp_path / "mpirun"
    fake.write_text(FAKE_MPIRUN)
    fake.chmod(0o755)
    p = cli("launch", "--mpi", "--nnodes", "2", "-q", "--run-dir", str(tmp_path / "run"), "--",
            "sh", "-c", '[ "$NCCL_HOSTID" = node0 ] || exit 3',
            env={"SIMFABRIC_MPIRUN": str(fake), "FAKE_MPI_LOG": str(tmp_path / "l.json")})
    assert p.returncode == 3, (p.returncode, p.stderr)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun here (Open MPI)")
def test_29_14_mpi_launch_with_the_real_mpirun(sf_env, tmp_path):
    p = cli("launch", "--mpi", "--nnodes", "2", "--nproc-per-node", "2", "--run-dir",
            str(tmp_path / "run"), "--timeout", "60", "--", "sh", "-c", MPI_SHOW, timeout=120)
    assert p.returncode == 0, p.stderr
    assert env_lines(p.stdout) == ["0 0 4 node0 node0 simfabric", "1 1 4 node0 node0 simfabric",
                                   "2 0 4 node1 node1 simfabric",
                                   "3 1 4 node1 node1 simfabric"], p.stdout
