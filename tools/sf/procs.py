# SPDX-License-Identifier: MIT
"""sf.procs - the processes of a launch: a free port, a process's tree, where each process
was (stack_dump through gdb or faulthandler, dump_stacks into one file), and Proc: one rank's
process group, its output prefixed and kept, ended by signal.

Standard library only.
"""
import os
import shutil
import signal
import socket
import subprocess


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
        t = _read(self.log_path, max(limit, 1 << 24))
        return t if len(t) <= limit else "...\n" + t[-limit:]

    def summary(self, limit=16000):
        """What another host's agent tells host 0 of this rank at the end of a run over several
        hosts (RemoteProc takes it): its outcome, exit time and the tail of its log."""
        return {"label": self.label, "rank": self.rank, "node": self.node, "rc": self.rc,
                "t_exit": self.t_exit, "killed": self.killed, "log": self.log_text(limit),
                "stdout_tail": bytes(self.stdout_tail[-limit:]).decode("utf-8", "replace")}


class RemoteProc(Proc):
    """A rank another host's agent ran (`simfabric run --hosts-from-env`), as it told host 0
    (Proc.summary); host 0's checks read it as they read their own ranks. Its exit time counts
    from that host's start of its ranks, which the rendezvous keeps within a second of host
    0's."""

    def __init__(self, d, host):
        super().__init__(d["label"], d["rank"], d["node"], [], {}, None)
        self.host, self.rc, self.t_exit, self.killed = host, d["rc"], d["t_exit"], d["killed"]
        self.text = d["log"]
        self.stdout_tail = bytearray(d["stdout_tail"].encode())

    def log_text(self, limit=16000):
        t = self.text
        return t if len(t) <= limit else "...\n" + t[-limit:]

    def to_json(self):
        return dict(super().to_json(), host=self.host, log="host %d's run directory" % self.host)

    def summary(self, limit=16000):
        raise TypeError("a remote rank's summary is its host's to give")


def check_summary(d):
    """A rank's summary from another host (Proc.summary's form), or ValueError naming what does
    not fit."""
    if not isinstance(d, dict):
        raise ValueError("a rank's summary is not an object")
    for k, kinds in (("label", (str,)), ("rank", (int,)), ("node", (str, type(None))),
                     ("rc", (int, type(None))), ("t_exit", (int, float, type(None))),
                     ("killed", (int, type(None))), ("log", (str,)), ("stdout_tail", (str,))):
        if not isinstance(d.get(k), kinds) or isinstance(d.get(k), bool):
            raise ValueError("a rank's summary: '%s' is %.40r" % (k, d.get(k)))
    if not 0 <= d["rank"] < 1 << 20:
        raise ValueError("a rank's summary: rank %d" % d["rank"])
    return d
