# SPDX-License-Identifier: MIT
"""sf.launch - run programs as emulated nodes over a simfabric fabric.

What `simfabric launch` does, as a Python API (the pytest plugin uses it too):

  launch(cmd, nodes=N, gpus_per_node=G, scenario=None | socket=None, ...) -> LaunchResult
      a fabric (a fresh simfabricd on a run-time socket, or an existing one at `socket`), and
      N*G ranks of cmd, each with the environment torchrun would give it plus what makes NCCL
      use simfabric (rank_env()). Output is prefixed by rank and kept per rank in the run
      directory; a rank failing ends the job after a grace period; a timeout dumps every
      rank's stack; Ctrl-C tears everything down.

A scenario's job: and expect: (`simfabric run`) are sf.recipe's, over this module; what each
rank gets (GPU, MPS, environment, MPI) is sf.ranks'; processes and their stacks, sf.procs';
running them to their end, sf.runner's.

Standard library only. Exit statuses of the CLI: see EXIT_*.
"""
import base64
import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from . import ctl as sfctl
from . import federate
from .daemon import Daemon, private_socket
from .paths import EXIT_FAIL, EXIT_TIMEOUT, EXIT_USAGE, LaunchError, Paths
from .procs import Proc, RemoteProc, _read, _signame, free_port
from .ranks import (Mps, copy_threads, device_connections, find_mpirun, gpu_ids, gpu_map,
                    libfabric_here, mpi_argv, mpi_env, mpi_flavour, mpi_host_arg, mps_plan,
                    nccl_libdirs, rank_env, MPI_HOST_VARS)
from .runner import Launcher


def start_daemon(paths, rundir, scenario=None, args=()):
    """A simfabricd of our own (sf.daemon.Daemon) on a socket in the run directory (or a short
    one under /tmp when the run directory's path is too long for a socket), started; LaunchError
    with its one line when its options or the scenario are wrong, with its log otherwise."""
    paths.require(paths.daemon)
    d = Daemon(paths.daemon, private_socket(rundir), os.path.join(rundir, "simfabricd.log"),
               (["--scenario", scenario] if scenario else []) + list(args), session=True,
               tied=True)
    try:
        return d.start(timeout=15)
    except sfctl.CtlError as e:
        d.stop()
        said = _read(d.log_path)
        if d.proc.returncode == EXIT_USAGE:  # its options or the scenario: its one line
            lines = [ln for ln in said.splitlines() if ln.startswith("simfabricd: ")]
            if lines:
                raise LaunchError(lines[-1][len("simfabricd: "):], EXIT_USAGE)
        raise LaunchError("%s\n--- simfabricd log ---\n%s" % (e, said), EXIT_FAIL)


def dump_scenario(path, paths=None, seed=None, hosts=None, text=False):
    """The resolved fabric of a scenario file, job: and expect: included (`simfabricd
    --scenario F --dump-fabric`; hosts: on that many hosts, each node's host and each link's
    owner in "hosts"), parsed, or its text as printed (byte-stable: what the hosts of a run
    compare). LaunchError with the daemon's file:line:column message."""
    paths = paths or Paths()
    paths.require(paths.daemon)
    argv = [paths.daemon, "--scenario", path, "--dump-fabric"] + (
        ["--seed", str(seed)] if seed is not None else []) + (
        ["--hosts", str(hosts)] if hosts else [])
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        msg = [ln for ln in p.stderr.strip().splitlines() if ln.startswith("simfabricd: ")]
        raise LaunchError(msg[-1][len("simfabricd: "):] if msg else
                          "simfabricd exited %d: %s" % (p.returncode, p.stderr.strip()[-2000:]),
                          EXIT_USAGE)
    return p.stdout if text else json.loads(p.stdout)


# ---- the launch ------------------------------------------------------------------------------

class LaunchResult:
    """What came of a launch: .procs (per rank: rc, outcome(), log_text()), .status (the CLI's
    exit status), .timed_out, .interrupted, .first_failure, .run_dir, .fabric (the dump)."""

    def __init__(self, run_dir, procs, fabric, seconds, timed_out, interrupted, notes, stacks):
        self.run_dir, self.procs, self.fabric, self.seconds = run_dir, procs, fabric, seconds
        self.timed_out, self.interrupted, self.notes, self.stacks = (timed_out, interrupted,
                                                                     notes, stacks)
        self._first_failure()
        self.stats = None
        self.faults = None
        self.connections = None  # sfctl.show's chans at the end: msgs, bytes per connection
        self.series = None  # sfctl.series at the end: every link's bytes over time
        self.series_note = None  # why there is no series.json on a modelled fabric
        self.host_pairs = None  # across hosts: Job.host_pairs() at the end
        self.remote = {}  # --hosts-from-env, host 0: {host: what its agent said of its ranks}
        self.missing_hosts = []  # ... and the hosts that said nothing (Job.gather)
        self.t_start = None  # CLOCK_MONOTONIC seconds the ranks' clock (t_exit) counts from
        self.counter_files = []  # what write_counters() put into the run directory
        # another host of --hosts-from-env --mpi: (host 0's mpirun's exit status, None), or
        # (None, why there is none)
        self.elsewhere = None

    def _first_failure(self):
        failed = [p for p in self.procs if p.rc not in (0, None) and not p.killed]
        failed.sort(key=lambda p: p.t_exit or 0)
        self.first_failure = failed[0] if failed else None

    def add_remote(self, epoch_ns, share):
        """Host 0 of `simfabric run --hosts-from-env`: the other hosts' ranks (self.remote, what
        their agents sent) joined to this host's, as RemoteProcs in rank order, their exit times
        moved onto this host's start of its ranks (both sent in the run's virtual time, epoch_ns
        being this host's); the files of share (names, prefixes) they sent written into this run
        directory where it has none of that name (rank 0's results may be another host's; never
        over a file or through a link), their stacks appended to this host's stack dump."""
        mine = int(self.t_start * 1e9) - epoch_ns if self.t_start is not None else None
        names, prefixes = share
        for h, got in sorted(self.remote.items()):
            theirs = got.get("t_start_ns")
            shift = (theirs - mine) / 1e9 if mine is not None and theirs is not None else 0.0
            for d in got["procs"]:
                p = RemoteProc(d, h)
                p.t_exit = p.t_exit + shift if p.t_exit is not None else None
                self.procs.append(p)
            self.timed_out = self.timed_out or bool(got.get("timed_out"))
            for name, b64 in sorted((got.get("files") or {}).items()):
                if not (name in names or name.startswith(tuple(prefixes))):
                    self.notes.append("host %d sent %r, which is not a file of this run's: "
                                      "not written" % (h, name))
                    continue
                try:
                    fd = os.open(os.path.join(self.run_dir, name),
                                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                except FileExistsError:
                    continue  # this host's own (or a link): kept
                except (OSError, ValueError) as e:
                    self.notes.append("host %d's %r: not written: %s" % (h, name, e))
                    continue
                with os.fdopen(fd, "wb") as f:
                    f.write(base64.b64decode(b64))
            for name in got.get("withheld") or []:
                self.notes.append("host %d did not send %s: over the size a host's report may "
                                  "take (its run directory has it)" % (h, name))
            if got.get("stacks"):
                self.stacks = self.stacks or os.path.join(self.run_dir, "stacks.txt")
                with open(self.stacks, "a") as f:
                    f.write("\n# host %d's ranks\n%s" % (h, got["stacks"]))
        self.procs.sort(key=lambda p: (p.rank if p.rank is not None else -1, p.label))
        self._first_failure()

    @property
    def ok(self):
        return all(p.rc == 0 for p in self.procs) and not self.timed_out and \
            self.elsewhere in (None, (0, None))

    @property
    def status(self):
        if self.interrupted:
            return 128 + self.interrupted
        if self.timed_out:
            return EXIT_TIMEOUT
        if self.first_failure:
            rc = self.first_failure.rc
            return rc if rc > 0 else 128 - rc
        if self.elsewhere and self.elsewhere[0] is not None:
            return self.elsewhere[0]  # the same status on every host
        return 0 if self.ok else EXIT_FAIL

    def rank(self, r):
        return [p for p in self.procs if p.rank == r][0]

    def output(self, r):
        """Rank r's whole log (stdout and stderr as they came; another host's rank: the tail
        its agent sent)."""
        return self.rank(r).log_text(1 << 26)

    def check_ok(self):
        """Assert that every rank exited 0; the failure message carries every log."""
        assert self.ok, "%s\n%s" % ("\n".join(self.notes) or "a rank failed", self.logs())
        return self

    def logs(self, limit=6000):
        """Every rank's log (their tails) and the daemon's, for failure messages."""
        parts = ["--- %s (%s, %s) %s ---\n%s" % (p.label, p.node, p.outcome(), p.log_path,
                                                 p.log_text(limit)) for p in self.procs]
        d = os.path.join(self.run_dir, "simfabricd.log")
        if os.path.exists(d):
            parts.append("--- simfabricd %s ---\n%s" % (d, _read(d, 1 << 22)[-limit:]))
        if self.stacks:
            parts.append("--- stacks %s ---\n%s" % (self.stacks, _read(self.stacks, 1 << 22)[
                -4 * limit:]))
        return "\n".join(parts)

    def counters_note(self):
        """The report's line naming the counter files, or ""."""
        if not self.counter_files:
            return ""
        return "  counters in %s (`simfabric report %s` shows them)%s" % (
            ", ".join(self.counter_files), self.run_dir,
            "\n  %s" % self.series_note if self.series_note else "")

    def summary(self):
        if self.elsewhere and not self.procs:
            return "  (this host's ranks are host 0's mpirun's: host 0's output has theirs%s)" % (
                "" if self.elsewhere[0] is not None else "; whether they ran is not known here")
        lines = []
        for p in self.procs:
            lines.append("  %-8s %-14s %-36s %s" % (
                p.label, p.node or "", p.outcome(),
                "%.1f s" % p.t_exit if p.t_exit is not None else ""))
        return "\n".join(lines)

    def to_json(self):
        return {"run_dir": self.run_dir, "seconds": self.seconds, "timed_out": self.timed_out,
                "interrupted": _signame(self.interrupted) if self.interrupted else None,
                "status": self.status, "ranks": [p.to_json() for p in self.procs],
                "notes": self.notes, "stacks": self.stacks, "counters": self.counter_files}


def make_run_dir(run_dir=None, name="job"):
    if run_dir:
        if not os.path.isdir(run_dir):
            os.makedirs(run_dir, mode=0o700)
            os.chmod(run_dir, 0o700)
        return os.path.realpath(run_dir)
    base = os.environ.get("SIMFABRIC_RUNS") or tempfile.gettempdir()
    return tempfile.mkdtemp(prefix="simfabric-%s-%s-" % (
        re.sub(r"[^A-Za-z0-9._-]", "_", name)[:40], time.strftime("%Y%m%d-%H%M%S")), dir=base)


def node_names(fb, nnodes):
    """The first nnodes of the fabric's nodes (in the dump's order); the ideal fabric makes them
    on demand: node0, node1, ..."""
    if fb is None or fb.get("kind") == "ideal":
        return ["node%d" % i for i in range(nnodes)]
    names = [n["name"] for n in fb["nodes"]]
    if nnodes > len(names):
        raise LaunchError("%d nodes asked for, but the fabric has %d (%s)" % (
            nnodes, len(names), ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")))
    return names[:nnodes]


def host_of(node, nnodes, nhosts):
    """The host of node i when nnodes nodes are split over nhosts hosts in consecutive blocks,
    host h holding [h*N/H, (h+1)*N/H) (docs/scale-out.md, "Node placement")."""
    for h in range(nhosts):
        if h * nnodes // nhosts <= node < (h + 1) * nnodes // nhosts:
            return h
    raise ValueError("node %d is not one of %d" % (node, nnodes))


# Where a launcher that started one agent per host says which host this is (docs/scale-out.md,
# section 2): (rank variable, count variable), first match wins; MASTER_ADDR and MASTER_PORT say
# where host 0 is.
HOST_VARS = (("GROUP_RANK", "WORLD_SIZE"),               # torchrun, --nproc-per-node 1
             ("SLURM_NODEID", "SLURM_NNODES"),           # srun --ntasks-per-node 1
             ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),  # mpirun --map-by ppr:1:node
             ("PMIX_RANK", "PMIX_SIZE"),
             ("RANK", "WORLD_SIZE"))                     # a Kubeflow PyTorchJob's pod
FEDERATE_TIMEOUT_S = federate.DEFAULT_TIMEOUT_S
# mpirun's options that place ranks on hosts (Open MPI's spellings): given by the user, kept
MPI_HOST_OPTIONS = ("--host", "-host", "-H", "--hostfile", "-hostfile", "--machinefile",
                    "-machinefile", "--default-hostfile")
# what host 0's mpirun passes to ranks on other hosts besides what the launcher changed
MPI_EXPORT_PREFIXES = ("NCCL_", "SIMFABRIC_", "CUDA_", "FI_", "TORCH_", "MASTER_")
MPI_EXPORT_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")
# another host of --mpi across hosts: host 0 may start mpirun this long after the rendezvous's
# time (MPS, mpirun --version) ...
START_MARGIN_S = 120  # (and sf.runner.STAND_BY_MARGIN_S after the job's end)
IDEAL_TEXT = '{"kind": "ideal"}\n'  # what --hosts-from-env --mpi compares on the ideal fabric
JOB_PORT_OFFSET = 2  # the job's own rendezvous: MASTER_PORT + 2 (+0: torchrun's store; +1: the
                     # daemons', section 2)


def hosts_from_env(env):
    """(host rank, hosts, host 0's address, the job's port) from a launcher's variables;
    LaunchError naming what is missing or malformed."""
    for rv, nv in HOST_VARS:
        if rv in env:
            break
    else:
        raise LaunchError("--hosts-from-env: no host rank in the environment (%s)" % ", ".join(
            rv for rv, _ in HOST_VARS), EXIT_USAGE)

    def number(name, lo, hi):
        v = env.get(name)
        if v is None:
            raise LaunchError("--hosts-from-env: %s is not set (%s=%s is)" % (name, rv, env[rv]),
                              EXIT_USAGE)
        if not v.isdigit() or not lo <= int(v) <= hi:
            raise LaunchError("--hosts-from-env: %s='%s' is not a number in %d..%d" % (
                name, v, lo, hi), EXIT_USAGE)
        return int(v)
    nhosts = number(nv, 1, 65535)
    host = number(rv, 0, nhosts - 1)
    addr = env.get("MASTER_ADDR")
    if not addr:
        raise LaunchError("--hosts-from-env: MASTER_ADDR is not set (host 0's address)",
                          EXIT_USAGE)
    port = number("MASTER_PORT", 1, 65535 - JOB_PORT_OFFSET)
    return host, nhosts, addr, port + JOB_PORT_OFFSET


DEFAULT_MASTER_PORT = 29500  # torchrun's: the run's base port where --peers names none
PEER = re.compile(r"([A-Za-z0-9_.-]+)(?::(\d{1,5}))?\Z")


def peers_env(peers, rank):
    """--peers ADDR[:PORT],... --host-rank R (docs/scale-out.md, section 2: "by hand"): the
    variables of one agent per host that hosts_from_env reads, as torchrun would set them. The
    list's order is the host rank; the first entry is host 0, its port (default 29500) the
    run's base port, as MASTER_PORT; the others' addresses say which host is which to a reader
    (only host 0 serves), and a port on them is refused rather than ignored. LaunchError
    naming the entry."""
    if rank is None:
        raise LaunchError("--peers: which of them is this host? Give --host-rank R", EXIT_USAGE)
    items = peers.split(",")
    if len(items) > 65535:
        raise LaunchError("--peers: %d hosts, more than 65535" % len(items), EXIT_USAGE)
    port = DEFAULT_MASTER_PORT
    for i, x in enumerate(items):
        m = PEER.match(x.strip())
        if not m:
            raise LaunchError("--peers: entry %d %r is not ADDR or ADDR:PORT (an IPv4 address "
                              "or a host name: the agents' rendezvous is IPv4)" % (i, x),
                              EXIT_USAGE)
        p = m.group(2)
        if p and i:
            raise LaunchError("--peers: entry %d %r has a port: only host 0's (the first "
                              "entry's) is used, host 0's agent serving there" % (i, x),
                              EXIT_USAGE)
        if p and not 1 <= int(p) <= 65535 - JOB_PORT_OFFSET:
            raise LaunchError("--peers: entry 0 %r: the port is not in 1..%d" % (
                x, 65535 - JOB_PORT_OFFSET), EXIT_USAGE)
        if i == 0:
            addr, port = m.group(1), int(p) if p else port
    if not 0 <= rank < len(items):
        raise LaunchError("--host-rank %d: not one of the %d host(s) of --peers (0..%d)" % (
            rank, len(items), len(items) - 1), EXIT_USAGE)
    return {"GROUP_RANK": str(rank), "WORLD_SIZE": str(len(items)), "MASTER_ADDR": addr,
            "MASTER_PORT": str(port)}


def is_loopback(addr):
    return addr in ("localhost", "::1") or addr.startswith("127.")


class Job:
    """A prepared launch: the fabric, the run directory and one Proc per rank. local_hosts > 1:
    that many daemons on this machine stand for as many hosts, the nodes split between them in
    blocks, and connections between ranks of different hosts go over libfabric on loopback
    (SIMFABRIC_HOST; docs/scale-out.md)."""

    def __init__(self, paths=None, run_dir=None, name="job", scenario=None, socket=None,
                 daemon_args=(), say=None, local_hosts=1, host=None):
        self.paths = paths or Paths()
        self.run_dir = make_run_dir(run_dir, name)
        self.scenario, self.socket, self.daemon_args = scenario, socket, list(daemon_args)
        self.local_hosts = local_hosts
        self.host = host  # --hosts-from-env: (host rank, hosts, host 0's address, job port)
        self.hosts = []  # local_hosts > 1: the other hosts' daemons (host 1, 2, ...)
        self.daemon = None
        self.relay = None  # a scenario over several hosts: sf.federate's TriggerRelay, NetRelay
        # --hosts-from-env under `simfabric run`: the files of this host's run directory host 0
        # needs to check the run (names, name prefixes), sent with the ranks' outcomes
        self.share = None
        self.daemon_rc = None  # stop_daemon()'s
        self.links = {}  # --hosts-from-env: the rendezvous's connections, for NetRelay
        self.offsets = {}  # ... and on host 0 each host's clock offset measured there
        self.epoch_ns = None
        self.rendezvous_timeout = FEDERATE_TIMEOUT_S
        # --hosts-from-env --mpi: host 0's mpirun starts every host's ranks; host 0 learns from
        # each other host's agent where its daemon and MPS are (NetRelay.wait_ready)
        self.mpi = False
        self.elsewhere = {}
        self.options = ""  # the launch's options every host's agent must share (the hello's)
        self.clock0 = None  # another host of several: (offset, rtt) ns to host 0 at rendezvous
        self.mps, self.mps_planned = None, False
        self.fabric = None
        self.notes = []
        self._say = say

    def say(self, msg):
        self.notes.append(msg)
        if self._say:
            self._say(msg)
        else:
            sys.stderr.write("simfabric: %s\n" % msg)
            sys.stderr.flush()

    def up(self):
        self.paths.require(self.paths.plugin)
        if self.socket:
            try:
                self.fabric = sfctl.fabric(self.socket)
            except sfctl.CtlError as e:
                raise LaunchError(str(e), EXIT_FAIL)
        else:
            if self.scenario and self.local_hosts > 1:
                # one virtual time for all: the daemons share this machine's clock
                self.epoch_ns = time.monotonic_ns()
            if self.host and self.host[1] > 1 and (self.scenario or self.mpi):
                self._federate()  # (--mpi on the ideal fabric too: host 0 starts every rank)
            self.daemon = start_daemon(self.paths, self.run_dir, self.scenario,
                                       self.daemon_args + self._host_args(
                                           self.host[0] if self.host else 0))
            self.socket = self.daemon.socket
            self.fabric = sfctl.fabric(self.socket)
            if self.clock0 and self.scenario:  # another host's offset at the rendezvous
                federate.tell_daemon(self.socket, *self.clock0, say=self.say)
            for h in range(1, self.local_hosts):
                d = os.path.join(self.run_dir, "host%d" % h)
                os.makedirs(d, mode=0o700, exist_ok=True)
                self.hosts.append(start_daemon(self.paths, d, self.scenario,
                                               self.daemon_args + self._host_args(h)))
            if self.hosts and self.scenario:
                self.relay = federate.TriggerRelay(self.sockets(), self.say)
                self.relay.start()
            elif self.links:
                self.relay = federate.NetRelay(self.socket, self.host[0], self.links,
                                               self.say, self.offsets)
                self.relay.host_vars = MPI_HOST_VARS
                self.relay.tell = bool(self.scenario)
                self.relay.start()
            if self.hosts:
                self.say("%d hosts on this machine: host 0's daemon at %s, %s; connections "
                         "between hosts over libfabric on loopback" % (
                             self.local_hosts, self.socket, ", ".join(
                                 "host %d's at %s" % (h + 1, d.socket)
                                 for h, d in enumerate(self.hosts))))
        self._write_hosts()
        return self

    def _write_hosts(self):
        """Where `simfabric status --run-dir` finds the run's daemons (federate.write_hosts):
        every host's socket when they are all here; across machines, host 0's agent adds the
        state each other host's agent sends it (NetRelay), and another host names its own."""
        try:
            if self.host and self.host[1] > 1:
                if isinstance(self.relay, federate.NetRelay) and self.host[0] == 0:
                    self.relay.status_dir, self.relay.nhosts = self.run_dir, self.host[1]
                    self.relay.write_hosts()
                else:
                    federate.write_hosts(self.run_dir, self.host[1], {self.host[0]: self.socket},
                                         relayed=False)
            else:
                federate.write_hosts(self.run_dir, len(self.sockets()),
                                     dict(enumerate(self.sockets())))
        except OSError as e:
            self.say("cannot write %s in %s (simfabric status --run-dir needs it): %s" % (
                federate.STATUS_FILE, self.run_dir, e))

    def _federate(self):
        """--hosts-from-env on a modelled fabric: agree with the other hosts' agents on the
        scenario and on virtual time 0 (sf.federate), before this host's daemon starts."""
        h, n, addr, job_port = self.host
        seed = None
        if "--seed" in self.daemon_args[:-1]:
            seed = self.daemon_args[self.daemon_args.index("--seed") + 1]
        port = job_port - JOB_PORT_OFFSET + 1
        try:
            text = dump_scenario(self.scenario, self.paths, seed, hosts=n, text=True) if \
                self.scenario else IDEAL_TEXT
        except LaunchError as e:
            raise LaunchError("--hosts-from-env: cannot resolve the scenario %s: %s" % (
                self.scenario, e), EXIT_FAIL)
        digest, dump = federate.scenario_hash(text), json.loads(text)
        try:
            self.epoch_ns, measured, self.links = federate.agree(
                h, n, addr, port, digest, timeout=self.rendezvous_timeout,
                bind=addr if is_loopback(addr) else "", launch=self.options)
        except federate.FederationError as e:
            raise LaunchError("--hosts-from-env: %s" % e, EXIT_FAIL)
        if h == 0:
            self.offsets = {k: v[1] for k, v in measured.items()}
            self.say("scenario %s (hash %s) on all %d hosts; clock offsets to host 0: %s" % (
                self.scenario or "(the ideal fabric)", digest, n, ", ".join(
                    "host %d (%s) %+.1f us (round trip %.1f us)" % (
                        k, v[0], v[1] / 1e3, v[2] / 1e3) for k, v in sorted(measured.items()))))
            worst = min(measured.items(), key=lambda kv: kv[1][3])
            line = federate.fidelity_line(dump, 0, worst[1][3], "host %d" % worst[0])
        else:
            self.say("scenario %s (hash %s) agreed with host 0; clock offset to host 0 %+.1f us "
                     "(round trip %.1f us): virtual time 0 at CLOCK_MONOTONIC %d here" % (
                         self.scenario or "(the ideal fabric)", digest, measured[0] / 1e3, measured[1] / 1e3,
                         self.epoch_ns))
            self.clock0 = measured[0], measured[1]
            line = federate.fidelity_line(dump, h, measured[2], "host 0")
        if line and self.scenario:
            self.say(line)

    def mpi_meet(self, nnodes, gpus_per_node, env=None):
        """--hosts-from-env --mpi, this host's daemon up: another host starts MPS where its
        ranks will share a GPU and tells host 0 its name, where its daemon is and what its
        ranks need for their count there (MPI_HOST_VARS); host 0 waits for every host's word
        (self.elsewhere), since its mpirun starts their ranks with them."""
        h, n = self.host[0], self.host[1]
        if h != 0:
            base = self._host_base(node_names(self.fabric, nnodes), gpus_per_node, gpu_ids(),
                                   env)
            if not self.relay.send_ready({"name": socket.gethostname(), "socket": self.socket,
                                          "env": {k: base[k] for k in MPI_HOST_VARS
                                                  if k in base}}):
                raise LaunchError("--hosts-from-env --mpi: cannot tell host 0's agent where "
                                  "this host's daemon is (its connection is gone)", EXIT_FAIL)
            return
        try:
            self.elsewhere = self.relay.wait_ready(n, self.rendezvous_timeout)
        except federate.FederationError as e:
            raise LaunchError("--hosts-from-env: %s" % e, EXIT_FAIL)

    @staticmethod
    def _host_vars(base, nranks, ngpus):
        """MPI_HOST_VARS for nranks ranks here on ngpus GPUs: base's where it has them (the
        user's and MPS's), else what fits that count."""
        out = {k: base[k] for k in MPI_HOST_VARS if base.get(k)}
        out.setdefault("SIMFABRIC_COPY_THREADS", str(copy_threads(nranks)))
        if ngpus:
            out.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", str(device_connections(nranks, ngpus)))
        return out

    def sockets(self):
        """Every local host's daemon's socket, host 0's first (one alone without
        --local-hosts)."""
        return [self.socket] + [d.socket for d in self.hosts]

    def _host_args(self, h):
        """A modelled fabric over several hosts (--local-hosts, or this host of
        --hosts-from-env): daemon h's place in the run (its routes to the other hosts are split
        by the placement, docs/scale-out.md section 4) and the agreed virtual time 0."""
        n = self.host[1] if self.host else self.local_hosts
        if not (self.scenario and n > 1):
            return []
        return ["--hosts", str(n), "--host-rank", str(h), "--epoch-ns", str(self.epoch_ns)]

    def host_of_node(self, name, i, nnodes, nhosts):
        """Node name's host: the scenario's placement (op=fabric's "hosts", placement: rules
        included) where the daemons have one, else the consecutive blocks."""
        placed = (self.fabric or {}).get("hosts")
        if placed and placed.get("count") == nhosts:
            for h, names in enumerate(placed.get("nodes", [])):
                if name in names:
                    return h
        return host_of(i, nnodes, nhosts)

    def _ranks_here(self, names, gpus_per_node):
        """How many of the run's ranks (nodes names) this host runs (--hosts-from-env: its
        nodes' only)."""
        if not self.host:
            return len(names) * gpus_per_node
        return gpus_per_node * sum(1 for i, name in enumerate(names) if self.host_of_node(
            name, i, len(names), self.host[1]) == self.host[0])

    def _start_mps(self, nranks, ngpus):
        """MPS, where nranks ranks here share ngpus GPUs (once); True when it runs."""
        if not self.mps_planned:
            self.mps_planned = True
            start, msg = mps_plan(nranks, ngpus,
                                  shutil.which("nvidia-cuda-mps-control") is not None)
            if msg:
                self.say(msg)
            if start:
                self.mps = Mps(self.run_dir, self.say)
                self.mps.start()
        return bool(self.mps and self.mps.running)

    def _host_base(self, names, gpus_per_node, gpus, env):
        """os.environ, MPS's (started where this host's ranks of the nodes names share its
        gpus), env, then the MPI_HOST_VARS that fit this host's count of ranks (_host_vars)."""
        nranks = self._ranks_here(names, gpus_per_node)
        base = dict(os.environ)
        if self._start_mps(nranks, len(gpus)):
            base.update(self.mps.env)
        if env:
            base.update(env)
        base.update(self._host_vars(base, nranks, len(gpus)))
        return base

    def _shared_env(self, argv, names, gpus_per_node, env):
        """What every rank's environment has in common (MPS, copy threads, the NCCL job
        program's libraries, env over os.environ), each rank's CUDA_VISIBLE_DEVICES and the
        GPUs. Starts MPS where this host's ranks (of the nodes names) share a GPU."""
        gpus = gpu_ids()
        cuda, shared = gpu_map(len(names), gpus_per_node, gpus)
        base = self._host_base(names, gpus_per_node, gpus, env)
        cross = bool(self.hosts or (self.host and self.host[1] > 1))
        if cross and gpus and "SIMFABRIC_GPU" not in base:
            # the plugin refuses a connection between hosts with GPU memory (docs/scale-out.md)
            base["SIMFABRIC_GPU"] = "off"
            self.say("connections between hosts carry host memory only: the GPU data path is "
                     "off for this run (SIMFABRIC_GPU=off; NCCL stages GPU buffers through host "
                     "memory)")
        if cross and not libfabric_here():
            carried = os.path.join(self.paths.build, "lib", "fabric")
            if os.path.exists(os.path.join(carried, "libfabric.so.1")):
                base["LD_LIBRARY_PATH"] = ":".join([carried] + [d for d in base.get(
                    "LD_LIBRARY_PATH", "").split(":") if d])
                self.say("libfabric.so.1 is not installed here: the ranks load the build's "
                         "copy (%s)" % carried)
        if os.path.basename(argv[0]) == "simfabric-nccljob":
            dirs = nccl_libdirs(self.paths, argv[0])
            if dirs:
                base["LD_LIBRARY_PATH"] = ":".join(dirs + [d for d in base.get(
                    "LD_LIBRARY_PATH", "").split(":") if d])
        return base, cuda, gpus

    def ranks(self, argv, nnodes, gpus_per_node=1, env=None, nodes=None):
        """One Proc per rank of argv on nnodes nodes (their names: nodes, or the fabric's)."""
        names = nodes or node_names(self.fabric, nnodes)
        nranks = nnodes * gpus_per_node
        base, cuda, _ = self._shared_env(argv, names, gpus_per_node, env)
        port = free_port() if not self.host else self.host[3]
        procs = []
        socks = self.sockets()
        for r in range(nranks):
            node = names[r // gpus_per_node]
            if self.host:  # one agent per host: only this host's nodes
                if self.host_of_node(node, r // gpus_per_node, nnodes,
                                     self.host[1]) != self.host[0]:
                    continue
                h = self.host[0]
            else:
                h = (self.host_of_node(node, r // gpus_per_node, nnodes, len(socks))
                     if self.hosts else 0)
            e = rank_env(base, r, nnodes, gpus_per_node, node, port, self.paths.plugin,
                         socks[0 if self.host else h], cuda[r], self.run_dir)
            if self.host:
                e.update(SIMFABRIC_HOST=str(h), MASTER_ADDR=self.host[2])
                if is_loopback(self.host[2]):
                    e.setdefault("FI_TCP_IFACE", "lo")
            elif self.hosts:
                e.update(SIMFABRIC_HOST=str(h))
                e.setdefault("FI_TCP_IFACE", "lo")
            procs.append(Proc("r%d" % r, r, node, list(argv), e,
                              os.path.join(self.run_dir, "rank-%d.log" % r)))
        return procs

    def mpi_ranks(self, argv, nnodes, gpus_per_node=1, env=None, mpirun=None, mpi_args=()):
        """One Proc: mpirun starting nnodes x gpus_per_node ranks of argv, each through
        MPI_WRAPPER, which gives it its rank's variables (mpi_env)."""
        names = node_names(self.fabric, nnodes)
        nranks = nnodes * gpus_per_node
        base, _, gpus = self._shared_env(argv, names, gpus_per_node, env)
        across = bool(self.host and self.host[1] > 1)
        e = rank_env(base, 0, nnodes, gpus_per_node, names[0],
                     self.host[3] if self.host else free_port(), self.paths.plugin,
                     self.socket, None, self.run_dir)
        mpirun = mpirun or find_mpirun(e)
        flavour = mpi_flavour(mpirun)
        sockets, extra, more = self.sockets(), list(mpi_args), {}
        nhosts = self.host[1] if across else len(sockets)
        hosts = [self.host_of_node(n, i, nnodes, nhosts)
                 for i, n in enumerate(names)] if self.hosts or across else None
        if across:
            sockets, more, extra = self._mpi_hosts(hosts, gpus_per_node, flavour, extra, e)
            e["MASTER_ADDR"] = self.host[2]
        if hosts and (self.hosts or is_loopback(self.host[2])):
            e.setdefault("FI_TCP_IFACE", "lo")  # libfabric between hosts on this machine
        e.update(mpi_env(names, gpus_per_node, gpus, hosts, sockets, **more))
        if gpus:
            e.setdefault("NCCL_TESTS_DEVICE", "0")
        # what mpirun -x passes on: what the launcher set, and across real hosts also what
        # the ranks of another host would not have otherwise (a remote rank gets only -x's)
        set_here = sorted(k for k in e if os.environ.get(k) != e[k] or (across and (
            k.startswith(MPI_EXPORT_PREFIXES) or k in MPI_EXPORT_NAMES)))
        return [Proc("mpi", 0, "%d nodes" % nnodes,
                     mpi_argv(mpirun, argv, nranks, set_here, extra, flavour), e,
                     os.path.join(self.run_dir, "mpirun.log"))]

    def _mpi_hosts(self, hosts, gpus_per_node, flavour, extra, e):
        """--hosts-from-env --mpi on host 0: every host's daemon socket, and mpi_env's other
        per-host lists (host names, MPI_HOST_VARS: host 0's from e, the others' from their
        agents, self.elsewhere), and mpirun's arguments with --host placing each host's block
        of ranks on it (Open MPI; the user's own --host, -H or hostfile are left as they are).
        LaunchError where the placement is not in blocks of rank order, which one mpirun
        cannot place so, or where two hosts have one name."""
        n = self.host[1]
        for i in range(1, len(hosts)):
            if hosts[i] < hosts[i - 1]:
                raise LaunchError("--hosts-from-env --mpi: node %d is host %d's after a node of "
                                  "host %d: one mpirun places ranks host by host, in rank order "
                                  "(keep each host's nodes consecutive in the scenario's "
                                  "placement:)" % (i, hosts[i], hosts[i - 1]), EXIT_USAGE)
        names = [socket.gethostname()] + [self.elsewhere[h]["name"] for h in range(1, n)]
        sockets = [self.socket] + [self.elsewhere[h]["socket"] for h in range(1, n)]
        if len(set(names)) not in (1, n):
            raise LaunchError("--hosts-from-env --mpi: hosts %s have one host name (%s): "
                              "mpirun cannot tell them apart" % (
                                  ", ".join(str(h) for h in range(n) if names.count(names[h]) > 1),
                                  ", ".join(sorted({x for x in names if names.count(x) > 1}))),
                              EXIT_USAGE)
        host_vars = {k: [e.get(k)] + [self.elsewhere[h]["env"].get(k) for h in range(1, n)]
                     for k in MPI_HOST_VARS}
        counts = [gpus_per_node * hosts.count(h) for h in range(n)]
        arg = mpi_host_arg(names, counts)
        own = [a for a in extra if a.split("=")[0] in MPI_HOST_OPTIONS]
        if arg and not own:
            if flavour == "openmpi":
                extra = ["--host", arg] + extra
            else:
                self.say("--mpi across hosts: this mpirun is not Open MPI's; place the ranks "
                         "host by host yourself with --mpirun-args (%s)" % arg)
        self.say("--mpi across %d hosts: mpirun on host 0 starts all %d ranks (%s)%s" % (
            n, sum(counts), ", ".join("host %d %s: %d" % (h, names[h], counts[h])
                                      for h in range(n)),
            "" if arg else "; one host name: all on this machine"))
        return sockets, {"host_names": names if arg else None, "host_vars": host_vars}, extra

    def _modelled(self, ask):
        """ask(socket) of a modelled fabric's daemon, or None (the ideal fabric, no answer)."""
        if not self.socket or (self.fabric or {}).get("kind") == "ideal":
            return None
        try:
            return ask(self.socket)
        except sfctl.CtlError:
            return None

    def _every_host(self, ask, merge):
        """ask(socket) of host 0's daemon, merged with the other local hosts' (--local-hosts:
        each counts what it reserved), or None."""
        first = self._modelled(ask)
        if first is None or not self.hosts:
            return first
        rest = []
        for d in self.hosts:
            try:
                rest.append(ask(d.socket))
            except sfctl.CtlError:
                rest.append(None)
        return merge([first] + rest)

    def stats(self):
        return self._every_host(sfctl.stats, sfctl.merge_stats)

    def faults(self):
        """The fault list at the end of the run (op=fault verb=list), or None."""
        return self._every_host(sfctl.faults, sfctl.merge_faults)

    def host_pairs(self):
        """Across hosts: the deliveries at each local host from each other host
        ([{"from", "to", "n", "late_sum_ns", "late_max_ns"}], sf.ctl.host_pairs of every local
        host's daemon), or None on one host."""
        if not self.socket or not (self.hosts or (self.host and self.host[1] > 1)):
            return None
        me, out = self.host[0] if self.host else 0, []
        for k, sock in enumerate(self.sockets()):
            try:
                got = sfctl.host_pairs(sock)
            except sfctl.CtlError:
                continue
            out += [dict(rec, **{"from": h, "to": me + k}) for h, rec in sorted(got.items())]
        return out

    def connections(self):
        """Every connection's counters at the end of the run (op=show: chans; every local
        host's daemon's: connections between hosts are on none), or None."""
        if not self.socket:
            return None
        out = []
        for sock in self.sockets():
            try:
                out += sfctl.show(sock)["chans"]
            except (sfctl.CtlError, KeyError):
                if sock == self.socket:
                    return None
        return out

    def series(self):
        """Every link's traffic over time (op=series), or None, and why not: the ideal fabric
        has no links (no reason given), a daemon started with --sample-ms 0 does not sample."""
        if not self.socket or (self.fabric or {}).get("kind") == "ideal":
            return None, None
        many, lacks = [], []
        for h, sock in enumerate(self.sockets()):  # each local host's daemon samples what it
            try:                                   # reserved: merged onto one grid
                many.append(sfctl.series(sock))
            except sfctl.CtlError as e:
                if e.errno == errno.EOPNOTSUPP:
                    return None, ("no series.json: the daemon does not sample its links "
                                  "(started with --sample-ms 0)")
                if h == 0:
                    return None, "no series.json: %s" % e
                lacks.append("host %d's (%s)" % (h, e))
        if lacks:
            return sfctl.merge_series(many), "series.json lacks %s samples" % ", ".join(lacks)
        if self.host and self.host[1] > 1:  # --hosts-from-env: the others' are not sent here
            return sfctl.merge_series(many), (
                "series.json is host %d's samples: each host's run directory has its own" %
                self.host[0])
        return sfctl.merge_series(many), None

    def collect(self, lr, gather=True):
        """The fabric's counters at the end of the run into lr, for write_counters(); and
        across real hosts, unless gather is False (`simfabric run` gathers after stopping its
        daemon), every host's (gather())."""
        lr.stats, lr.faults, lr.connections = self.stats(), self.faults(), self.connections()
        lr.host_pairs = self.host_pairs()
        lr.series, why = self.series()
        if why:
            lr.notes.append(why)
            lr.series_note = why
        if gather and lr.stats is not None:
            self.gather(lr)

    def stop_daemon(self):
        """This host's daemon stopped before the end of the run (`simfabric run` across hosts:
        its exit status goes into the checks); down() then gives this status."""
        if self.daemon:
            self.daemon_rc, self.daemon = self.daemon.stop(), None
        return self.daemon_rc

    def gather(self, lr):
        """--hosts-from-env: every host's counters in host 0's run directory. The other hosts'
        agents send theirs to host 0's (each keeps its own host's in its run directory), with
        their ranks when self.share says what to send (`simfabric run`: _ranks); host 0's
        merges what came within federate.COUNTERS_WAIT_S, as --local-hosts merges its
        daemons', and says which hosts are missing (lr.missing_hosts)."""
        if not isinstance(self.relay, federate.NetRelay):
            return
        h, n = self.host[0], self.host[1]
        if h != 0:
            sent = self.relay.send_counters(lr.stats, lr.faults, lr.connections, lr.host_pairs,
                                            self._ranks(lr) if self.share else None,
                                            series=lr.series)
            self.say("this host's counters %s host 0's agent (its stats.json and faults.json "
                     "have every host's; this run directory's, this host's)" % (
                         "sent to" if sent else "could not be sent to"))
            return
        got = self.relay.wait_counters(n)
        for line in self.relay.clock_summary():
            self.say(line)
        lr.remote = {k: got[k][4] for k in sorted(got) if got[k][4] is not None}
        lr.missing_hosts = [k for k in range(1, n) if k not in got]
        hosts = []
        for k in sorted(got):  # each against what is merged so far, so that none cuts another
            if lr.stats is None or got[k][0] is None:
                continue
            why = sfctl.stats_misfit(lr.stats, got[k][0])
            if why:  # another build's daemon, or a forged line: not summed into this run's
                self.say("counters: host %d's do not fit those of host(s) %s (%s): left out "
                         "of stats.json and faults.json (its run directory has them)" % (
                             k, ", ".join(map(str, [0] + hosts)), why))
                continue
            lr.stats = sfctl.merge_stats([lr.stats, got[k][0]])
            hosts.append(k)
        lr.faults = sfctl.merge_faults([lr.faults] + [got[k][1] for k in hosts])
        sampled = [k for k in hosts if got[k][5] is not None and lr.series is not None]
        for k in [k for k in sampled if got[k][5]["links"] != lr.series["links"]]:
            self.say("series: host %d's samples are of %d links, this host's of %d: left out of "
                     "series.json" % (k, got[k][5]["links"], lr.series["links"]))
            sampled.remove(k)
        if lr.series is not None and sampled:  # every host's samples on one grid
            lr.series = sfctl.merge_series([lr.series] + [got[k][5] for k in sampled])
            if lr.series_note in lr.notes:
                lr.notes.remove(lr.series_note)
            lr.series_note = None if len(sampled) == n - 1 else (
                "series.json has the samples of host(s) %s (the others' run directories have "
                "theirs)" % ", ".join(map(str, [0] + sampled)))
            if lr.series_note:
                lr.notes.append(lr.series_note)
        lr.connections = (lr.connections or []) + [c for k in hosts for c in got[k][2] or []]
        lr.host_pairs = (lr.host_pairs or []) + [p for k in hosts for p in got[k][3] or []]
        missing = [k for k in range(1, n) if k not in got]  # (a misfit is said above)
        self.say("stats.json and faults.json: the counters of host(s) %s%s" % (
            ", ".join(map(str, [0] + hosts)),
            "; host(s) %s sent none within %d s (their run directories have theirs)" % (
                ", ".join(map(str, missing)), federate.COUNTERS_WAIT_S) if missing else ""))

    SHARE_MAX = 16 << 20  # bytes of files one host sends host 0 at the end of `simfabric run`
    RANKS_MAX = 40 << 20  # ... and of its whole report, encoded (the line's limit is 64 MiB)

    def _ranks(self, lr):
        """This host's ranks for host 0's checks (`simfabric run --hosts-from-env`): each one's
        outcome (Proc.summary: exit, its time on the run's virtual clock, the log's tail), the
        stacks dumped here, this daemon's exit status, and the files of self.share in the run
        directory (the program's results, flight recorder dumps): SHARE_MAX bytes of files, the
        whole under RANKS_MAX encoded; what does not fit is named ("withheld"), largest file
        first, then the logs' tails are cut short."""
        names, prefixes = self.share
        files, withheld, left = {}, [], self.SHARE_MAX
        for name in sorted(os.listdir(lr.run_dir)):
            path = os.path.join(lr.run_dir, name)
            if not (name in names or name.startswith(tuple(prefixes))) or \
                    not os.path.isfile(path) or os.path.islink(path):
                continue
            size = os.path.getsize(path)
            if size > left:
                withheld.append(name)
                continue
            with open(path, "rb") as f:
                files[name] = base64.b64encode(f.read()).decode()
            left -= size
        t0 = int(lr.t_start * 1e9) - self.epoch_ns if lr.t_start is not None else None
        out = {"procs": [p.summary(1 << 16) for p in lr.procs], "timed_out": bool(lr.timed_out),
               "interrupted": lr.interrupted or 0, "daemon_rc": self.daemon_rc,
               "t_start_ns": t0, "stacks": _read(lr.stacks, 1 << 22) if lr.stacks else None,
               "files": files, "withheld": withheld}
        while len(json.dumps(out)) > self.RANKS_MAX and out["files"]:
            big = max(out["files"], key=lambda k: len(out["files"][k]))
            del out["files"][big]
            withheld.append(big)
        if len(json.dumps(out)) > self.RANKS_MAX:
            out["procs"] = [p.summary(1 << 10) for p in lr.procs]
        for name in withheld:
            self.say("%s is not sent to host 0: over the %d MiB a host's report may take" % (
                name, self.RANKS_MAX >> 20))
        return out

    def down(self):
        if self.relay:
            self.relay.stop()
        if self.mps:
            self.mps.stop()
        for d in self.hosts:
            d.stop()
        rc = self.daemon.stop() if self.daemon else self.daemon_rc
        return rc


def local_hosts_refusal(local_hosts, nodes, scenario, socket, mpi, host=None):
    """Why --local-hosts (or --hosts-from-env: host) cannot run as asked, or None."""
    if host:
        if host[1] > nodes:
            return "--hosts-from-env: %d hosts for %d node(s)" % (host[1], nodes)
        if local_hosts != 1:
            return "--hosts-from-env and --local-hosts: one or the other"
        if host[1] > 1 and socket:
            return "--hosts-from-env with --socket: each host's agent starts its own daemon"
        return None
    if local_hosts < 1 or local_hosts > nodes:
        return "--local-hosts %d: between 1 and the %d node(s)" % (local_hosts, nodes)
    if local_hosts == 1:
        return None
    if socket:
        return "--local-hosts starts its own daemons: not with --socket"
    return None


def launch(cmd, nodes, gpus_per_node=1, scenario=None, socket=None, run_dir=None, env=None,
           timeout=None, grace=5.0, fail_grace=None, echo=True, progress=None,
           handle_signals=False, paths=None, out=None, daemon_args=(), mpi=False, mpi_args=(),
           local_hosts=1, hosts_env=None, rendezvous_timeout=None):
    """Run cmd as nodes x gpus_per_node ranks over a fabric; see the module's text. mpi: the
    ranks are an MPI program's, started by one mpirun (Job.mpi_ranks). local_hosts: Job's.
    hosts_env: an environment to read this host's place from (--hosts-from-env): one agent per
    host, running its own daemon and its block of the nodes' ranks."""
    host = hosts_from_env(hosts_env) if hosts_env is not None else None
    why = local_hosts_refusal(local_hosts, nodes, scenario, socket, mpi, host)
    if why:
        raise LaunchError(why, EXIT_USAGE)
    if mpi and (local_hosts > 1 or (host and host[1] > 1)) and run_dir and \
            any(c.isspace() for c in run_dir):
        raise LaunchError("--mpi across hosts: the run directory %r has a space, which the MPI "
                          "wrapper's lists cannot carry (use another --run-dir)" % run_dir,
                          EXIT_USAGE)
    # host 0 starts every rank of an MPI program across hosts: the others need no mpirun
    elsewhere = bool(mpi and host and host[1] > 1 and host[0] != 0)
    mpirun = find_mpirun(dict(os.environ, **(env or {}))) if mpi and not elsewhere else None
    if rendezvous_timeout is not None and not (0 < rendezvous_timeout <= 3600):
        raise LaunchError("--rendezvous-timeout %g: a number of seconds in (0, 3600]" %
                          rendezvous_timeout, EXIT_USAGE)
    job = Job(paths, run_dir, os.path.basename(cmd[0]), scenario, socket, daemon_args,
              local_hosts=local_hosts, host=host)
    job.rendezvous_timeout = rendezvous_timeout or FEDERATE_TIMEOUT_S
    job.mpi = mpi
    job.options = "--nodes %d --gpus-per-node %d%s" % (nodes, gpus_per_node,
                                                      " --mpi" if mpi else "")
    if host:
        job.say("host %d of %d (host 0 at %s): this host's daemon and %s" % (
            host[:3] + ("ranks, started by host 0's mpirun" if elsewhere else "ranks",)))
    t0 = time.monotonic()
    procs, res, word = [], None, None
    try:
        job.up()
        if mpi and job.links:
            job.mpi_meet(nodes, gpus_per_node, env)
        L = Launcher(job.run_dir, echo=echo, out=out, progress=progress, grace=grace,
                     fail_grace=fail_grace, timeout=timeout, handle_signals=handle_signals)
        if elsewhere:
            (timed_out, interrupted, stacks), word = L.stand_by(
                job.relay.mpi_ended, job.relay.started.is_set,
                job.rendezvous_timeout + START_MARGIN_S)
        else:
            procs = (job.mpi_ranks(cmd, nodes, gpus_per_node, env, mpirun, mpi_args) if mpi
                     else job.ranks(cmd, nodes, gpus_per_node, env))
            if mpi and job.links:
                job.relay.send_start()
            timed_out, interrupted, stacks = L.run(procs, job.socket)
        res = LaunchResult(job.run_dir, procs, job.fabric, time.monotonic() - t0, timed_out,
                           interrupted, job.notes + L.notes, stacks)
        res.t_start = L.t_start
        if elsewhere:
            res.elsewhere = word or (None, "no word of host 0's mpirun (above)")
        elif mpi and job.links and not job.relay.send_end(res.status):
            job.say("--mpi across hosts: could not tell the other hosts' agents that mpirun "
                    "ended (they stop at their timeout, or when this agent's connection closes)")
        job.collect(res)
    finally:
        job.down()
    write_counters(res, job.fabric, shared=job.daemon is None)
    return res


FAULTS_CLOCK = ("fabric time: every *_ns is ns since the daemon's start (epoch_ns, "
                "CLOCK_MONOTONIC), not the job's (stats.json's job.start_ns); a fault's "
                "origin_ns is when its clock started: the daemon's start for at:, its trigger "
                "for after:")


def counters(lr, fabric, shared=False):
    """stats.json's content: per directed link its ends and rate (from the fabric dump) and
    op=stats' counters; per connection op=show's msgs and bytes; per NIC their sums
    (sfctl.nic_counters); the job's span in fabric time
    (ns since the daemon's start, the clock of faults.json) when the daemon told its epoch."""
    links = sfctl.link_records(lr.stats or {}, (fabric or {}).get("links"))
    conns = [{k: c.get(k) for k in ("id", "src", "dst", "state", "msgs", "bytes")}
             for c in lr.connections or []]
    fl = lr.faults or {}
    ran = max([p.t_exit for p in lr.procs if p.t_exit is not None] or [0.0])
    job = {"seconds": ran, "start_ns": None, "end_ns": None}
    if fl.get("epoch_ns") is not None and lr.t_start is not None:
        job["start_ns"] = int(round(lr.t_start * 1e9)) - fl["epoch_ns"]
        job["end_ns"] = job["start_ns"] + int(round(ran * 1e9))
    doc = {"version": 1, "fabric": (fabric or {}).get("name"),
           "kind": (fabric or {}).get("kind"), "shared_daemon": bool(shared),
           "epoch_ns": fl.get("epoch_ns"), "now_ns": fl.get("now_ns"), "job": job,
           "links": links, "connections": conns, "nics": sfctl.nic_counters(conns, links)}
    if lr.host_pairs is not None:  # across hosts: the deliveries between each pair of hosts
        doc["host_pairs"] = lr.host_pairs
    return doc


def dump_series(doc, f):
    """series.json: sfctl.series()'s dict, indented as json.dump(indent=1) would but one
    sample a line (thousands of samples of dozens of links)."""
    head = {k: v for k, v in doc.items() if k != "samples"}
    rows = ",\n".join("  " + json.dumps(s) for s in doc.get("samples") or [])
    f.write(json.dumps(head, indent=1)[:-2] + ',\n "samples": [%s]\n}\n' % (
        "\n%s\n " % rows if rows else ""))


def write_counters(lr, fabric, shared=False):
    """stats.json, faults.json (only when the fabric has faults), series.json (when the daemon
    samples its links) and fabric.json into the run directory of a job on a modelled fabric
    (`simfabric report` reads them). shared: the daemon was not the job's own, so its counters
    include what ran before."""
    if lr is None or not lr.stats or (fabric or {}).get("kind") == "ideal":
        return []
    out = [("stats.json", counters(lr, fabric, shared))]
    if lr.faults and lr.faults.get("faults"):
        out.append(("faults.json", dict(lr.faults, clock=FAULTS_CLOCK)))
    if lr.series:
        out.append(("series.json", lr.series))
    for name, doc in out + [("fabric.json", fabric)]:
        with open(os.path.join(lr.run_dir, name), "w") as f:
            if name == "series.json":
                dump_series(doc, f)
            else:
                json.dump(doc, f, indent=1)
        lr.counter_files.append(name)
    return lr.counter_files
