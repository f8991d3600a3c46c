# SPDX-License-Identifier: MIT
"""sf.recipe - a scenario's job: and expect: (`simfabric run`, docs/usage.md): the job read from
the fabric dump (`simfabricd --dump-fabric`: never from the YAML), launched by sf.launch, its
results checked against expect: (exact data, timing against the model in sf.model, an expected
failure or hang, the flight recorder's dump, the faults' windows), with a report.

    run_scenario(path, ...) -> RunResult

Standard library only.
"""
import io
import json
import os
import pickle
import re
import shutil
import signal
import sys
import time

from . import model as sfmodel
from .launch import (FEDERATE_TIMEOUT_S, Job, LaunchResult, dump_scenario,
                     hosts_from_env, local_hosts_refusal, write_counters)
from .federate import COUNTERS_WAIT_S
from .runner import Launcher
from .paths import (EXIT_CANNOT, EXIT_FAIL, EXIT_PASS, EXIT_USAGE, ROOT, LaunchError, Paths)
from .paths import TOOLS as HERE
from .procs import Proc, _read, _signame
from .ranks import gpu_ids, python_with

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


HANG_SKEW_S = 1.0


def check_hang(f, lr):
    """expect.failure.hang_s: no rank ended on its own before it; the launcher ended the job
    then (a timed-out launch of that length), with every rank's stack. A rank of another host
    (`--hosts-from-env`) that ended within HANG_SKEW_S of the hang's end (on the run's clock)
    ended with the job: host 0 tears its ranks down then, and a peer of theirs may end by itself
    before its own host's launcher does. (ok, detail)."""
    early = [p for p in lr.procs if p.rc is not None and not p.killed and not (
        getattr(p, "host", None) is not None and p.t_exit is not None and
        p.t_exit >= f["hang_s"] - HANG_SKEW_S)]
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
                               p.log_text(1 << 20), "hung": bool(p.killed),
                               "pid": getattr(p, "pid", None)}
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
            if w["rc"] != -want and f["signal"] == "SIGKILL" and (w["rc"] or 0) < 0 and \
                    mps_let_run(lr.run_dir, w.get("pid")):
                w["note"] = ("rank %d died of %s, not SIGKILL: the node_kill stopped it, MPS "
                             "did not end its work while it was stopped, and once let run it "
                             "died of MPS's ending it first (sim/mpskill.h)" % (
                                 r, _signame(-w["rc"])))
            elif w["rc"] != -want:
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
    def verdict(r):
        if verdicts[r]:
            return "; ".join(verdicts[r])
        return "as expected" + ("; " + who[r]["note"] if who[r].get("note") else "")
    desc = ", ".join("rank %d (%s)" % (r, verdict(r)) for r in want if r in verdicts) or \
        "no rank failed on its own"
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


MPS_LET_RUN = re.compile(r"mps: pid (\d+): MPS has not ended its work with the client stopped")


def mps_let_run(run_dir, pid):
    """Did the daemon let pid run again during its node_kill, for MPS to end its GPU work
    (sim/mpskill.c, in the daemon's log)? Its death by another signal is then the kill's."""
    log = _read(os.path.join(run_dir, "simfabricd.log"), 1 << 28) if pid and run_dir else ""
    return any(int(m.group(1)) == pid for m in MPS_LET_RUN.finditer(log or ""))


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
    what += "".join("; %s" % who[r]["note"] for r in lost if r in who and who[r].get("note"))
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

    def __init__(self, scenario, fb, job, expect, lr, checks, skipped=None, verdict=None):
        """verdict: another host's run across hosts: host 0's exit status, this one's."""
        self.scenario, self.fabric, self.job, self.expect = scenario, fb, job, expect
        self.launch, self.checks, self.skipped, self.verdict = lr, checks, skipped, verdict

    @property
    def passed(self):
        return self.skipped is None and all(c.ok for c in self.checks)

    @property
    def status(self):
        if self.skipped:
            return EXIT_CANNOT
        if self.verdict is not None:
            return self.verdict
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


def shared_files(job, expect):
    """What host 0 needs of another host's run directory to check a run over several hosts:
    (file names, name prefixes): the program's results (rank 0's may be on any host) and the
    flight recorder's dumps."""
    fr = expect.get("flight_recorder") or {}
    return ({"harness.json", "nccljob.json", "result.json"},
            [fr["prefix"]] if fr.get("prefix") else [])


def host_checks(nranks, lr, daemon_rc):
    """Host 0 of `simfabric run --hosts-from-env`, on top of the expect: checks: every host said
    how its ranks ended (lr.missing_hosts: none within the counters' wait), every rank was
    reported once, and no host's daemon failed or agent was interrupted."""
    checks, bad = [], []
    if lr.missing_hosts:
        bad.append("host(s) %s sent no report of their ranks within %d s: their ranks are not "
                   "checked" % (", ".join(map(str, lr.missing_hosts)), COUNTERS_WAIT_S))
    seen = [p.rank for p in lr.procs]
    twice = sorted({r for r in seen if seen.count(r) > 1})
    none = sorted(set(range(nranks)) - set(seen))
    if twice:
        bad.append("rank(s) %s reported by more than one host" % ", ".join(map(str, twice)))
    if none and not lr.missing_hosts:
        bad.append("rank(s) %s reported by no host" % ", ".join(map(str, none)))
    for h, got in sorted(lr.remote.items()):
        if got.get("interrupted"):
            bad.append("host %d's agent was interrupted by %s" % (h, _signame(
                got["interrupted"])))
        if got.get("daemon_rc") not in (0, None):
            bad.append("host %d's simfabricd exited with status %s (its run directory has its "
                       "log)" % (h, got["daemon_rc"]))
    if daemon_rc not in (0, None):
        bad.append("simfabricd exited with status %s (see %s)" % (
            daemon_rc, os.path.join(lr.run_dir, "simfabricd.log")))
    checks.append(Check("hosts", not bad, "; ".join(bad) or "%d host(s) reported their ranks" % (
        len(lr.remote) + 1)))
    return checks


def verdict_wait_s(job, fail_grace):
    """How long another host's agent waits for host 0's verdict after its own ranks ended: host
    0's may run the job's whole time and its grace longer, then wait for the counters."""
    return job["timeout_s"] + fail_grace + COUNTERS_WAIT_S + 60


def _verdict_of(jb, r, wait_s):
    """--hosts-from-env: host 0 sends its checks' outcome to every other host's agent; another
    host's agent waits for it (wait_s) and takes it as its own, status and all (RunResult's
    verdict): (checks, status)."""
    if jb.host[0] == 0:
        sent = jb.relay.send_verdict(r.status, r.report())
        jb.say("the checks' outcome %s the other hosts' agents" % (
            "sent to" if sent else "could not be sent to"))
        return r.checks, None
    if r.launch is not None and r.launch.interrupted:  # this host's own Ctrl-C: no waiting
        return r.checks, None
    v, why = jb.relay.wait_verdict(wait_s)
    if v is None:
        return [Check("host0", False, why + " (host 0's run directory has the checks)")], None
    return [Check("host0", v["status"] == EXIT_PASS,
                  "host 0 checked every host's ranks: exit %d%s" % (
                      v["status"], "" if v["status"] == EXIT_PASS else "; its report:\n" +
                      v["report"]))], v["status"]


def run_scenario(path, run_dir=None, echo=True, progress=None, handle_signals=False,
                 paths=None, grace=5.0, seed=None, out=None, timeout=None, daemon_args=(),
                 local_hosts=1, hosts_env=None, rendezvous_timeout=None):
    """Run a scenario's job and check it against its expect:; see the module's text.
    daemon_args: more simfabricd options (--sample-ms). local_hosts: the job's nodes on that
    many emulated hosts (Job's; the harness then runs one process per rank, --launched).
    hosts_env: the environment of one agent per host (`simfabric run --hosts-from-env`, as
    `launch --hosts-from-env`): this host runs its daemon and its block of the ranks, every
    other host's agent sends its ranks' outcomes and files to host 0's, which checks the whole
    run and sends every agent its verdict (each exits with it)."""
    paths = paths or Paths()
    host = hosts_from_env(hosts_env) if hosts_env is not None else None
    if host and host[1] == 1:
        host = None  # one host: as without
    if rendezvous_timeout is not None and not (0 < rendezvous_timeout <= 3600):
        raise LaunchError("--rendezvous-timeout %g: a number of seconds in (0, 3600]" %
                          rendezvous_timeout, EXIT_USAGE)
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
    why = local_hosts_refusal(local_hosts, len(job["nodes"]), path, None, False, host)
    per_rank = local_hosts > 1 or host is not None  # the harness: one process per rank
    if not why and per_rank and job["program"] == "harness" and \
            job["tests"] != "all" and "bench" in job["tests"]:
        why = ("%s with the harness's bench test: it needs the ranks forked by one harness (a "
               "shared page), not one process per rank" % (
                   "--local-hosts" if local_hosts > 1 else "--hosts-from-env"))
    if why:
        raise LaunchError(why, EXIT_USAGE)
    jb = Job(paths, run_dir, name, path, None, ["-v"] + (["--seed", str(seed)] if seed is not
                                                       None else []) + list(daemon_args),
             local_hosts=local_hosts, host=host)
    jb.rendezvous_timeout = rendezvous_timeout or FEDERATE_TIMEOUT_S
    if host:
        jb.say("host %d of %d (host 0 at %s): this host's daemon and ranks" % host[:3])
        jb.share = shared_files(job, expect)
    t0 = time.monotonic()
    checks, status = None, None
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
        if job["program"] == "harness" and per_rank:
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
        jb.collect(lr, gather=not host)
        if host:  # host 0 checks every host's ranks, and tells the others
            rc = jb.stop_daemon()  # its exit status goes with the ranks
            jb.gather(lr)
            lr.add_remote(jb.epoch_ns, jb.share)
            write_counters(lr, fb)
            if host[0] == 0:
                checks = _checks(job, expect, lr, fb) + host_checks(job["ranks"], lr, rc)
            checks, status = _verdict_of(jb, RunResult(path, fb, job, expect, lr, checks or []),
                                         verdict_wait_s(job, fail_grace))
    except BaseException as e:
        if host and host[0] == 0 and jb.relay is not None and checks is None:
            jb.relay.send_verdict(EXIT_FAIL, "host 0's agent failed: %s: %s" % (
                type(e).__name__, e))  # the others' waits end now, saying so
        raise
    finally:
        rc = jb.down()
    if checks is None:
        write_counters(lr, fb)
        checks = _checks(job, expect, lr, fb)
    if rc not in (0, None) and not host:  # (across hosts: in host_checks, host 0's)
        checks.append(Check("daemon", False, "simfabricd exited with status %s (see %s)" % (
            rc, os.path.join(jb.run_dir, "simfabricd.log"))))
    r = RunResult(path, fb, job, expect, lr, checks, verdict=status)
    with open(os.path.join(jb.run_dir, "report.json"), "w") as f:
        json.dump(r.to_json(), f, indent=1)
    with open(os.path.join(jb.run_dir, "report.txt"), "w") as f:
        f.write(r.report() + "\n")
    return r


def _checks(job, expect, lr, fb):
    if lr.interrupted:
        return [Check("ranks", False, "interrupted by %s: torn down" % _signame(
            lr.interrupted))]
    return evaluate(job, expect, lr, fb)


def _bounds(lo, hi):
    """A timing range as the check names it: a lower bound of 0 says it is a ceiling only."""
    return ("at most %g x model (a ceiling only)" % hi if lo == 0 else
            "within [%g, %g] x model" % (lo, hi))
