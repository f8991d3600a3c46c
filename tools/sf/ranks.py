# SPDX-License-Identifier: MIT
"""sf.ranks - what each rank of a launch gets: its GPU (gpu_map, from the GPUs nvidia-smi lists),
whether ranks sharing a GPU need MPS (mps_plan; Mps runs a private control daemon), the
environment that makes NCCL use simfabric (rank_env, FIXED_NCCL_ENV), the copy threads it can
have (copy_threads), and for an MPI program (simfabric launch --mpi) the mpirun argv and the
wrapper that gives each MPI rank the same (MPI_WRAPPER, mpi_env, mpi_argv).

Standard library only; it starts nothing but nvidia-smi and, for Mps, nvidia-cuda-mps-control.
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

from .paths import EXIT_USAGE, LaunchError

TIME_SLICED = ("ranks sharing a GPU without MPS are time-sliced: a small allreduce takes about "
               "18 ms instead of 30 us")

# ---- what a rank needs on this machine --------------------------------------------------------

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


# ---- each rank's environment ---------------------------------------------------------------

# NCCL_NET_GDR_LEVEL=SYS: a virtual NIC has no PCI path, so NCCL puts it under the CPU and keeps
# GPUDirect off below SYS; the GPU data path (plugin/gpu.h) is an emulated RDMA NIC next to its GPU.
# NCCL_NET_PLUGIN_REF_COUNT=1: NCCL 2.28 unloads a net plugin with its last communicator and
# wipes the plugin's name as it does (src/plugin/net.cc, ncclNetPluginUnload's memset; 2.30 keeps
# it), so a process that aborts its only communicator and makes a new one (the lose-a-node
# recipes) gets "Failed to initialize any NET plugin"; a reference held from the start keeps it.
FIXED_NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                  "NVSHMEM_DISABLE_NVLS": "1", "NCCL_MNNVL_ENABLE": "0",
                  "NCCL_NET_GDR_LEVEL": "SYS", "NCCL_NET_PLUGIN_REF_COUNT": "1"}


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

# What each host of an MPI program across hosts sets for its own ranks (their count there: MPS,
# copy threads, the GPU's queues): one word per host in SIMFABRIC_MPI_HOST_<name>, "-" for none.
MPI_HOST_VARS = ("CUDA_MPS_PIPE_DIRECTORY", "SIMFABRIC_COPY_THREADS", "CUDA_DEVICE_MAX_CONNECTIONS")

# Run by sh in each MPI rank: its rank from the MPI launcher (Open MPI, PMIx, MPICH), then the
# variables of that rank (as rank_env gives a launched rank) and exec the program. The node names
# and each rank's GPU come in SIMFABRIC_MPI_NODES and SIMFABRIC_MPI_GPUS (words), the ranks per
# node in SIMFABRIC_MPI_GPN. Over several hosts: each node's host in SIMFABRIC_MPI_HOSTS and, per
# host, its daemon's socket in SIMFABRIC_MPI_SOCKETS, across real hosts its name in
# SIMFABRIC_MPI_NAMES (the rank must run there: mpirun placed it) and the MPI_HOST_VARS (a
# host's "-" leaves the rank's own value, unless it is host 0's, which is then not this host's).
# set -f: the lists' words are never globs.
MPI_WRAPPER = r"""set -f
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}
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
i=0 want=
for x in ${SIMFABRIC_MPI_NAMES:-}; do [ $i = "$h" ] && want=$x; i=$((i + 1)); done
if [ -n "$want" ] && [ "$want" != "$(uname -n)" ] || [ ! -S "$SIMFABRIC_SOCKET" ]; then
echo "simfabric: MPI rank $r (node $node) is host $h's (${want:-this machine}, daemon's socket \
$SIMFABRIC_SOCKET), but mpirun started it on $(uname -n)$([ -S "$SIMFABRIC_SOCKET" ] || \
echo ", which has no such socket")" >&2; exit 127; fi
for v in @HOST_VARS@; do
eval "l=\${SIMFABRIC_MPI_HOST_$v:-}"
[ -n "$l" ] || continue
i=0 w= w0=
for x in $l; do [ $i = 0 ] && w0=$x; [ $i = "$h" ] && w=$x; i=$((i + 1)); done
if [ "$w" != - ]; then export "$v=$w"
elif [ "$w0" != - ] && eval "[ \"\${$v:-}\" = \"\$w0\" ]"; then unset "$v"; fi
done
export SIMFABRIC_HOST=$h
fi
set +f
exec "$@"
""".replace("@HOST_VARS@", " ".join(MPI_HOST_VARS))
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


def mpi_env(names, gpus_per_node, gpus, hosts=None, sockets=None, host_names=None,
            host_vars=None):
    """What MPI_WRAPPER reads: the node names, ranks per node, each rank's one GPU (its own
    device 0: nccl-tests, which counts local ranks per host name, would otherwise pick device
    RANK; NCCL_TESTS_DEVICE=0 tells it so); with --local-hosts or --hosts-from-env, each node's
    host and each host's daemon's socket (a rank gets its node's host's: SIMFABRIC_HOST,
    SIMFABRIC_SOCKET); across real hosts, each host's name (host_names, where they differ) and
    its MPI_HOST_VARS (host_vars: name -> a value or None per host)."""
    nranks = len(names) * gpus_per_node
    out = {"SIMFABRIC_MPI_NODES": " ".join(names), "SIMFABRIC_MPI_GPN": str(gpus_per_node),
           "SIMFABRIC_MPI_GPUS": " ".join(gpus[r % len(gpus)] for r in range(nranks))
           if gpus else ""}
    if hosts:
        words = list(sockets) + list(host_names or []) + [
            v for vals in (host_vars or {}).values() for v in vals if v is not None]
        bad = [w for w in words if not w or any(c.isspace() for c in w)]
        if bad:
            raise LaunchError("--mpi across hosts: %r has a space, which the MPI wrapper's "
                              "lists cannot carry (use another --run-dir)" % bad[0], EXIT_USAGE)
        out.update(SIMFABRIC_MPI_HOSTS=" ".join(map(str, hosts)),
                   SIMFABRIC_MPI_SOCKETS=" ".join(sockets))
        if host_names:
            out["SIMFABRIC_MPI_NAMES"] = " ".join(host_names)
        for k, vals in (host_vars or {}).items():
            out["SIMFABRIC_MPI_HOST_" + k] = " ".join(v if v is not None else "-" for v in vals)
    return out


def mpi_host_arg(names, counts):
    """Open MPI's --host for ranks in blocks, host by host (counts[h] on host h, named
    names[h]; a host without ranks left out): mpirun fills each host's slots in turn, so rank
    r lands on its node's host. None where every host has one name (hosts emulated on one
    machine: all ranks are local)."""
    if len(set(names)) == 1:
        return None
    return ",".join("%s:%d" % (n, c) for n, c in zip(names, counts) if c)


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
