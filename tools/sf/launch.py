# SPDX-License-Identifier: MIT
"""sflaunch - run programs as emulated nodes over a simfabric fabric, and scenarios' jobs.

What `simfabric launch` and `simfabric run` do, as a Python API (the pytest plugin uses it too):

  launch(cmd, nodes=N, gpus_per_node=G, scenario=None | socket=None, ...) -> LaunchResult
      a fabric (a fresh simfabricd on a run-time socket, or an existing one at `socket`), and
      N*G ranks of cmd, each with the environment torchrun would give it plus what makes NCCL
      use simfabric (rank_env()). Output is prefixed by rank and kept per rank in the run
      directory; a rank failing ends the job after a grace period; a timeout dumps every
      rank's stack; Ctrl-C tears everything down.
  run_scenario(path, ...) -> RunResult
      the scenario's job: (read from the fabric dump, `simfabricd --dump-fabric`: never from the
      YAML) launched as above, its results checked against expect: (data, timing against the
      model in sfmodel.py, an expected failure), with a report.

Standard library only. Exit statuses of the CLI: see EXIT_*.
"""
import ctypes
import errno
import io
import json
import os
import pickle
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from . import ctl as sfctl
from . import federate
from . import model as sfmodel
from .daemon import Daemon, _pdeathsig, private_socket
from .paths import (EXIT_CANNOT, EXIT_FAIL, EXIT_PASS, EXIT_TIMEOUT, EXIT_USAGE,  # noqa: F401
                    ROOT, LaunchError, Paths, installed_layout)  # noqa: F401
from .paths import TOOLS as HERE

TIME_SLICED = ("ranks sharing a GPU without MPS are time-sliced: a small allreduce takes about "
               "18 ms instead of 30 us")
PYHOOK = os.path.join(HERE, "sfpyhook")  # sitecustomize: faulthandler on SIGUSR1 for Python ranks


# ---- paths -------------------------------------------------------------------------------------

def nccl_libdirs(paths, binary=None):
    """Directories holding the NCCL and CUDA runtime libraries binary needs, from
    tools/scripts/nccl-libdir.sh if present (what it found, even when something is missing)."""
    if not os.access(paths.libdir_sh, os.X_OK):
        return []
    try:
        out = subprocess.run([paths.libdir_sh] + ([binary] if binary else []),
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [d for d in out.stdout.strip().split(":") if d]


def libfabric_here():
    """Can this machine load libfabric.so.1 by itself (the plugin dlopens it)?"""
    try:
        ctypes.CDLL("libfabric.so.1")
        return True
    except OSError:
        return False


def python_with(module, candidates=None):
    """The first Python interpreter that can import module ($SIMFABRIC_PYTHON, this one,
    python3 on PATH), or None."""
    cands = candidates or [os.environ.get("SIMFABRIC_PYTHON"), sys.executable,
                           shutil.which("python3")]
    seen = set()
    for c in cands:
        if not c or c in seen:
            continue
        seen.add(c)
        try:
            if subprocess.run([c, "-c", "import %s" % module], capture_output=True,
                              timeout=120).returncode == 0:
                return c
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


# ---- GPUs and MPS ---------------------------------------------------------------------------

_gpu_cache = {}


def gpu_ids():
    """The physical GPUs this job may use: nvidia-smi -L's count, restricted to the user's
    CUDA_VISIBLE_DEVICES when set. [] without nvidia-smi or devices."""
    if "ids" in _gpu_cache:
        return _gpu_cache["ids"]
    ids = []
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
            n = sum(1 for ln in out.stdout.splitlines() if ln.startswith("GPU "))
            ids = [str(i) for i in range(n)] if out.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            ids = []
    user = os.environ.get("CUDA_VISIBLE_DEVICES")
    if ids and user is not None:
        ids = [d.strip() for d in user.split(",") if d.strip()]
    _gpu_cache["ids"] = ids
    return ids


def gpu_map(nnodes, gpus_per_node, gpus):
    """CUDA_VISIBLE_DEVICES per rank (rank = node * gpus_per_node + local rank), and whether ranks
    share a GPU. Each emulated node sees gpus_per_node GPUs, taken round-robin from gpus, so
    LOCAL_RANK indexes them; a node wanting more GPUs than there are gets one GPU per rank
    instead (its ranks then use device LOCAL_RANK % device_count). No GPUs: None everywhere."""
    n = nnodes * gpus_per_node
    if not gpus:
        return [None] * n, False
    out = []
    for node in range(nnodes):
        if gpus_per_node <= len(gpus):
            vis = ",".join(gpus[(node * gpus_per_node + l) % len(gpus)]
                           for l in range(gpus_per_node))
            out += [vis] * gpus_per_node
        else:
            out += [gpus[(node * gpus_per_node + l) % len(gpus)] for l in range(gpus_per_node)]
    return out, n > len(gpus)


def device_connections(nranks, ngpus):
    """CUDA_DEVICE_MAX_CONNECTIONS per rank: the hardware queues a CUDA context spreads its streams
    over. A rank with a GPU to itself gets 32, so that the GPU data path's copies, which run in
    the application's context there, rarely share a queue with NCCL's kernel (plugin/gpu_copy.c,
    copy_stream). Ranks sharing a GPU run under MPS, which hands every context's queues out of
    one pool (measured on an H200: 2 ranks x 32 ran, 4 x 32 failed cudaSetDevice with out of
    memory, and 2 x 32 left no room for the plugin's own copy context): 32 shared out, 4 at
    least. Under MPS the copies run in the plugin's own context, so the application's queue
    count no longer matters for them."""
    share = max(1, -(-nranks // max(1, ngpus)))
    return 32 if share == 1 else max(4, 32 // share)


def mps_plan(nranks, ngpus, have_ctl):
    """Whether to start MPS and what to tell the user: (start, message). MPS is needed when
    ranks share a GPU (more ranks than GPUs); without nvidia-cuda-mps-control they run
    time-sliced, which is said plainly."""
    if ngpus == 0 or nranks <= ngpus:
        return False, None
    if not have_ctl:
        return False, ("WARNING: %d ranks share %d GPU(s) and MPS is not available "
                       "(nvidia-cuda-mps-control not found): %s" % (nranks, ngpus, TIME_SLICED))
    return True, "%d ranks share %d GPU(s): starting MPS" % (nranks, ngpus)


class Mps:
    """nvidia-cuda-mps-control -d with its pipe and log directories in the run directory."""

    def __init__(self, rundir, say):
        base = rundir if len(rundir) < 60 else tempfile.mkdtemp(prefix="sf-mps-")
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(base, "mps-pipe"),
                    "CUDA_MPS_LOG_DIRECTORY": os.path.join(base, "mps-log")}
        self.say = say
        self.running = False

    def start(self):
        for d in self.env.values():
            os.makedirs(d, mode=0o700, exist_ok=True)
        ctl = shutil.which("nvidia-cuda-mps-control")
        e = dict(os.environ, **self.env)
        try:
            p = subprocess.run([ctl, "-d"], env=e, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as ex:
            p = None
            why = str(ex)
        if p is not None and p.returncode == 0:
            self.running = True
            self.say("MPS started (pipe directory %s)" % self.env["CUDA_MPS_PIPE_DIRECTORY"])
        else:
            why = (p.stderr.strip() or "exit status %d" % p.returncode) if p else why
            self.say("WARNING: MPS did not start (%s): %s" % (why, TIME_SLICED))
        return self.running

    def stop(self):
        if not self.running:
            return
        e = dict(os.environ, **self.env)
        try:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", env=e, text=True,
                           capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.running = False


# ---- processes ------------------------------------------------------------------------------

def free_port():
    """A TCP port nobody listens on now (MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_tree(pid):
    """pid and all its descendants (from /proc/*/stat), parents first."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo += sorted(children.get(p, []))
    return out


def _read(path, limit=20000):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError as e:
        return "(%s)" % e.strerror


def _catches(pid, sig):
    for ln in _read("/proc/%d/status" % pid).splitlines():
        if ln.startswith("SigCgt:"):
            return bool(int(ln.split()[1], 16) >> (sig - 1) & 1)
    return False


def stack_dump(pid, gdb=True):
    """What pid and its threads are doing: gdb's `thread apply all bt` when gdb exists, else
    /proc/PID/stack and each thread's wchan; a Python process that catches SIGUSR1
    (faulthandler, as sfpyhook sets up) also writes its Python stack to its own stderr."""
    cmd = _read("/proc/%d/cmdline" % pid).replace("\0", " ").strip()
    lines = ["=== pid %d: %s" % (pid, cmd or "(gone)"),
             "state: %s" % next((ln.split(":", 1)[1].strip() for ln in
                                 _read("/proc/%d/status" % pid).splitlines()
                                 if ln.startswith("State:")), "?"),
             "wchan: %s" % _read("/proc/%d/wchan" % pid)]
    if _catches(pid, signal.SIGUSR1) and "python" in cmd.split(" ")[0]:
        try:
            os.kill(pid, signal.SIGUSR1)
            lines.append("(sent SIGUSR1: its Python stack is in its log)")
        except OSError:
            pass
    g = shutil.which("gdb") if gdb else None
    if g:
        try:
            out = subprocess.run([g, "-batch", "-nx", "-p", str(pid), "-ex",
                                  "thread apply all bt"], capture_output=True, text=True,
                                 timeout=30)
            lines.append(out.stdout[-30000:] + out.stderr[-2000:])
        except (OSError, subprocess.TimeoutExpired) as e:
            lines.append("(gdb: %s)" % e)
    else:
        lines.append("kernel stack:\n" + _read("/proc/%d/stack" % pid))
        try:
            for t in sorted(os.listdir("/proc/%d/task" % pid), key=int):
                lines.append("thread %s: %s wchan %s" % (
                    t, _read("/proc/%d/task/%s/comm" % (pid, t)).strip(),
                    _read("/proc/%d/task/%s/wchan" % (pid, t))))
        except OSError:
            pass
    return "\n".join(lines)


def dump_stacks(pids, path, gdb=True):
    """stack_dump of every pid and its descendants into path; returns the text."""
    seen, parts = set(), []
    for p in pids:
        for q in process_tree(p):
            if q not in seen:
                seen.add(q)
                parts.append(stack_dump(q, gdb))
    text = "\n\n".join(parts) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _signame(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "signal %d" % sig


class Proc:
    """One rank (or the harness): its process, output and outcome."""

    def __init__(self, label, rank, node, argv, env, log_path):
        self.label, self.rank, self.node, self.argv, self.env = label, rank, node, argv, env
        self.log_path = log_path
        self.popen = None
        self.rc = None
        self.t_exit = None
        self.killed = None  # the signal the launcher tore it down with, if it did
        self.stdout_tail = bytearray()
        self.bufs = {}

    @property
    def pid(self):
        return self.popen.pid if self.popen else None

    def outcome(self):
        if self.rc is None:
            return "still running"
        if self.rc == 0:
            return "exit 0"
        if self.rc < 0:
            s = "killed by %s" % _signame(-self.rc)
            return s + (" (torn down by the launcher)" if self.killed else "")
        return "exit %d" % self.rc

    def to_json(self):
        return {"label": self.label, "rank": self.rank, "node": self.node, "pid": self.pid,
                "argv": self.argv, "rc": self.rc,
                "signal": _signame(-self.rc) if self.rc is not None and self.rc < 0 else None,
                "exit_s": self.t_exit, "torn_down": bool(self.killed), "log": self.log_path,
                "cuda_visible_devices": self.env.get("CUDA_VISIBLE_DEVICES")}

    def log_text(self, limit=16000):
        t = _read(self.log_path, 1 << 24)
        return t if len(t) <= limit else "...\n" + t[-limit:]


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

# NCCL_NET_GDR_LEVEL=SYS: a virtual NIC has no PCI path, so NCCL puts it under the CPU and keeps
# GPUDirect off below SYS; the GPU data path (plugin/gpu.h) is an emulated RDMA NIC next to its GPU.
FIXED_NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                  "NVSHMEM_DISABLE_NVLS": "1", "NCCL_MNNVL_ENABLE": "0",
                  "NCCL_NET_GDR_LEVEL": "SYS"}


def copy_threads(nranks, cpus=None):
    """Copy threads per rank (SIMFABRIC_COPY_THREADS) when the user has not chosen: the
    machine's CPUs shared out over the ranks, at most 4 each, none below 8 CPUs (there the
    ranks' own threads need every core)."""
    cpus = cpus or os.cpu_count() or 1
    if cpus < 8:
        return 0
    return max(1, min(4, cpus // max(1, nranks)))


def rank_env(base, rank, nnodes, gpus_per_node, node, port, plugin, sock, cuda=None,
             rundir=None):
    """The environment of one rank: torchrun's variables, NCCL over simfabric, its node."""
    world = nnodes * gpus_per_node
    e = dict(base)
    e.update(RANK=str(rank), LOCAL_RANK=str(rank % gpus_per_node), WORLD_SIZE=str(world),
             LOCAL_WORLD_SIZE=str(gpus_per_node), GROUP_RANK=str(rank // gpus_per_node),
             NODE_RANK=str(rank // gpus_per_node), MASTER_ADDR="127.0.0.1",
             MASTER_PORT=str(port), NCCL_NET_PLUGIN=plugin, NCCL_NET="simfabric",
             SIMFABRIC_SOCKET=sock, NCCL_HOSTID=node, SIMFABRIC_NODE=node)
    # the rest of what torchrun's elastic agent sets: one role, no restarts
    e.update(GROUP_WORLD_SIZE=str(nnodes), ROLE_NAME="default", ROLE_RANK=str(rank),
             ROLE_WORLD_SIZE=str(world), TORCHELASTIC_RESTART_COUNT="0",
             TORCHELASTIC_MAX_RESTARTS="0",
             TORCHELASTIC_RUN_ID=os.path.basename(rundir.rstrip("/")) if rundir else "none")
    if rundir:
        e["SIMFABRIC_RUN_DIR"] = rundir
    for k, v in FIXED_NCCL_ENV.items():
        e.setdefault(k, v)
    if cuda is not None:
        e["CUDA_VISIBLE_DEVICES"] = cuda
    return e


# ---- MPI programs (simfabric launch --mpi) ------------------------------------------------------

# Run by sh in each MPI rank: its rank from the MPI launcher (Open MPI, PMIx, MPICH), then the
# variables of that rank (as rank_env gives a launched rank) and exec the program. The node names
# and each rank's GPU come in SIMFABRIC_MPI_NODES and SIMFABRIC_MPI_GPUS (words), the ranks per
# node in SIMFABRIC_MPI_GPN.
MPI_WRAPPER = r"""r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}
case "$r" in ''|*[!0-9]*) echo "simfabric: no MPI rank here (OMPI_COMM_WORLD_RANK, PMIX_RANK, \
PMI_RANK): start this under mpirun" >&2; exit 127;; esac
g=$SIMFABRIC_MPI_GPN
n=$((r / g)) i=0 node=
for x in $SIMFABRIC_MPI_NODES; do [ $i = $n ] && node=$x; i=$((i + 1)); done
[ -n "$node" ] || { echo "simfabric: MPI rank $r is past the $i node(s) x $g rank(s)" >&2; \
exit 127; }
i=0
for x in $SIMFABRIC_MPI_GPUS; do [ $i = $r ] && export CUDA_VISIBLE_DEVICES=$x; i=$((i + 1)); done
export NCCL_HOSTID=$node SIMFABRIC_NODE=$node RANK=$r LOCAL_RANK=$((r % g)) GROUP_RANK=$n \
NODE_RANK=$n ROLE_RANK=$r
if [ -n "${SIMFABRIC_MPI_HOSTS:-}" ]; then
i=0 h=
for x in $SIMFABRIC_MPI_HOSTS; do [ $i = $n ] && h=$x; i=$((i + 1)); done
i=0
for x in $SIMFABRIC_MPI_SOCKETS; do [ $i = "$h" ] && export SIMFABRIC_SOCKET=$x; i=$((i + 1)); done
export SIMFABRIC_HOST=$h FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
fi
exec "$@"
"""
MPI_PER_RANK = ("RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "NCCL_HOSTID",
                "SIMFABRIC_NODE", "CUDA_VISIBLE_DEVICES", "SIMFABRIC_HOST")


def find_mpirun(env=None):
    """The mpirun to use: $SIMFABRIC_MPIRUN, else mpirun on PATH; a LaunchError (127, as a
    command that cannot be started) naming what is missing otherwise."""
    env = os.environ if env is None else env
    want = env.get("SIMFABRIC_MPIRUN") or "mpirun"
    found = shutil.which(want, path=env.get("PATH"))
    if not found:
        raise LaunchError("--mpi: %s not found%s (install Open MPI: apt-get install openmpi-bin; "
                          "or name one in SIMFABRIC_MPIRUN)" % (
                              want, "" if "/" in want else " on PATH"), 127)
    return found


def mpi_flavour(mpirun):
    """'openmpi' when `mpirun --version` says Open MPI (or OpenRTE/PRRTE), else 'other'."""
    try:
        p = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        out = p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired):
        return "other"
    return "openmpi" if re.search(r"Open MPI|OpenRTE|PRRTE|prterun", out) else "other"


def mpi_env(names, gpus_per_node, gpus, hosts=None, sockets=None):
    """What MPI_WRAPPER reads: the node names, ranks per node, each rank's one GPU (its own
    device 0: nccl-tests, which counts local ranks per host name, would otherwise pick device
    RANK; NCCL_TESTS_DEVICE=0 tells it so); with --local-hosts, each node's host and each
    host's daemon's socket (a rank gets its node's host's: SIMFABRIC_HOST, SIMFABRIC_SOCKET)."""
    nranks = len(names) * gpus_per_node
    out = {"SIMFABRIC_MPI_NODES": " ".join(names), "SIMFABRIC_MPI_GPN": str(gpus_per_node),
           "SIMFABRIC_MPI_GPUS": " ".join(gpus[r % len(gpus)] for r in range(nranks))
           if gpus else ""}
    if hosts:
        bad = [p for p in sockets if not p or any(c.isspace() for c in p)]
        if bad:
            raise LaunchError("--mpi with --local-hosts: the socket path %r has a space, which "
                              "the MPI wrapper's lists cannot carry (use another --run-dir)"
                              % bad[0], EXIT_USAGE)
        out.update(SIMFABRIC_MPI_HOSTS=" ".join(map(str, hosts)),
                   SIMFABRIC_MPI_SOCKETS=" ".join(sockets))
    return out


def mpi_argv(mpirun, cmd, nranks, export=(), extra=(), flavour="openmpi"):
    """mpirun's command line: nranks ranks of cmd, each through MPI_WRAPPER. Open MPI gets
    --oversubscribe (more ranks than cores is the point here), --bind-to none (each rank has
    threads of its own: NCCL's proxy, copy threads), -x for every variable the launcher sets (a
    local launch inherits them anyway), and --allow-run-as-root as root; other MPIs -np only.
    extra: the user's own mpirun arguments, last before the program."""
    argv = [mpirun, "-np", str(nranks)]
    if flavour == "openmpi":
        argv += ["--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        for k in export:
            if k not in MPI_PER_RANK and k.isidentifier():
                argv += ["-x", k]
    return argv + list(extra) + ["sh", "-c", MPI_WRAPPER, "simfabric-mpi-rank"] + list(cmd)


class LaunchResult:
    """What came of a launch: .procs (per rank: rc, outcome(), log_text()), .status (the CLI's
    exit status), .timed_out, .interrupted, .first_failure, .run_dir, .fabric (the dump)."""

    def __init__(self, run_dir, procs, fabric, seconds, timed_out, interrupted, notes, stacks):
        self.run_dir, self.procs, self.fabric, self.seconds = run_dir, procs, fabric, seconds
        self.timed_out, self.interrupted, self.notes, self.stacks = (timed_out, interrupted,
                                                                     notes, stacks)
        failed = [p for p in procs if p.rc not in (0, None) and not p.killed]
        failed.sort(key=lambda p: p.t_exit or 0)
        self.first_failure = failed[0] if failed else None
        self.stats = None
        self.faults = None
        self.connections = None  # sfctl.show's chans at the end: msgs, bytes per connection
        self.series = None  # sfctl.series at the end: every link's bytes over time
        self.series_note = None  # why there is no series.json on a modelled fabric
        self.t_start = None  # CLOCK_MONOTONIC seconds the ranks' clock (t_exit) counts from
        self.counter_files = []  # what write_counters() put into the run directory

    @property
    def ok(self):
        return all(p.rc == 0 for p in self.procs) and not self.timed_out

    @property
    def status(self):
        if self.interrupted:
            return 128 + self.interrupted
        if self.timed_out:
            return EXIT_TIMEOUT
        if self.first_failure:
            rc = self.first_failure.rc
            return rc if rc > 0 else 128 - rc
        return 0 if self.ok else EXIT_FAIL

    def rank(self, r):
        return [p for p in self.procs if p.rank == r][0]

    def output(self, r):
        """Rank r's whole log (stdout and stderr as they came)."""
        return _read(self.rank(r).log_path, 1 << 26)

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


class Launcher:
    """Runs procs over a fabric: output, progress, failure, timeout and signal handling."""

    def __init__(self, run_dir, echo=True, out=None, progress=None, grace=5.0,
                 fail_grace=None, timeout=None, handle_signals=False, py_stacks=True,
                 hang=False):
        """progress: seconds between progress lines on stderr, None: every 5 s when stderr is
        a terminal, 0/False: never. hang: the timeout is an expected hang's time (expect:
        failure: hang:), said so when it comes."""
        self.run_dir = run_dir
        self.echo = echo
        self.out = out or sys.stdout
        self.err = sys.stderr
        if progress is None:
            progress = 5.0 if self.err.isatty() else 0
        self.progress = 5.0 if progress is True else float(progress or 0)
        self.grace = grace  # SIGTERM -> SIGKILL
        self.fail_grace = grace if fail_grace is None else fail_grace  # failure -> teardown
        self.timeout = timeout
        self.hang = hang
        self.handle_signals = handle_signals
        self.py_stacks = py_stacks
        self.notes = []
        self._signal = None
        self.t_start = None

    def say(self, msg):
        self.notes.append(msg)
        self.err.write("simfabric: %s\n" % msg)
        self.err.flush()

    def _on_signal(self, sig, frame):
        if self._signal:  # a second one: no more grace
            self.grace = 0
        self._signal = sig

    def _spawn(self, p):
        env = dict(p.env)
        if self.py_stacks and os.path.isdir(PYHOOK):
            env["PYTHONPATH"] = PYHOOK + (os.pathsep + env["PYTHONPATH"]
                                          if env.get("PYTHONPATH") else "")
            env["SIMFABRIC_FAULTHANDLER"] = "1"
        p.logf = open(p.log_path, "ab")
        try:
            p.popen = subprocess.Popen(p.argv, env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       start_new_session=True, preexec_fn=_pdeathsig)
        except OSError as e:
            p.logf.close()
            import errno
            raise LaunchError("%s: cannot start %s: %s" % (p.label, p.argv[0], e.strerror),
                              127 if e.errno == errno.ENOENT else 126)
        p.t0 = time.monotonic()

    def _line(self, p, stream, data):
        p.logf.write(data)
        p.logf.flush()
        if stream == "out":
            p.stdout_tail += data
            if len(p.stdout_tail) > (1 << 20):
                del p.stdout_tail[:len(p.stdout_tail) - (1 << 20)]
        if self.echo:
            text = data.decode("utf-8", "replace").rstrip("\n")
            try:
                self.out.write("[%s] %s\n" % (p.label, text))
                self.out.flush()
            except (BrokenPipeError, ValueError):  # `simfabric launch ... | head`: logs only
                self.echo = False

    def _feed(self, p, stream, chunk):
        buf = p.bufs.get(stream, b"") + chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            self._line(p, stream, line + b"\n")
        if len(buf) > 65536:  # no newline in sight (a progress bar's \r): a line anyway
            self._line(p, stream, buf + b"\n")
            buf = b""
        p.bufs[stream] = buf

    def _flush(self, p, stream):
        rest = p.bufs.pop(stream, b"")
        if rest:
            self._line(p, stream, rest + b"\n")

    def _teardown(self, procs, why):
        alive = [p for p in procs if p.rc is None]
        if alive:
            self.say("%s: stopping %s (SIGTERM, SIGKILL after %.0f s)" % (
                why, ", ".join(p.label for p in alive), self.grace))
        for p in alive:
            p.killed = signal.SIGTERM
            _killpg(p.pid, signal.SIGTERM)
        return time.monotonic() + self.grace

    def run(self, procs, fabric_socket=None):
        """Start procs and pump their output until they are all done and their pipes closed.
        A rank failing gives the others fail_grace seconds; a timeout dumps every rank's
        stack; a signal (with handle_signals) tears down at once. Tearing down is SIGTERM to
        each rank's process group, SIGKILL after grace. Returns (timed_out, the interrupting
        signal or None, the stack dump's path or None)."""
        sel = selectors.DefaultSelector()
        old = {}
        if self.handle_signals:
            for s in (signal.SIGINT, signal.SIGTERM):
                old[s] = signal.signal(s, self._on_signal)
        t_start = self.t_start = time.monotonic()
        deadline = t_start + self.timeout if self.timeout else None
        kill_at = None  # set once tearing down has begun: when SIGKILL follows
        killed = False
        fail_at = None  # when the survivors of a failure are torn down
        timed_out, stacks = False, None
        next_progress = t_start + (self.progress or 0)
        try:
            for p in procs:
                self._spawn(p)
                sel.register(p.popen.stdout, selectors.EVENT_READ, (p, "out"))
                sel.register(p.popen.stderr, selectors.EVENT_READ, (p, "err"))
            open_streams = 2 * len(procs)
            while True:
                for key, _ in sel.select(0.1):
                    p, stream = key.data
                    chunk = os.read(key.fileobj.fileno(), 65536)
                    if chunk:
                        self._feed(p, stream, chunk)
                    else:
                        self._flush(p, stream)
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                        open_streams -= 1
                now = time.monotonic()
                for p in procs:
                    if p.rc is None and p.popen.poll() is not None:
                        p.rc = p.popen.returncode
                        p.t_exit = now - t_start
                        if p.rc != 0 and not p.killed and fail_at is None and kill_at is None:
                            fail_at = now + self.fail_grace
                            if any(q.rc is None for q in procs):
                                self.say("%s (%s) %s after %.1f s: the other ranks get %.0f s "
                                         "to finish" % (p.label, p.node, p.outcome(), p.t_exit,
                                                        self.fail_grace))
                running = [p for p in procs if p.rc is None]
                if not running and open_streams == 0:
                    break
                if not running and killed and now >= kill_at + 5:
                    # something outside the ranks' process groups holds their output open
                    self.say("output still open 5 s after SIGKILL (a process outside the ranks' "
                             "process groups has it): not waiting for it")
                    for key in list(sel.get_map().values()):
                        p, stream = key.data
                        self._flush(p, stream)
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                    break
                if kill_at is None:
                    why = None
                    if self._signal:
                        why = "interrupted (%s)" % _signame(self._signal)
                    elif deadline and now >= deadline:
                        timed_out = True
                        self.say("hang: no rank ended in %g s, as expected; dumping every "
                                 "rank's stack (where each one was), then ending the job"
                                 % self.timeout if self.hang else
                                 "timeout: the job ran past %.0f s; dumping every rank's stack"
                                 % self.timeout)
                        stacks = os.path.join(self.run_dir, "stacks.txt")
                        try:
                            dump_stacks([p.pid for p in running], stacks)
                            time.sleep(0.5)  # faulthandler writes to the rank's log
                        except OSError as e:
                            self.say("cannot dump stacks: %s" % e)
                        why = "the expected hang's time" if self.hang else "timeout"
                    elif fail_at and now >= fail_at:
                        why = "a rank failed"
                    elif not running:
                        why = "every rank exited"  # but children hold their output open
                    if why:
                        kill_at = self._teardown(procs, why)
                        if not running:
                            for p in procs:
                                _killpg(p.pid, signal.SIGTERM)
                elif self._signal and self.grace == 0:
                    kill_at = min(kill_at, now)  # a second signal: no more grace
                if kill_at is not None and now >= kill_at and not killed:
                    killed = True
                    for p in procs:
                        if _killpg(p.pid, signal.SIGKILL) and p.rc is None:
                            p.killed = signal.SIGKILL
                if self.progress and now >= next_progress:
                    next_progress = now + self.progress
                    self._progress(procs, now - t_start, fabric_socket)
        finally:
            for p in procs:
                if p.popen is not None and p.rc is None:
                    _killpg(p.pid, signal.SIGKILL)
                    p.popen.wait()
                    p.rc = p.popen.returncode
                    p.killed = p.killed or signal.SIGKILL
                    p.t_exit = time.monotonic() - t_start
                if p.popen is not None:
                    _killpg(p.pid, signal.SIGKILL)  # leftovers in its process group
                if getattr(p, "logf", None):
                    p.logf.close()
            sel.close()
            for s, h in old.items():
                signal.signal(s, h)
        return timed_out, self._signal, stacks

    def _progress(self, procs, t, sock):
        done = [p for p in procs if p.rc is not None]
        moved = ""
        if sock:
            try:
                st = sfctl.show(sock, timeout=1.0)
                b = sum(c.get("bytes", 0) for c in st["chans"] if isinstance(c.get("bytes"), int))
                moved = "; fabric: %d connection(s), %.1f MB delivered" % (len(st["chans"]),
                                                                          b / 1e6)
            except (sfctl.CtlError, OSError):
                pass
        self.err.write("simfabric: %.1f s: %d of %d rank(s) running, %d done%s\n" % (
            t, len(procs) - len(done), len(procs), len(done), moved))
        self.err.flush()


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
        self.links = {}  # --hosts-from-env: the rendezvous's connections, for NetRelay
        self.offsets = {}  # ... and on host 0 each host's clock offset measured there
        self.epoch_ns = None
        self.rendezvous_timeout = FEDERATE_TIMEOUT_S
        self.mps = None
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
            if self.scenario and self.host and self.host[1] > 1:
                self._federate()
            self.daemon = start_daemon(self.paths, self.run_dir, self.scenario,
                                       self.daemon_args + self._host_args(
                                           self.host[0] if self.host else 0))
            self.socket = self.daemon.socket
            self.fabric = sfctl.fabric(self.socket)
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
                self.relay.start()
            if self.hosts:
                self.say("%d hosts on this machine: host 0's daemon at %s, %s; connections "
                         "between hosts over libfabric on loopback" % (
                             self.local_hosts, self.socket, ", ".join(
                                 "host %d's at %s" % (h + 1, d.socket)
                                 for h, d in enumerate(self.hosts))))
        return self

    def _federate(self):
        """--hosts-from-env on a modelled fabric: agree with the other hosts' agents on the
        scenario and on virtual time 0 (sf.federate), before this host's daemon starts."""
        h, n, addr, job_port = self.host
        seed = None
        if "--seed" in self.daemon_args[:-1]:
            seed = self.daemon_args[self.daemon_args.index("--seed") + 1]
        port = job_port - JOB_PORT_OFFSET + 1
        try:
            text = dump_scenario(self.scenario, self.paths, seed, hosts=n, text=True)
        except LaunchError as e:
            raise LaunchError("--hosts-from-env: cannot resolve the scenario %s: %s" % (
                self.scenario, e), EXIT_FAIL)
        digest, dump = federate.scenario_hash(text), json.loads(text)
        try:
            self.epoch_ns, measured, self.links = federate.agree(
                h, n, addr, port, digest, timeout=self.rendezvous_timeout,
                bind=addr if is_loopback(addr) else "")
        except federate.FederationError as e:
            raise LaunchError("--hosts-from-env: %s" % e, EXIT_FAIL)
        if h == 0:
            self.offsets = {k: v[1] for k, v in measured.items()}
            self.say("scenario %s (hash %s) on all %d hosts; clock offsets to host 0: %s" % (
                self.scenario, digest, n, ", ".join(
                    "host %d (%s) %+.1f us (round trip %.1f us)" % (
                        k, v[0], v[1] / 1e3, v[2] / 1e3) for k, v in sorted(measured.items()))))
            worst = min(measured.items(), key=lambda kv: kv[1][3])
            line = federate.fidelity_line(dump, 0, worst[1][3], "host %d" % worst[0])
        else:
            self.say("scenario %s (hash %s) agreed with host 0; clock offset to host 0 %+.1f us "
                     "(round trip %.1f us): virtual time 0 at CLOCK_MONOTONIC %d here" % (
                         self.scenario, digest, measured[0] / 1e3, measured[1] / 1e3,
                         self.epoch_ns))
            line = federate.fidelity_line(dump, h, measured[2], "host 0")
        if line:
            self.say(line)

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

    def _shared_env(self, argv, nnodes, gpus_per_node, env):
        """What every rank's environment has in common (MPS, copy threads, the NCCL job
        program's libraries, env over os.environ), each rank's CUDA_VISIBLE_DEVICES and the
        GPUs. Starts MPS where ranks share a GPU."""
        nranks = nnodes * gpus_per_node
        gpus = gpu_ids()
        cuda, shared = gpu_map(nnodes, gpus_per_node, gpus)
        base = dict(os.environ)
        start, msg = mps_plan(nranks, len(gpus),
                              shutil.which("nvidia-cuda-mps-control") is not None)
        if msg and not start:
            self.say(msg)
        if start:
            self.say(msg)
            self.mps = Mps(self.run_dir, self.say)
            if self.mps.start():
                base.update(self.mps.env)
        if env:
            base.update(env)
        base.setdefault("SIMFABRIC_COPY_THREADS", str(copy_threads(nranks)))
        if gpus:
            base.setdefault("CUDA_DEVICE_MAX_CONNECTIONS",
                            str(device_connections(nranks, len(gpus))))
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
        base, cuda, _ = self._shared_env(argv, nnodes, gpus_per_node, env)
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
        base, _, gpus = self._shared_env(argv, nnodes, gpus_per_node, env)
        e = rank_env(base, 0, nnodes, gpus_per_node, names[0], free_port(), self.paths.plugin,
                     self.socket, None, self.run_dir)
        hosts = [self.host_of_node(n, i, nnodes, len(self.sockets()))
                 for i, n in enumerate(names)] if self.hosts else None
        e.update(mpi_env(names, gpus_per_node, gpus, hosts, self.sockets()))
        if gpus:
            e.setdefault("NCCL_TESTS_DEVICE", "0")
        mpirun = mpirun or find_mpirun(e)
        set_here = sorted(k for k in e if os.environ.get(k) != e[k])  # what mpirun -x passes on
        return [Proc("mpi", 0, "%d nodes" % nnodes,
                     mpi_argv(mpirun, argv, nranks, set_here, mpi_args, mpi_flavour(mpirun)), e,
                     os.path.join(self.run_dir, "mpirun.log"))]

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
        try:
            return sfctl.series(self.socket), (
                "series.json is host 0's daemon's: the links the other hosts reserve carry no "
                "traffic in it (stats.json has every host's counters)" if self.hosts else None)
        except sfctl.CtlError as e:
            if e.errno == errno.EOPNOTSUPP:
                return None, ("no series.json: the daemon does not sample its links (started "
                              "with --sample-ms 0)")
            return None, "no series.json: %s" % e

    def collect(self, lr):
        """The fabric's counters at the end of the run into lr, for write_counters()."""
        lr.stats, lr.faults, lr.connections = self.stats(), self.faults(), self.connections()
        lr.series, why = self.series()
        if why:
            lr.notes.append(why)
            lr.series_note = why
        if isinstance(self.relay, federate.NetRelay) and lr.stats is not None:
            self._gather(lr)

    def _gather(self, lr):
        """--hosts-from-env: every host's counters in host 0's run directory. The other hosts'
        agents send theirs to host 0's (each keeps its own host's in its run directory); host
        0's merges what came within federate.COUNTERS_WAIT_S, as --local-hosts merges its
        daemons', and says which hosts are missing."""
        h, n = self.host[0], self.host[1]
        if h != 0:
            sent = self.relay.send_counters(lr.stats, lr.faults, lr.connections)
            self.say("this host's counters %s host 0's agent (its stats.json and faults.json "
                     "have every host's; this run directory's, this host's)" % (
                         "sent to" if sent else "could not be sent to"))
            return
        got = self.relay.wait_counters(n)
        for line in self.relay.clock_summary():
            self.say(line)
        misfit = []
        for k in sorted(got):
            why = sfctl.stats_misfit(lr.stats, got[k][0])
            if why:  # another build's daemon, or a forged line: not summed into this run's
                self.say("counters: host %d's do not fit host 0's (%s): left out of "
                         "stats.json and faults.json (its run directory has them)" % (k, why))
                misfit.append(k)
        hosts = sorted(set(got) - set(misfit))
        lr.stats = sfctl.merge_stats([lr.stats] + [got[k][0] for k in hosts])
        lr.faults = sfctl.merge_faults([lr.faults] + [got[k][1] for k in hosts])
        lr.connections = (lr.connections or []) + [c for k in hosts for c in got[k][2] or []]
        missing = [k for k in range(1, n) if k not in got]  # (a misfit is said above)
        self.say("stats.json and faults.json: the counters of host(s) %s%s" % (
            ", ".join(map(str, [0] + hosts)),
            "; host(s) %s sent none within %d s (their run directories have theirs)" % (
                ", ".join(map(str, missing)), federate.COUNTERS_WAIT_S) if missing else ""))

    def down(self):
        if self.relay:
            self.relay.stop()
        if self.mps:
            self.mps.stop()
        for d in self.hosts:
            d.stop()
        rc = self.daemon.stop() if self.daemon else None
        return rc


def local_hosts_refusal(local_hosts, nodes, scenario, socket, mpi, host=None):
    """Why --local-hosts (or --hosts-from-env: host) cannot run as asked, or None."""
    if host:
        if host[1] > nodes:
            return "--hosts-from-env: %d hosts for %d node(s)" % (host[1], nodes)
        if local_hosts != 1:
            return "--hosts-from-env and --local-hosts: one or the other"
        if host[1] > 1 and (socket or mpi):
            return ("--hosts-from-env with %s: not yet (docs/scale-out.md: a daemon per host, "
                    "no MPI)" % ("--socket" if socket else "--mpi"))
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
    mpirun = find_mpirun(dict(os.environ, **(env or {}))) if mpi else None  # before any daemon
    if rendezvous_timeout is not None and not (0 < rendezvous_timeout <= 3600):
        raise LaunchError("--rendezvous-timeout %g: a number of seconds in (0, 3600]" %
                          rendezvous_timeout, EXIT_USAGE)
    job = Job(paths, run_dir, os.path.basename(cmd[0]), scenario, socket, daemon_args,
              local_hosts=local_hosts, host=host)
    job.rendezvous_timeout = rendezvous_timeout or FEDERATE_TIMEOUT_S
    if host:
        job.say("host %d of %d (host 0 at %s): this host's daemon and ranks" % host[:3])
    t0 = time.monotonic()
    procs, res = [], None
    try:
        job.up()
        procs = (job.mpi_ranks(cmd, nodes, gpus_per_node, env, mpirun, mpi_args) if mpi else
                 job.ranks(cmd, nodes, gpus_per_node, env))
        L = Launcher(job.run_dir, echo=echo, out=out, progress=progress, grace=grace,
                     fail_grace=fail_grace, timeout=timeout, handle_signals=handle_signals)
        timed_out, interrupted, stacks = L.run(procs, job.socket)
        res = LaunchResult(job.run_dir, procs, job.fabric, time.monotonic() - t0, timed_out,
                           interrupted, job.notes + L.notes, stacks)
        res.t_start = L.t_start
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
    return {"version": 1, "fabric": (fabric or {}).get("name"),
            "kind": (fabric or {}).get("kind"), "shared_daemon": bool(shared),
            "epoch_ns": fl.get("epoch_ns"), "now_ns": fl.get("now_ns"), "job": job,
            "links": links, "connections": conns,
            "nics": sfctl.nic_counters(conns, links)}


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


# ---- scenarios: job: and expect: -----------------------------------------------------------

TORCH_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather",
               "reducescatter": "reduce_scatter", "broadcast": "broadcast",
               "alltoall": "all_to_all", "sendrecv": "send_recv"}
OUR_NAMES = {v: k for k, v in TORCH_NAMES.items()}
GPU_PROGRAMS = ("nccl", "torch")


def _subst(words, paths, rundir):
    m = {"{python}": sys.executable, "{root}": ROOT, "{build}": paths.build,
         "{tools}": HERE, "{run_dir}": rundir}
    out = []
    for w in words:
        for k, v in m.items():
            w = w.replace(k, v)
        out.append(w)
    return out


def program_argv(job, paths, rundir, python=None):
    """The argv every rank runs for a scenario's job (the harness: one process for all)."""
    prog = job["program"]
    extra = _subst(job.get("args") or [], paths, rundir)
    t = job["timeout_s"]
    inner = max(1, t - min(10, t // 10))  # the program's own limit: before the launcher's
    if prog == "harness":
        argv = [paths.harness, "--plugin", paths.plugin, "--nranks", str(len(job["nodes"])),
                "--node-prefix", job["node_prefix"], "--json",
                os.path.join(rundir, "harness.json"), "--timeout", str(inner)]
        tests = job["tests"]
        argv += ["--tests", "all" if tests == "all" else ",".join(tests)]
        if tests != "all" and "bench" in tests:
            argv.append("--bench")
        if job.get("max_bytes"):
            argv += ["--max-bytes", str(job["max_bytes"])]
        if job.get("bound_s") is not None:
            argv += ["--bound", "%g" % job["bound_s"]]
        if job.get("api_version"):
            argv += ["--api-version", str(job["api_version"])]
        return argv + extra
    if prog == "nccl":
        argv = [paths.nccljob, "--coll", ",".join(job["collectives"]),
                "--sizes", ",".join(str(s) for s in job["sizes"]), "--dtype", job["dtype"],
                "--op", job["op"], "--warmup", str(job["warmup"]), "--iters", str(job["iters"]),
                "--check", "0" if job.get("_data") == "unchecked" else "1",
                "--timeout-s", str(inner), "--json", os.path.join(rundir, "nccljob.json")]
        if job.get("op_timeout_s") is not None:
            argv += ["--op-timeout-s", "%g" % job["op_timeout_s"]]
        return argv + extra
    if prog == "torch":
        return [python or sys.executable, paths.torchjob,
                "--sizes", ",".join(str(s) for s in job["sizes"]),
                "--collectives", ",".join(TORCH_NAMES[c] for c in job["collectives"]),
                "--iters", str(job["iters"]), "--warmup", str(job["warmup"])] + extra
    return _subst(job["command"], paths, rundir) + extra


def needs_gpu(job):
    """Programs nccl and torch do, except the NCCL job program's --dry-run (no CUDA, no NCCL:
    its bootstrap, checks and failure handling on the CPU)."""
    if job["program"] == "nccl" and "--dry-run" in (job.get("args") or ()):
        return False
    return job["program"] in GPU_PROGRAMS


def can_run(job, paths):
    """None if this machine can run the job, else why not (a skip reason)."""
    prog = job["program"]
    if prog == "harness" and not os.path.exists(paths.harness):
        return "%s is not built (make)" % paths.harness
    if needs_gpu(job) and not gpu_ids():
        return "program %s needs an NVIDIA GPU (nvidia-smi %s)" % (
            prog, "lists no GPU" if shutil.which("nvidia-smi") else "not found")
    if prog == "nccl" and not os.path.exists(paths.nccljob):
        return ("the NCCL job program %s is not built (tools/nccljob/main.c; run `make`: "
                "without CUDA and NCCL it is built for --dry-run only)" % paths.nccljob)
    if prog == "torch" and not python_with("torch"):
        return "program torch needs PyTorch (no Python here imports torch; set SIMFABRIC_PYTHON)"
    return None


class Check:
    def __init__(self, name, ok, detail, table=None):
        self.name, self.ok, self.detail, self.table = name, ok, detail, table

    def to_json(self):
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "rows": self.table}


def _last_json_line(data):
    for ln in reversed(data.decode("utf-8", "replace").splitlines()):
        ln = ln.strip()
        if ln.startswith("{"):
            try:
                return json.loads(ln)
            except ValueError:
                continue
    return None


def _load_json(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except OSError:
        return None, "%s was not written" % path
    except ValueError as e:
        return None, "%s is not JSON: %s" % (path, e)


def collect_results(job, lr, rundir):
    """The program's own report, normalised: (results [{"coll", "bytes", "time_us", "wrong",
    "ok", "stream"}], raw JSON or None, per-rank failures {rank: text}, status, why-missing)."""
    prog = job["program"]
    if prog == "harness":
        raw, why = _load_json(os.path.join(rundir, "harness.json"))
        res, fails = [], {}
        if raw:
            for t in raw.get("tests", []):
                if not t.get("ok", True):
                    fails.setdefault(t.get("rank", 0), []).append(
                        "%s: %s" % (t.get("name"), t.get("detail", "")))
                if t.get("name") == "bench" and t.get("rank") == 0:
                    m = t.get("metrics", {})
                    if m.get("latency_us"):
                        res.append({"coll": "sendrecv", "bytes": 8, "time_us": m["latency_us"],
                                    "ok": True, "wrong": 0})
                    for b in m.get("bandwidth", []):
                        if b.get("plugin_gbps", 0) > 0:
                            res.append({"coll": "sendrecv", "stream": True, "bytes": b["bytes"],
                                        "time_us": b["bytes"] / (b["plugin_gbps"] * 1e9) * 1e6,
                                        "ok": True, "wrong": 0})
        status = "ok" if raw and raw.get("ok") else ("failed" if raw else None)
        return res, raw, {k: "; ".join(v) for k, v in fails.items()}, status, why
    if prog == "torch":
        r0 = [p for p in lr.procs if p.rank == 0]
        raw = _last_json_line(bytes(r0[0].stdout_tail)) if r0 else None
        res = []
        if raw:
            for r in raw.get("results", []):
                res.append({"coll": OUR_NAMES.get(r["collective"], r["collective"]),
                            "bytes": r["bytes"], "time_us": r["time_us"], "ok": r["ok"],
                            "wrong": 0 if r["ok"] else 1})
        status = None if raw is None else ("ok" if not raw.get("errors") else "data_error")
        return res, raw, {}, status, None if raw else "rank 0 printed no JSON result"
    path = os.path.join(rundir, "nccljob.json" if prog == "nccl" else "result.json")
    raw, why = _load_json(path)
    if raw is None:
        return [], None, {}, None, why if prog == "nccl" else None
    res = [dict(r) for r in raw.get("results", [])]
    fails = {}
    for r in raw.get("ranks") or []:
        if isinstance(r, dict) and r.get("status") not in (None, "ok"):
            fails[r.get("rank")] = json.dumps(r)
    err = raw.get("error")
    if isinstance(err, dict) and err.get("rank") is not None:
        fails.setdefault(err["rank"], json.dumps(err))
    return res, raw, fails, raw.get("status"), None


def where_ranks_were(stacks):
    """From a stack dump (dump_stacks): one line per process, its state and wait channel."""
    out = []
    for block in _read(stacks, 1 << 22).split("=== pid ")[1:] if stacks else ():
        lines = block.splitlines()
        head = lines[0].split(":", 1)
        kv = dict(ln.split(": ", 1) for ln in lines[1:3] if ": " in ln)
        frame = next((ln.strip() for ln in lines if ln.lstrip().startswith("#0 ")), None)
        out.append("pid %s (%s): %s, in %s%s" % (
            head[0], os.path.basename(head[1].strip().split(" ")[0]) if len(head) > 1 else "?",
            kv.get("state", "?"), kv.get("wchan", "?") or "?",
            ", %s" % frame if frame else ""))
    return out


def check_hang(f, lr):
    """expect.failure.hang_s: no rank ended on its own before it; the launcher ended the job
    then (a timed-out launch of that length), with every rank's stack. (ok, detail)."""
    early = [p for p in lr.procs if p.rc is not None and not p.killed]
    if early:
        return False, "expected a hang of %g s, but %s" % (f["hang_s"], "; ".join(
            "%s (%s) ended on its own: %s after %.1f s" % (p.label, p.node, p.outcome(),
                                                           p.t_exit or 0) for p in early))
    if not lr.timed_out:
        return False, "expected a hang of %g s; the job was not ended at it" % f["hang_s"]
    where = where_ranks_were(lr.stacks)
    return True, "no rank ended in %g s (an expected hang); where each was: %s%s" % (
        f["hang_s"], "; ".join(where) or "no stacks", "; stacks in %s" % lr.stacks
        if lr.stacks else "")


# How long after reporting its failure a rank may take to exit, per program: the NCCL job
# program bounds its end itself (NJ_FINAL_GRACE_S + NJ_ABORT_BOUND_S, tools/nccljob/nccljob.h,
# plus 5 s); anything else gets 10 s.
EXIT_AFTER_S = {"nccl": 40}


def check_failure(f, job, lr, raw, fails, status):
    """expect.failure against what happened: (ok, detail)."""
    if f.get("hang_s") is not None:
        return check_hang(f, lr)
    prog = job["program"]
    harness = prog == "harness"
    nranks = job["ranks"]
    t_hung = lr.timed_out
    # who failed on its own, when, how
    who = {}
    if harness:  # one process; its ranks' failures are in its JSON
        hp = lr.procs[0]
        for r in range(nranks):
            if r in fails or t_hung or (hp.rc not in (0, None) and not hp.killed and not fails):
                who[r] = {"rc": hp.rc, "t": hp.t_exit, "text": fails.get(r, "") + "\n" +
                          hp.log_text(1 << 20)}
    else:
        for p in lr.procs:
            if (p.rc not in (0, None) and not p.killed) or (t_hung and p.killed):
                who[p.rank] = {"rc": p.rc, "t": p.t_exit, "text": fails.get(p.rank, "") + "\n" +
                               p.log_text(1 << 20), "hung": bool(p.killed)}
    if not who and status in (None, "ok") and not t_hung:
        return False, "the job was expected to fail, but every rank exited 0"
    err = f.get("error")
    code = raw.get("error") if isinstance(raw, dict) else None
    after = code.get("after_ms") if isinstance(code, dict) else None

    def matches(r, w):
        why = []
        if f.get("exit") and not (w["rc"] is not None and w["rc"] in f["exit"]):
            why.append("exit status %s, not %s" % (w["rc"], "/".join(map(str, f["exit"]))))
        if f.get("signal"):
            want = signal.Signals[f["signal"]].value
            if w["rc"] != -want:
                why.append("%s, not killed by %s" % (
                    "exit %s" % w["rc"] if (w["rc"] or 0) >= 0 else "killed by %s" %
                    _signame(-w["rc"]), f["signal"]))
        if err == "timeout":
            if not (t_hung or status == "timeout" or w["rc"] == 4 and prog == "nccl"):
                why.append("it did not time out")
        elif err:
            jcode = code.get("code") if isinstance(code, dict) else None
            if jcode != err and err not in w["text"]:
                why.append("no %s in its result or log%s" % (
                    err, " (the program reported %s)" % jcode if jcode else ""))
        if f.get("within_s") is not None:
            t = w["t"]
            if after is not None and isinstance(code, dict) and code.get("rank") in (r, None):
                t = min(t if t is not None else 1e18, after / 1000.0)
            if t is None or t > f["within_s"]:
                why.append("it failed after %s s, not within %g s" % (
                    "%.1f" % t if t is not None else "?", f["within_s"]))
            # the program's own clock says when it noticed; the launcher's, when it ended: a
            # rank that reports in time but then lingers has not failed "within" anything
            elif w["t"] is not None and w["t"] > f["within_s"] + EXIT_AFTER_S.get(prog, 10):
                why.append("it reported the failure after %.1f s but exited only after %.1f s "
                           "(more than within_s %g + %g s)" % (
                               t, w["t"], f["within_s"], EXIT_AFTER_S.get(prog, 10)))
        return why

    if f.get("survivors"):
        return check_survivors(f, lr, raw, who, matches, status)
    ranks = f.get("ranks", "any")
    verdicts = {r: matches(r, w) for r, w in sorted(who.items())}
    want = sorted(verdicts) if ranks == "any" else list(range(nranks)) if ranks == "all" \
        else ranks
    desc = ", ".join("rank %d (%s)" % (r, "as expected" if not verdicts[r] else
                                       "; ".join(verdicts[r]))
                     for r in want if r in verdicts) or "no rank failed on its own"
    if ranks == "any":
        ok = any(not v for v in verdicts.values())
    else:
        missing = [r for r in want if r not in verdicts]
        ok = not missing and all(not verdicts[r] for r in want)
        if missing:
            desc += "; rank(s) %s did not fail" % ", ".join(map(str, missing))
    others = [r for r in sorted(who) if r not in want]
    if others:
        desc += "; rank(s) %s failed too" % ", ".join(map(str, others))
    what = ", ".join("%s %s" % (k, v) for k, v in f.items() if v not in (None, "any"))
    return ok, "expected failure (%s): %s" % (what or "any", desc)


def _survivors_exact(raw, status):
    """failure: survivors: exact, on the program's results: (ok, what)."""
    res = raw.get("results") or []
    wrong = [r for r in res if r.get("wrong") or r.get("ok") is False]
    if not res:
        return False, "the survivors reported no results"
    if wrong:
        return False, "%d of %d of the survivors' results wrong" % (len(wrong), len(res))
    if status not in ("ok", None):
        return False, "the program reported %s" % status
    return True, "%d result(s), every one exact" % len(res)


# failure: survivors: VALUE -> its check of the program's results (ok, what)
SURVIVOR_CHECKS = {"exact": _survivors_exact}


def check_survivors(f, lr, raw, who, matches, status):
    """expect.failure.survivors: the ranks listed are lost (and fail as the other keys say);
    every other rank exits 0 on its own, and the job's results pass f["survivors"]."""
    lost = f["ranks"]
    why = []
    for r in lost:
        if r not in who:
            why.append("rank %d was not lost" % r)
        elif matches(r, who[r]):
            why.append("rank %d: %s" % (r, "; ".join(matches(r, who[r]))))
    others = [p for p in lr.procs if p.rank not in lost]
    bad = [p for p in others if p.rc != 0]
    why += ["%s (%s) %s after %.1f s" % (p.label, p.node, "was torn down" if p.killed else
                                          p.outcome(), p.t_exit or 0) for p in bad]
    ok, what = SURVIVOR_CHECKS[f["survivors"]](raw, status)
    if not ok:
        why.append(what)
    shrinks = raw.get("shrinks") or []
    said = "; the program shrank %d time(s): %s" % (len(shrinks), ", ".join(
        "at step %s without %s" % (x.get("step"), x.get("lost")) for x in shrinks)) \
        if shrinks else ""
    if why:
        return False, "expected rank(s) %s lost and the survivors %s: %s%s" % (
            ", ".join(map(str, lost)), f["survivors"], "; ".join(why), said)
    return True, "rank(s) %s lost as expected; %d survivor(s) exited 0: %s%s" % (
        ", ".join(map(str, lost)), len(others), what, said)


class _DumpUnpickler(pickle.Unpickler):
    """PyTorch's flight recorder dumps are plain dicts and lists, save for the type tags its
    pickler may add; nothing else is built (a dump is data, never code)."""
    SAFE = {("torch.jit._pickle", n): (lambda x, *_: x) for n in (
        "restore_type_tag", "build_intlist", "build_doublelist", "build_boollist",
        "build_tensorlist", "build_list")}
    SAFE[("collections", "OrderedDict")] = dict

    def find_class(self, module, name):
        if (module, name) in self.SAFE:
            return self.SAFE[(module, name)]
        raise pickle.UnpicklingError("%s.%s is not in a flight recorder dump" % (module, name))


def read_flight_recorder(path):
    """A dump as a dict (pickle, or the JSON format), or raise ValueError saying why not."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        d = json.loads(data) if data[:1] == b"{" else _DumpUnpickler(
            io.BytesIO(data)).load()
    except Exception as e:  # a truncated dump, another format: the check says so
        raise ValueError("%s: not a flight recorder dump (%s)" % (path, e))
    if not isinstance(d, dict) or not isinstance(d.get("entries"), list):
        raise ValueError("%s: no entries (keys: %s)" % (
            path, ", ".join(map(str, d)) if isinstance(d, dict) else type(d).__name__))
    return d


def _pg_ranks(d, pg, nranks):
    """The ranks of process group pg as the dump's pg_config has them, else every rank."""
    cfg = (d.get("pg_config") or {}).get(str(pg)) or {}
    r = cfg.get("ranks") if isinstance(cfg, dict) else None
    if isinstance(r, str):
        r = [int(x) for x in re.findall(r"\d+", r)]
    return sorted(r) if r else list(range(nranks))


def check_flight_recorder(want, lr, job):
    """expect.flight_recorder: the dumps in the run directory (PREFIX<rank>) name a collective
    that never completed (want["collective"] in its profiling name) and the ranks that never
    joined it: those with no dump, or none that reached its sequence number in its group (what
    PyTorch's fr_trace analyser calls missing ranks). (ok, detail)."""
    dumps, bad = {}, []
    for name in sorted(os.listdir(lr.run_dir)):
        m = re.fullmatch(re.escape(want["prefix"]) + r"(\d+)", name)
        if m:
            try:
                dumps[int(m.group(1))] = read_flight_recorder(os.path.join(lr.run_dir, name))
            except (OSError, ValueError) as e:
                bad.append(str(e))
    if not dumps:
        return False, "no flight recorder dump %s<rank> in %s%s" % (
            want["prefix"], lr.run_dir, "; " + "; ".join(bad) if bad else "")
    # the first collective some rank had not completed, per group: the one everyone waited on
    stuck = None
    for r, d in sorted(dumps.items()):
        for e in d["entries"]:
            if e.get("state") == "completed" or e.get("is_p2p"):
                continue
            pg = (e.get("process_group") or [e.get("pg_id")])[0]
            key = (e.get("collective_seq_id", 1 << 62), str(pg))
            if stuck is None or key < stuck[0]:
                stuck = (key, e.get("profiling_name", "?"), r)
    if stuck is None:
        return False, "%d dump(s) (ranks %s), but every collective in them completed" % (
            len(dumps), ", ".join(map(str, sorted(dumps))))
    (seq, pg), name, seen_by = stuck
    group = _pg_ranks(dumps[seen_by], pg, job["ranks"])
    missing = [g for g in group if g not in dumps or not any(
        e.get("collective_seq_id") == seq and str((e.get("process_group") or
                                                   [e.get("pg_id")])[0]) == pg
        for e in dumps[g]["entries"])]
    said = "%s (#%s of group %s) never completed; rank(s) %s never joined it; dumps from " \
           "rank(s) %s" % (name, seq, pg, ", ".join(map(str, missing)) or "none",
                           ", ".join(map(str, sorted(dumps))))
    why = ["unreadable: %s" % b for b in bad]  # a dump cut short is no evidence either way
    if want["collective"] not in name:
        why.append("expected %s" % want["collective"])
    if missing != sorted(want["missing"]):
        why.append("expected rank(s) %s missing" % ", ".join(map(str, want["missing"])))
    return not why, said + ("" if not why else ": " + "; ".join(why))


# expect: KEY -> its check of a finished job beyond the program's own results: (ok, detail)
EXPECT_CHECKS = {"flight_recorder": check_flight_recorder}


def _shown_rows(rows):
    """The rows the report prints: every one outside its bounds, and each collective's
    largest size (report.json has them all)."""
    largest = {}
    for r in rows:
        if r["bytes"] >= largest.get(r["coll"], -1):
            largest[r["coll"]] = r["bytes"]
    return [r for r in rows if r["verdict"] != "ok" or r["bytes"] == largest[r["coll"]]]


class RunResult:
    """A scenario run: .passed, .checks, .launch (LaunchResult), .report() text, .to_json()."""

    def __init__(self, scenario, fb, job, expect, lr, checks, skipped=None):
        self.scenario, self.fabric, self.job, self.expect = scenario, fb, job, expect
        self.launch, self.checks, self.skipped = lr, checks, skipped

    @property
    def passed(self):
        return self.skipped is None and all(c.ok for c in self.checks)

    @property
    def status(self):
        if self.skipped:
            return EXIT_CANNOT
        if self.launch is not None and self.launch.interrupted:
            return 128 + self.launch.interrupted
        return EXIT_PASS if self.passed else EXIT_FAIL

    def report(self):
        fb, job = self.fabric, self.job
        lines = ["simfabric run: %s: fabric %s '%s', program %s, %d rank(s) on %d node(s)" % (
            self.scenario, fb["kind"], fb.get("name"), job["program"], job["ranks"],
            len(job["nodes"]))]
        if self.skipped:
            lines.append("SKIP: %s" % self.skipped)
            return "\n".join(lines)
        lr = self.launch
        lines.append(lr.summary())
        for c in self.checks:
            lines.append("  %-4s %-8s %s" % ("ok" if c.ok else "FAIL", c.name, c.detail))
            if c.table:
                lines.append(sfmodel.format_rows(_shown_rows(c.table)))
        if lr.counters_note():
            lines.append(lr.counters_note())
        lines.append("%s  (%.1f s; logs in %s)" % ("PASS" if self.passed else "FAIL",
                                                   lr.seconds, lr.run_dir))
        return "\n".join(lines)

    def to_json(self):
        return {"scenario": self.scenario, "passed": self.passed, "status": self.status,
                "skipped": self.skipped, "job": self.job, "expect": self.expect,
                "checks": [c.to_json() for c in self.checks],
                "launch": self.launch.to_json() if self.launch else None}


def _ms(ns):
    return "%.6g ms" % (ns / 1e6)


def _fault_span(f, sp):
    """(when a fault's first window opens, when its last closes or None: no end), fabric time,
    from its list record f (origin_ns, until_ns) and its dump sp (start, duration, period)."""
    opened = int(f.get("origin_ns", -1)) + int(sp.get("start_ns") or 0)
    closed = None
    if sp.get("duration_ns") is not None and sp.get("count"):
        closed = opened + int(sp.get("period_ns") or 0) * (sp["count"] - 1) + sp["duration_ns"]
    until = int(f.get("until_ns", -1))
    if until >= 0 and (closed is None or until < closed):
        closed = until
    return opened, closed


def missed_faults(faults, specs, job_start_ns=None):
    """The faults (op=fault verb=list's records, with the dump's specs by id) whose windows all
    passed without touching a message (hit, delayed and failed all 0): [(name, line)], a line
    as the daemon's warning says it. A fault still armed, waiting or on is not judged."""
    by_id = {s.get("id"): s for s in specs or []}
    out = []
    for f in faults or []:
        if any(int(f.get(k) or 0) for k in ("hit", "delayed", "failed")):
            continue
        if f.get("state") not in ("over", None) or not int(f.get("windows") or 0):
            continue
        sp = by_id.get(f.get("id"), {})
        opened, closed = _fault_span(f, sp)
        when = "opened at %s%s" % (_ms(opened), " and closed at %s" % _ms(closed)
                                   if closed is not None else "")
        if sp.get("clock") == "fabric_start":
            why = (", before the job started at %s: it hit nothing (`at:` counts from the "
                   "daemon's start; `after: {first_traffic: LINK}` counts from the first "
                   "message on LINK)" % _ms(job_start_ns)
                   if job_start_ns is not None and closed is not None and closed <= job_start_ns
                   else ": it hit nothing (`at:` counts from the daemon's start, not the "
                   "job's; `after: {first_traffic: LINK}` counts from the first message on "
                   "LINK)")
        else:
            why = ": it hit nothing"
        out.append((f.get("name"), "fault #%s '%s' %s (fabric time)%s" % (
            f.get("id"), f.get("name"), when, why)))
    return out


def _trigger_text(sp, links):
    """A fault's trigger as the scenario says it: "first_traffic on link 0 (node0/0 -> sw0)"."""
    t = sp.get("trigger") or {}
    kind = t.get("kind", "?")
    what = {"messages": "%s messages" % t.get("threshold"),
            "bytes": "%s bytes" % t.get("threshold")}.get(kind, kind)
    if t.get("link") is not None:
        ln = {l.get("id"): l for l in links or []}.get(t["link"], {})
        where = "link %s%s" % (t["link"], " (%s -> %s)" % (ln["from"], ln["to"])
                                if ln.get("from") else "")
    elif t.get("conn"):
        c = t["conn"]
        where = "the connection %s -> %s" % (c.get("from"), c.get("to")) \
            if isinstance(c, dict) else "connection %s" % c
    else:
        where = "the fabric"
    return "%s on %s" % (what, where)


def unfinished_faults(faults, fb, job_start_ns=None, job_end_ns=None, run_dir="RUN_DIR"):
    """At a job's end, the faults missed_faults does not judge: ([(name, line)] that hit
    nothing: a trigger that never fired, a window that opens after the job, or one still open
    or between windows having touched no message), [lines] of faults still on at the end that
    did hit something (a note, not a failure: `for:` longer than the job, or forever)."""
    by_id = {s.get("id"): s for s in (fb or {}).get("faults") or []}
    links = (fb or {}).get("links")
    bad, notes = [], []
    end = " at the job's end (%s, fabric time)" % _ms(job_end_ns) if job_end_ns is not None \
        else " at the job's end"
    for f in faults or []:
        state, sp = f.get("state"), by_id.get(f.get("id"), {})
        if state in ("over", None):
            continue  # missed_faults' (an over fault that hit nothing)
        head = "fault #%s '%s'" % (f.get("id"), f.get("name"))
        hit = any(int(f.get(k) or 0) for k in ("hit", "delayed", "failed"))
        origin = int(f.get("origin_ns", -1))
        if state == "armed" or origin < 0:
            bad.append((f.get("name"), "%s never started: its trigger, %s, did not fire during "
                        "the job, so it hit nothing (the job's traffic per link: `simfabric "
                        "report %s`)" % (head, _trigger_text(sp, links), run_dir)))
        elif hit and state == "on":
            opened, closed = _fault_span(f, sp)
            notes.append("%s (%s) was still on%s: opened at %s, %s" % (
                head, f.get("action"), end, _ms(opened), "no end" if closed is None
                else "to close at %s" % _ms(closed)))
        elif not hit and not int(f.get("windows") or 0):
            opens = _fault_span(f, sp)[0]
            after = (", after the job ended at %s" % _ms(job_end_ns)
                     if job_end_ns is not None and opens >= job_end_ns else "")
            clock = (" (`at:` counts from the daemon's start, not the job's)"
                     if sp.get("clock") == "fabric_start" else "")
            bad.append((f.get("name"), "%s opens at %s (fabric time)%s: the job never met it, "
                        "so it hit nothing%s" % (head, _ms(opens), after, clock)))
        elif not hit:
            bad.append((f.get("name"), "%s was %s%s after %s window(s) and hit nothing" % (
                head, "still on" if state == "on" else "between windows", end,
                f.get("windows"))))
    return bad, notes


def check_faults(expect, lr, fb):
    """The faults check of a run whose fabric has faults: every fault hit something, but for
    those expect: faults: may_miss names (or all). A fault whose trigger never fired, or whose
    window the job never reached, hit nothing too; one still on at the job's end is named in
    the detail. None when there are no faults."""
    fl = lr.faults or {}
    if not fl.get("faults"):
        return None
    may = ((expect or {}).get("faults") or {}).get("may_miss") or []
    job_start = job_end = None
    if fl.get("epoch_ns") is not None and lr.t_start is not None:
        job_start = int(round(lr.t_start * 1e9)) - fl["epoch_ns"]
        ran = max([p.t_exit for p in lr.procs if p.t_exit is not None] or [0.0])
        job_end = job_start + int(round(ran * 1e9))
    missed = missed_faults(fl["faults"], (fb or {}).get("faults"), job_start)
    unfired, still_on = unfinished_faults(fl["faults"], fb, job_start, job_end, lr.run_dir)
    missed += unfired
    bad = [ln for name, ln in missed if may != "all" and name not in may]
    allowed = len(missed) - len(bad)
    n = len(fl["faults"])
    if bad:
        return Check("faults", False, "; ".join(bad) + (
            " (expect: faults: {may_miss: [name]} allows it)" if len(bad) == 1 else
            " (expect: faults: {may_miss: [names]} allows them)"))
    hits = sum(int(f.get("hit") or 0) for f in fl["faults"])
    return Check("faults", True, "%d fault(s), %d message(s) hit%s%s" % (
        n, hits, "; %d hit nothing, as may_miss allows" % allowed if allowed else "",
        "".join("; " + ln for ln in still_on)))


def evaluate(job, expect, lr, fb):
    """The checks of a finished job against expect:."""
    rundir = lr.run_dir
    checks = []
    data = expect.get("data", "exact")
    failure = expect.get("failure")
    timing = expect.get("timing")
    prog = job["program"]
    res, raw, fails, status, why = collect_results(job, lr, rundir)
    expect_fail = failure is not None or data == "wrong"
    bad = [p for p in lr.procs if p.rc != 0 and not p.killed]
    if lr.timed_out:
        hang = (failure or {}).get("hang_s")
        checks.append(Check("ranks", failure is not None and (
            failure.get("error") == "timeout" or hang is not None),
            "the job ran past %s%s" % (
                "the expected hang's %g s" % hang if hang is not None else
                "its timeout (%d s)" % job["timeout_s"], "; stacks in %s" % lr.stacks
                if lr.stacks else "")))
    elif not expect_fail:
        checks.append(Check("ranks", not bad and all(p.rc == 0 for p in lr.procs),
                            "every rank exited 0" if not bad else
                            "; ".join("%s (%s) %s after %.1f s" % (p.label, p.node, p.outcome(),
                                                                  p.t_exit or 0) for p in bad)))
    # data
    if data == "wrong":
        wrong = [r for r in res if r.get("wrong") or r.get("ok") is False]
        seen = bool(wrong) or status == "data_error" or any(
            "differs" in t for t in fails.values()) or (prog == "harness" and any(
                "differs" in p.log_text(1 << 20) for p in lr.procs))
        checks.append(Check("data", seen, "wrong data was expected and %s" % (
            "seen: %d result(s) wrong" % len(wrong) if wrong else "reported" if seen
            else "not reported")))
    elif data == "exact" and not failure:
        wrong = [r for r in res if r.get("wrong") or r.get("ok") is False]
        if prog == "harness":
            ok = status == "ok" and not fails
            detail = ("every test passed" if ok else "harness: %s" % (
                "; ".join("rank %s: %s" % kv for kv in sorted(fails.items())) or why or status))
        elif prog == "command" and raw is None:
            ok, detail = True, "not checked (the command wrote no results; its exit status is " \
                               "its check)"
        else:
            ok = raw is not None and not wrong and status in ("ok", None) and not (
                prog == "nccl" and status != "ok")
            err = raw.get("error") if isinstance(raw, dict) else None
            detail = why if raw is None else (
                "%d result(s), every one exact" % len(res) if ok else
                "%d of %d result(s) wrong" % (len(wrong), len(res)) if wrong else
                "the program reported %s%s" % (status, ": %s on rank %s after %s ms: %s" % (
                    err.get("code"), err.get("rank"), err.get("after_ms"),
                    err.get("message")) if isinstance(err, dict) else ""))
        checks.append(Check("data", ok, detail))
    # timing
    if timing and (bad or lr.timed_out):
        checks.append(Check("timing", False, "not checked: the job failed"))
    elif timing:
        if not res:
            checks.append(Check("timing", False, "no measurements to hold to the model (%s)" % (
                why or "the program reported none")))
        else:
            ok, rows, notes = sfmodel.check(res, fb, job["nodes"], job["ranks"], timing)
            checks.append(Check("timing", ok, "%s model, busbw %s from %d B, %s below; "
                                "%s%s" % (
                                    timing.get("model", "best"), _bounds(*timing["busbw"]),
                                    timing["min_bytes"], _bounds(*timing["latency"]),
                                    "; ".join(notes),
                                    "" if ok else ": %d of %d outside" % (
                                        sum(r["verdict"] != "ok" for r in rows), len(rows))),
                                rows))
    if failure is not None:
        ok, detail = check_failure(failure, job, lr, raw or {}, fails, status)
        checks.append(Check("failure", ok, detail))
    for key, fn in EXPECT_CHECKS.items():
        if expect.get(key):
            ok, detail = fn(expect[key], lr, job)
            checks.append(Check(key, ok, detail))
    fc = check_faults(expect, lr, fb)
    if fc:
        checks.append(fc)
    # the fabric itself: nothing delivered before the model's time
    if lr.stats:
        st = lr.stats.values()
        early = sum(l.get("early", 0) for l in st)
        n = sum(l.get("late_n", 0) for l in st)
        late = (", deliveries %.1f us late on average (at most %.1f us): the fidelity monitor" % (
            sum(l.get("late_sum_ns", 0) for l in st) / n / 1e3,
            max(l.get("late_max_ns", 0) for l in st) / 1e3)) if n else ""
        checks.append(Check("fabric", early == 0, "%d early deliveries over %d link(s)%s%s" % (
            early, len(lr.stats), " (the model was beaten: a bug)" if early else "", late)))
    return checks


def run_scenario(path, run_dir=None, echo=True, progress=None, handle_signals=False,
                 paths=None, grace=5.0, seed=None, out=None, timeout=None, daemon_args=(),
                 local_hosts=1):
    """Run a scenario's job and check it against its expect:; see the module's text.
    daemon_args: more simfabricd options (--sample-ms). local_hosts: the job's nodes on that
    many emulated hosts (Job's; the harness then runs one process per rank, --launched)."""
    paths = paths or Paths()
    fb = dump_scenario(path, paths, seed)
    job, expect = fb.get("job"), fb.get("expect") or {"data": "exact"}
    if not job:
        raise LaunchError("%s has no job: section (nothing to run)" % path, EXIT_USAGE)
    name = os.path.basename(path).rsplit(".", 1)[0]
    skip = can_run(job, paths)
    if skip:
        return RunResult(path, fb, job, expect, None, [], skipped=skip)
    failure = expect.get("failure")
    if failure is not None:
        fail_grace = max(grace, (failure.get("within_s") or 30) + 2)
    elif expect.get("data") == "wrong":
        fail_grace = max(grace, 30)
    else:
        fail_grace = grace
    if job["program"] == "nccl":
        # the job program ends every rank itself within its final-report grace and abort bound
        # (tools/nccljob/nccljob.h: NJ_FINAL_GRACE_S + NJ_ABORT_BOUND_S = 35 s)
        fail_grace = max(fail_grace, 40)
    if (failure or {}).get("survivors"):
        fail_grace = job["timeout_s"]  # the survivors carry on: the job's bound is theirs
    why = local_hosts_refusal(local_hosts, len(job["nodes"]), path, None, False)
    if not why and local_hosts > 1 and job["program"] == "harness" and \
            job["tests"] != "all" and "bench" in job["tests"]:
        why = ("--local-hosts with the harness's bench test: it needs the ranks forked by one "
               "harness (a shared page), not one process per rank")
    if why:
        raise LaunchError(why, EXIT_USAGE)
    jb = Job(paths, run_dir, name, path, None, ["-v"] + (["--seed", str(seed)] if seed is not
                                                       None else []) + list(daemon_args),
             local_hosts=local_hosts)
    t0 = time.monotonic()
    lr = None
    try:
        jb.up()
        job = dict(job, _data=expect.get("data", "exact"))
        python = python_with("torch") if job["program"] == "torch" else None
        argv = program_argv(job, paths, jb.run_dir, python)
        with open(os.path.join(jb.run_dir, "job.json"), "w") as f:
            json.dump({"scenario": path, "job": job, "expect": expect, "argv": argv}, f,
                      indent=1)
        env = dict(job.get("env") or {})
        env["SIMFABRIC_RESULT"] = os.path.join(jb.run_dir, "result.json")
        if job["program"] == "harness" and local_hosts > 1:
            # one process per rank, each on its node's host (the harness's --launched mode)
            i = argv.index("--nranks")
            argv = argv[:i] + ["--launched"] + argv[i + 2:]
            procs = jb.ranks(argv, len(job["nodes"]), 1, env, job["nodes"])
        elif job["program"] == "harness":
            e = dict(os.environ, SIMFABRIC_SOCKET=jb.socket, SIMFABRIC_RUN_DIR=jb.run_dir,
                     **env)
            procs = [Proc("harness", 0, None, argv, e, os.path.join(jb.run_dir, "harness.log"))]
        else:
            procs = jb.ranks(argv, len(job["nodes"]), job["gpus_per_node"], env, job["nodes"])
        hang = (failure or {}).get("hang_s")
        L = Launcher(jb.run_dir, echo=echo, out=out, progress=progress, grace=grace,
                     fail_grace=fail_grace, timeout=hang or timeout or job["timeout_s"],
                     handle_signals=handle_signals, hang=hang is not None)
        timed_out, interrupted, stacks = L.run(procs, jb.socket)
        lr = LaunchResult(jb.run_dir, procs, fb, time.monotonic() - t0, timed_out, interrupted,
                          jb.notes + L.notes, stacks)
        lr.t_start = L.t_start
        jb.collect(lr)
    finally:
        rc = jb.down()
    write_counters(lr, fb)
    if lr.interrupted:
        checks = [Check("ranks", False, "interrupted by %s: torn down" % _signame(
            lr.interrupted))]
    else:
        checks = evaluate(job, expect, lr, fb)
    if rc not in (0, None):
        checks.append(Check("daemon", False, "simfabricd exited with status %s (see %s)" % (
            rc, os.path.join(jb.run_dir, "simfabricd.log"))))
    r = RunResult(path, fb, job, expect, lr, checks)
    with open(os.path.join(jb.run_dir, "report.json"), "w") as f:
        json.dump(r.to_json(), f, indent=1)
    with open(os.path.join(jb.run_dir, "report.txt"), "w") as f:
        f.write(r.report() + "\n")
    return r


def _bounds(lo, hi):
    """A timing range as the check names it: a lower bound of 0 says it is a ceiling only."""
    return ("at most %g x model (a ceiling only)" % hi if lo == 0 else
            "within [%g, %g] x model" % (lo, hi))
