# SPDX-License-Identifier: MIT
"""sf.runner - the Launcher: runs a launch's processes (sf.procs.Proc) to their end: their
output echoed and logged, a failing rank's peers given their grace, the timeout (every rank's
stack dumped first), signals, tearing down by process group; and, for another host of an MPI
program across hosts, standing by until host 0's mpirun ends (stand_by).
"""
import os
import selectors
import signal
import subprocess
import sys
import time

from . import ctl as sfctl
from .daemon import _pdeathsig
from .paths import TOOLS as HERE
from .paths import LaunchError
from .procs import _killpg, _signame, dump_stacks

PYHOOK = os.path.join(HERE, "sfpyhook")  # sitecustomize: faulthandler on SIGUSR1 for Python ranks
# another host of --mpi across hosts: host 0's word that its mpirun ended may come this long
# after the job's timeout and grace
STAND_BY_MARGIN_S = 60


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

    def _catch_signals(self):
        """With handle_signals: SIGINT and SIGTERM to _on_signal; the handlers they had."""
        return {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)} \
            if self.handle_signals else {}

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
        old = self._catch_signals()
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
            for s, h in old.items():  # as they were before _catch_signals
                signal.signal(s, h)
        return timed_out, self._signal, stacks

    def stand_by(self, ended, started, start_within):
        """Another host of `launch --hosts-from-env --mpi`, whose ranks host 0's mpirun starts:
        keeps this host's daemon up until ended() gives host 0's word ((status, why): why when
        there is none), a signal (with handle_signals) or a timeout: started() (host 0 says
        mpirun is starting) within start_within seconds, then the job's timeout, its grace and
        STAND_BY_MARGIN_S for the word. Returns run()'s triple and the word."""
        old = self._catch_signals()
        self.t_start = time.monotonic()
        deadline, began = self.t_start + start_within, False
        try:
            while True:
                word = ended()
                if word is not None:
                    return (False, None, None), word
                if self._signal:
                    self.say("interrupted (%s): this host's daemon stops; host 0's mpirun "
                             "may still run this host's ranks" % _signame(self._signal))
                    return (False, self._signal, None), None
                now = time.monotonic()
                if not began and started():
                    began = True
                    deadline = now + self.timeout + self.grace + STAND_BY_MARGIN_S \
                        if self.timeout else None
                if deadline and now >= deadline:
                    self.say("timeout: host 0's agent did not say %s within %.0f s" % (
                        "that its mpirun ended" if began else "that its mpirun started",
                        deadline - self.t_start))
                    return (True, None, None), None
                time.sleep(0.05)
        finally:
            for s, h in old.items():  # as they were before _catch_signals
                signal.signal(s, h)

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
