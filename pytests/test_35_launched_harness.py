# SPDX-License-Identifier: MIT
"""simfabric-harness --launched (issue 18): one rank per process that a launcher started, the
rank and world from the launcher's environment, the out-of-band exchange over TCP to rank 0.
Every test the forked harness runs must pass exact the same way across launched ranks; a
missing or malformed variable is named."""
import json
import os
import subprocess

import pytest

from sf import procs as sfprocs

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

# What `--tests all` runs (test_03_01): it must all run, on every rank.
ALL = ("connect", "props", "sizes", "tags", "inflight", "allreduce", "alltoall",
       "close_inflight", "listen_reuse", "threads", "reload", "mr")

# Variables of other launchers that would change which one the harness reads.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


class Launched:
    """What came of starting the ranks by hand: per rank (rc, stdout, stderr); rank 0's JSON."""

    def __init__(self, argv, outs, jpath):
        self.argv, self.outs = argv, outs
        self.json = None
        if os.path.exists(jpath):
            with open(jpath) as f:
                self.json = json.load(f)

    def rc(self, r):
        return self.outs[r][0]

    def report(self):
        return "$ %s\n%s" % (" ".join(self.argv), "\n".join(
            "--- rank %d: exit %s ---\n%s%s" % (r, rc, out[-6000:], err[-6000:])
            for r, (rc, out, err) in sorted(self.outs.items())))

    def check_ok(self, nranks):
        assert all(self.rc(r) == 0 for r in self.outs), self.report()
        assert self.json is not None and self.json["ok"], self.report()
        assert self.json["nranks"] == nranks, self.report()
        return self

    def tests(self, name=None):
        return [t for t in (self.json or {}).get("tests", []) if name in (None, t["name"])]


def base_env(fabric, **kw):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    e.update(fabric.env_vars() if fabric is not None else {})
    e.setdefault("NCCL_DEBUG", "WARN")
    e.update(kw)
    return e


def launch_by_hand(sf_env, fabric, tmp_path, nranks, args, ranks=None, env_of=None, timeout=300,
                   argv_of=None, names=("RANK", "WORLD_SIZE"), during=None):
    """Starts one harness --launched per rank with torchrun's variables, rank 0 last (the
    others must wait for it), calls during(procs) (what it returns opens rank 0's stdout), and
    waits for all of them."""
    port = sfprocs.free_port()
    jpath = str(tmp_path / "launched.json")
    argv = [sf_env.harness, "--launched", "--plugin", sf_env.plugin, "--json", jpath,
            "--timeout", str(timeout)] + list(args)
    procs = {}
    for r in sorted(range(nranks) if ranks is None else ranks, reverse=True):
        e = base_env(fabric, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        e.update({names[0]: str(r), names[1]: str(nranks)})
        if env_of:
            e.update(env_of(r))
        a = argv_of(r, argv) if argv_of else argv
        procs[r] = subprocess.Popen(a, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
    head = during(procs) if during else ""
    outs = {}
    for r, p in procs.items():
        try:
            out, err = p.communicate(timeout=timeout + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        outs[r] = (p.returncode, (head if r == 0 else "") + out, err)
    return Launched(argv, outs, jpath)


def check_all_ran(r, n):
    """--tests all passed on every one of n launched ranks, the data tests byte-exact."""
    r.check_ok(n)
    for name in ALL:
        ranks = sorted(t["rank"] for t in r.tests(name))
        assert ranks == list(range(n)), "%s ran on ranks %s\n%s" % (name, ranks, r.report())
    assert all(t["ok"] for t in r.tests()), r.report()
    # byte-exact: the data tests counted what they checked, and every rank sent something
    for t in r.tests("sizes"):
        assert t["metrics"].get("bytes_sent", 0) > 0, t


def test_35_01_every_test_passes_across_launched_ranks(sf_env, fabric, tmp_path):
    n = 3
    r = launch_by_hand(sf_env, fabric, tmp_path, n, ["--tests", "all", "--max-bytes", "4M",
                                                    "--threads", "2"])
    check_all_ran(r, n)
    # rank 0 reports; the others only run
    assert "harness: %d tests, 0 failed" % len(ALL) in r.outs[0][1], r.report()
    for k in range(1, n):
        assert r.outs[k][1] == "", r.report()
    # each rank was its own emulated node of this fabric, and closed what it opened
    st = fabric.show()
    assert all(c.get("state") != "open" for c in st["chans"]), st


def test_35_02_faults_across_launched_ranks(sf_env, fabric_factory, tmp_path):
    """A link down past the retry budget: both ends get ncclRemoteError naming the fault
    (--fault-expect error checks each rank's WARN), as with forked ranks."""
    f = fabric_factory(args=["--scenario", os.path.join(ROOT, "scenarios",
                                                        "fault-link-down.yaml")])
    r = launch_by_hand(sf_env, f, tmp_path, 2, [
        "--tests", "faults", "--fault-msgs", "100", "--fault-bytes", "65536", "--fault-expect",
        "error", "--bound", "5", "--max-bytes", "65536"], timeout=120)
    r.check_ok(2)
    assert sorted(t["rank"] for t in r.tests("faults")) == [0, 1], r.report()


def test_35_03_a_launched_peer_death_is_seen_by_the_others(sf_env, fabric, tmp_path):
    """The victim (the last rank) is not rank 0's child: its end is the EOF of its connection."""
    r = launch_by_hand(sf_env, fabric, tmp_path, 3, ["--tests", "peer_death", "--bound", "5"],
                       timeout=120)
    r.check_ok(3)
    by_rank = {t["rank"]: t for t in r.tests("peer_death")}
    assert "by design" in by_rank[2]["detail"], r.report()


@pytest.mark.parametrize("names", [("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                                   ("SLURM_PROCID", "SLURM_NTASKS")], ids=["mpirun", "srun"])
def test_35_03b_mpis_and_slurms_variables(sf_env, fabric, tmp_path, names):
    r = launch_by_hand(sf_env, fabric, tmp_path, 3, ["--tests", "allreduce"], timeout=120,
                       names=names)
    r.check_ok(3)
    assert sorted(t["rank"] for t in r.tests("allreduce")) == [0, 1, 2], r.report()


def test_35_04_under_simfabric_launch(sf_env, tmp_path):
    """simfabric launch gives each rank torchrun's variables: the harness runs under it as is."""
    jpath = str(tmp_path / "launch.json")
    p = subprocess.run(
        [sf_env.cli, "launch", "--nodes", "3", "--run-dir", str(tmp_path / "run"), "--",
         sf_env.harness, "--launched", "--plugin", sf_env.plugin, "--json", jpath,
         "--tests", "sizes,allreduce,alltoall", "--max-bytes", "4M", "--timeout", "120"],
        env=dict(base_env(None), **sf_env.run_env()), capture_output=True, text=True,
        timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "all 3 rank(s) exited 0" in out, out
    for name in ("sizes", "allreduce", "alltoall"):
        assert "[r0] ok    %s" % name in out, out
    with open(jpath) as f:
        j = json.load(f)
    assert j["ok"] and j["nranks"] == 3, j
    assert sorted(t["rank"] for t in j["tests"] if t["name"] == "alltoall") == [0, 1, 2], j


BAD_ENV = [
    pytest.param({}, "no rank in the environment: set RANK", id="no-rank"),
    pytest.param({"RANK": "0"}, "WORLD_SIZE is not set (RANK=0 is)", id="no-world"),
    pytest.param({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not a number in 2..64",
                 id="bad-world"),
    pytest.param({"RANK": "0", "WORLD_SIZE": "65"}, "WORLD_SIZE='65' is not a number in 2..64",
                 id="world-too-big"),
    pytest.param({"RANK": "2", "WORLD_SIZE": "2"}, "RANK='2' is not a number in 0..1",
                 id="rank-outside"),
    pytest.param({"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_ADDR is not set", id="no-addr"),
    pytest.param({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"},
                 "MASTER_PORT is not set", id="no-port"),
    pytest.param({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                  "MASTER_PORT": "0x10"}, "MASTER_PORT='0x10' is not a number in 1..65535",
                 id="bad-port"),
    pytest.param({"OMPI_COMM_WORLD_RANK": "1"}, "OMPI_COMM_WORLD_SIZE is not set "
                 "(OMPI_COMM_WORLD_RANK=1 is)", id="mpi-no-size"),
    pytest.param({"SLURM_PROCID": "3", "SLURM_NTASKS": "2"}, "SLURM_PROCID='3' is not a number",
                 id="slurm-rank-outside"),
    # torchrun's RANK wins over the others; its WORLD_SIZE goes with it, not Slurm's
    pytest.param({"RANK": "1", "SLURM_PROCID": "1", "SLURM_NTASKS": "4"},
                 "WORLD_SIZE is not set (RANK=1 is)", id="no-mixing"),
]


@pytest.mark.parametrize("env,says", BAD_ENV)
def test_35_05_bad_environment_is_named(sf_env, env, says):
    p = subprocess.run([sf_env.harness, "--launched", "--plugin", sf_env.plugin],
                       env=dict(base_env(None), **env), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], p.stderr
    assert lines[0].startswith("simfabric-harness: --launched: "), p.stderr
    assert lines[0].endswith("(see --help)"), p.stderr


@pytest.mark.parametrize("args,says", [
    (["--nranks", "2"], "--nranks 2, but the launcher says 3 ranks"),
    (["--bench"], "--bench needs the ranks forked by one harness"),
])
def test_35_06_options_that_contradict_the_launcher(sf_env, args, says):
    env = dict(base_env(None), RANK="0", WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="1")
    p = subprocess.run([sf_env.harness, "--launched", "--plugin", sf_env.plugin] + args,
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and says in p.stderr, (p.returncode, p.stderr)
    assert p.stderr.startswith("simfabric-harness: ") and p.stderr.count("\n") == 1, p.stderr


def test_35_07_a_rank_with_other_options_is_refused_by_name(sf_env, fabric, tmp_path):
    r = launch_by_hand(sf_env, fabric, tmp_path, 3, ["--tests", "sizes"], timeout=10,
                       argv_of=lambda k, a: a + ["--max-bytes", "1M"] if k == 1 else a)
    assert r.rc(0) == 1, r.report()
    assert "rank 1 was started with other options than rank 0" in r.outs[0][2], r.report()
    assert "rank 0 refused us: rank 1 was started with other options" in r.outs[1][2], \
        r.report()
    assert all(r.rc(k) != 0 for k in range(3)), r.report()


def test_35_08_a_rank_that_never_comes_is_named(sf_env, fabric, tmp_path):
    r = launch_by_hand(sf_env, fabric, tmp_path, 3, ["--tests", "sizes"], ranks=[0, 1],
                       timeout=3)
    assert r.rc(0) == 1, r.report()
    assert "2 of 3 ranks joined within --timeout 3 s; missing: 2" in r.outs[0][2], r.report()
    assert r.rc(1) != 0, r.report()
    assert "closed the connection before the run began" in r.outs[1][2], r.report()


def test_35_09_a_launched_rank_that_vanishes_is_named(sf_env, fabric, tmp_path):
    """A launched rank is not rank 0's child: when its connection ends without its saying it
    would (peer_death's victim does), it failed. daemon_death's READY is the cue: every rank is
    busy, and nobody kills the daemon; rank 2 is killed instead."""
    def kill_rank_2(procs):
        seen = ""
        while "READY" not in seen:
            line = procs[0].stdout.readline()
            if not line:
                break
            seen += line
        procs[2].kill()
        return seen

    r = launch_by_hand(sf_env, fabric, tmp_path, 3, ["--tests", "daemon_death"], timeout=30,
                       during=kill_rank_2)
    assert "READY" in r.outs[0][1], r.report()
    assert r.rc(0) == 1 and r.rc(2) == -9, r.report()
    assert ("FAIL test=daemon_death rank=2: rank process died during the test: closed its "
            "connection to rank 0's harness") in r.outs[0][2], r.report()
