# SPDX-License-Identifier: MIT
"""sf.daemon - one simfabricd process of our own: the one Daemon that `simfabric up`, the
launcher, the pytest plugin's fabrics, the benches and the soak start, wait for and stop.

    d = Daemon(paths.daemon, socket, log_path, args=["--scenario", f]).start()
    ... sf.ctl.show(d.socket) ...
    d.stop()

start() raises sf.ctl.CtlError when the daemon does not answer in time (it exited, or never
listened); each caller words that its own way (the log is at d.log_path, d.log() its tail).
"""
import os
import shutil
import signal
import subprocess
import tempfile

from . import ctl

SOCKET_MAX = 100  # sun_path is 108 bytes


try:
    import ctypes
    _LIBC = ctypes.CDLL(None)
except (ImportError, OSError):
    _LIBC = None


def _pdeathsig():
    """In the child: die with the launcher (SIGTERM if it goes away without tearing down)."""
    if _LIBC is not None:
        _LIBC.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


def private_socket(rundir):
    """A socket path for a daemon of rundir: rundir/ctl.sock, or rundir/fabric/ctl.sock when
    rundir is not private (the daemon wants its socket's directory 0700 and ours), or one under
    a fresh /tmp/sf-* when that path is too long for a socket (stop() removes that directory)."""
    st = os.stat(rundir)
    sockdir = rundir
    if st.st_uid != os.getuid() or st.st_mode & 0o077:  # the daemon wants it private
        sockdir = os.path.join(rundir, "fabric")
        os.makedirs(sockdir, mode=0o700, exist_ok=True)
        os.chmod(sockdir, 0o700)
    sock = os.path.join(sockdir, "ctl.sock")
    if len(sock) > SOCKET_MAX:
        sock = os.path.join(tempfile.mkdtemp(prefix="sf-"), "ctl.sock")
    return sock


class Daemon:
    """simfabricd at program on socket, its output appended to log_path. args: more options
    (--scenario F, -v, ...). session: in a session of its own (a Ctrl-C at the terminal is not
    its); tied: it dies with this process (PR_SET_PDEATHSIG); neither for `simfabric up`, whose
    daemon outlives it (detached: session=True, tied=False)."""

    def __init__(self, program, socket, log_path, args=(), session=False, tied=False):
        self.program, self.socket, self.log_path = program, socket, log_path
        self.argv = [program, "--socket", socket] + list(args)
        self.session, self.tied = session, tied
        self.proc = None
        self.hung = False
        self._log = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self, wait=True, timeout=15):
        """Start it; with wait, until it answers a ping (sf.ctl.CtlError if it does not)."""
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=self.session,
                                     preexec_fn=_pdeathsig if self.tied else None)
        if wait:
            ctl.wait_ready(self.socket, timeout=timeout, proc=self.proc)
        return self

    def detach(self):
        """Leave it running (simfabric up): close our copy of its log."""
        if self._log:
            self._log.close()
            self._log = None

    def env_vars(self):
        return {"SIMFABRIC_SOCKET": self.socket}

    def show(self):
        return ctl.show(self.socket)

    def request(self, op, **kv):
        return ctl.request(self.socket, op, **kv)

    def log(self, n=12000):
        """The log's last n characters (a note where there is none)."""
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except OSError:
            return "(no log at %s)" % self.log_path
        text = data.decode("utf-8", "replace")
        return text if len(text) <= n else "...\n" + text[-n:]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        """sig (SIGTERM), then SIGKILL after timeout (self.hung says so); its exit status (None
        if it never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.hung = True
                self.proc.kill()
                self.proc.wait()
        self.detach()
        d = os.path.dirname(self.socket)
        if os.path.basename(d).startswith("sf-") and os.path.dirname(d) == tempfile.gettempdir():
            shutil.rmtree(d, ignore_errors=True)
        return self.proc.returncode
