#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""sfdemo.py [--build DIR] [--make MAKE] [--no-build] [--out DIR] - what `make demo` and
`simfabric demo` show, in one screen (at most 40 lines of at most 100 columns): the fabric, the
job, the numbers against the model and memcpy, a fault survived, a verdict, and where the
picture is.

In a checkout it first builds what it needs (the plugin, the daemon, the harness; the compiler's
lines go to DIR/demo/build.log) unless --no-build; from an installed tree (`simfabric demo`) it
runs the installed programs and scenarios. Then it runs two shipped scenarios with
`simfabric run`, each in a run directory under OUT/demo/ (default: the build directory's) that
it keeps: job-harness-hdr.yaml (the harness's benchmark over two
HDR nodes, held to the alpha-beta model) and job-harness-flap.yaml (a link flapping within the
RC retry budget). Whatever simfabricd said about fidelity is shown and explained, not hidden.
Exit status: 0 when both runs pass, 1 otherwise (then the failing run's output is shown).
"""
import argparse
import io
import json
import os
import re
import subprocess
import sys
import time

from . import launch as sflaunch
from . import paths as sfpaths
from . import report as sfreport
from .paths import TOOLS as HERE

ROOT = sfpaths.ROOT
INSTALLED = sfpaths.installed_layout() is not None
# the shipped scenarios: the checkout's, or what make install put in <prefix>/share/simfabric
SCEN = (os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "share",
                     "simfabric", "scenarios") if INSTALLED else os.path.join(ROOT, "scenarios"))
CLI = "simfabric" if INSTALLED else "tools/simfabric"
HDR = os.path.join(SCEN, "job-harness-hdr.yaml")
FLAP = os.path.join(SCEN, "job-harness-flap.yaml")


def shown(path):
    """A scenario as the user would name it: scenarios/... in a checkout; installed, its name in
    the scenarios directory the demo names once (a whole path would not fit a line)."""
    return os.path.basename(path) if INSTALLED else os.path.relpath(path, ROOT)
WIDTH = 100
FIDELITY = re.compile(r"fidelity: link (\d+) \(([^)]*)\): (\d+) deliveries in the last (?:second|[0-9.]+ s) "
                      r"completed ([\d.]+) us after the model's time on average")


def say(line=""):
    print(line[:WIDTH])


def load(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def build(make, b):
    """The plugin, the daemon and the harness, with every CPU, into b; the log's path and the
    seconds it took, or exit with the log's tail."""
    os.makedirs(os.path.join(b, "demo"), exist_ok=True)
    log = os.path.join(b, "demo", "build.log")
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.call([make, "--no-print-directory", "-j%d" % (os.cpu_count() or 1),
                              "B=%s" % b, "plugin", "sim", os.path.join(b, "simfabric-harness")],
                             cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        with open(log) as f:
            tail = f.read().splitlines()[-20:]
        for ln in tail:
            say(ln)
        say("demo: the build failed (the whole log: %s)" % log)
        sys.exit(1)
    return log, time.monotonic() - t0


def run(paths, out, scenario, name):
    """`simfabric run SCENARIO` into out/demo/name with the programs of paths: (run directory,
    its report.json or None, the CLI's output)."""
    d = os.path.join(out, "demo", name)
    subprocess.call(["rm", "-rf", d])
    env = dict(os.environ, SIMFABRIC_BUILD=paths.build)
    p = subprocess.run([sys.executable, paths.cli, "run", scenario, "--run-dir", d, "-q"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    return d, load(d, "report.json"), p.stdout


def check(rep, name):
    for c in (rep or {}).get("checks") or []:
        if c["name"] == name:
            return c
    return {}


def fidelity(dirs):
    """simfabricd's fidelity warnings in these runs: (count, the worst one's words or None)."""
    n, worst = 0, None
    for d in dirs:
        try:
            with open(os.path.join(d, "simfabricd.log"), errors="replace") as f:
                lines = [ln for ln in f if "fidelity:" in ln]
        except OSError:
            continue
        for ln in lines:
            n += 1
            m = FIDELITY.search(ln)
            late = float(m.group(4)) if m else 0.0
            if worst is None or late > worst[0]:
                worst = (late, "link %s (%s), %s us late on average" % (
                    m.group(1), m.group(2), m.group(4)) if m else
                    ln.split("fidelity:", 1)[1].strip())
    return n, worst and worst[1]


def fabric_line(fb):
    """One line for a resolved fabric: nodes, NICs, link rate, switches."""
    links = fb.get("links") or []
    rates = sorted({l["rate_bps"] for l in links if l.get("rate_bps")})
    sw = [s["name"] for s in fb.get("switches") or []]
    return "%d nodes, %d NIC each, %s links through switch %s" % (
        fb["counts"]["nodes"], fb["counts"]["nics"] // max(1, fb["counts"]["nodes"]),
        "/".join("%g Gb/s" % (r / 1e9) for r in rates) or "unlimited", ", ".join(sw) or "-")


def retry_budget(fb):
    """The RC retry budget of the first NIC: retry_count x T_o (4.096 us x 2^timeout_exp)."""
    p = fb["nodes"][0]["nics"][0]["params"]
    t_o = 4.096e-6 * (1 << p["timeout_exp"]) * p.get("timeout_scale", 1)
    return p["retry_count"], t_o * 1e3, p["retry_count"] * t_o * 1e3


def show_failure(name, out):
    say("   %s failed; its output (the last lines):" % name)
    for ln in out.strip().splitlines()[-8:]:
        say("   | " + ln)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=None, help="the build directory (a checkout's build/)")
    ap.add_argument("--make", default="make")
    ap.add_argument("--no-build", action="store_true", help="run what is built or installed")
    ap.add_argument("--out", default=None, help="where the runs go (default: the build "
                    "directory's demo/; installed: a new directory under /tmp)")
    a = ap.parse_args(argv)
    paths = sfpaths.Paths(a.build)
    b = paths.build
    if not INSTALLED:
        rel = os.path.relpath(b, ROOT)
        b = b if rel.startswith("..") else rel
    out = a.out or (sflaunch.make_run_dir(name="demo") if INSTALLED else b)
    say("simfabric demo: an NCCL net plugin's traffic between emulated nodes, all on this "
        "machine")
    if INSTALLED or a.no_build:
        paths.require(paths.daemon, paths.harness, paths.plugin)
        say("programs:  %s" % paths.build)
        say("plugin:    %s" % paths.plugin)
        if INSTALLED:
            say("scenarios: %s" % SCEN)
    else:
        log, secs = build(a.make, b)
        say("build: plugin, daemon and harness ready in %.1f s (make -j%d, log in %s)" % (
            secs, os.cpu_count() or 1, os.path.dirname(log)))
    say()

    hdr, hrep, hout = run(paths, out, HDR, "hdr")
    fb = load(hdr, "fabric.json") or {}
    say("1. The fabric: %s, served by simfabricd" % shown(HDR))
    timing = check(hrep, "timing")
    model = re.search(r"model: alpha ([\d.]+) us, B ([\d.]+) GB/s", timing.get("detail", ""))
    if fb.get("counts"):
        say("   %s;" % fabric_line(fb))
    if model:
        say("   the model of a message between them: %s us one way (alpha) and %s GB/s (B)" %
            model.groups())
    say("2. The job: simfabric-harness, 2 processes (ranks), each loading the NCCL net plugin")
    say("   %s and driving it as NCCL's proxy thread does" % paths.plugin)
    rows = timing.get("rows") or []
    bench = [t.get("metrics") or {} for t in (load(hdr, "harness.json") or {}).get("tests", [])
             if t.get("name") == "bench"]
    memcpy = {bw["bytes"]: bw.get("memcpy_gbps") for m in bench for bw in m.get("bandwidth", [])
              if bw.get("memcpy_gbps")}
    if rows:
        say("3. The numbers, every byte checked (model: alpha-beta, tools/sfmodel.py):")
        for r in rows:
            if r["bytes"] < 1024:
                say("   %-14s %8.2f us    model %6.2f us" % (
                    "%d B one way" % r["bytes"], r["time_us"], r["model_time_us"]))
            else:
                mc = memcpy.get(r["bytes"])
                say("   %-14s %8.1f GB/s  model %6.1f GB/s (%.2f x)%s" % (
                    "%s stream" % sfreport._size(r["bytes"]), r["busbw"], r["model_busbw"],
                    r["ratio"], "   memcpy here %.1f GB/s" % mc if mc else ""))
    else:
        say("3. The numbers: none (the run did not get that far)")
    links = (load(hdr, "stats.json") or {}).get("links") or []
    if links:
        n_late = sum(l.get("late_n", 0) for l in links)
        say("   never faster than the model: %d early deliveries; late by %.1f us on average, "
            "at most %.1f ms" % (sum(l.get("early", 0) for l in links),
                                 sum(l.get("late_sum_ns", 0) for l in links) / max(1, n_late)
                                 / 1e3, max(l.get("late_max_ns", 0) for l in links) / 1e6))
    flap, frep, fout = run(paths, out, FLAP, "flap")
    n, worst = fidelity([hdr, flap])
    if n:
        say("   fidelity: simfabricd warned %d time%s: %s" % (n, "s" if n > 1 else "", worst))
        say("     (this machine could not copy at the modelled rate then: messages came late, "
            "never early)")
    else:
        say("   fidelity: no warning from simfabricd (it warns when a link's deliveries fall "
            "behind the model)")

    ffb = load(flap, "fabric.json") or {}
    faults = (load(flap, "faults.json") or {}).get("faults") or []
    say("4. A fault: %s" % shown(FLAP))
    if ffb.get("counts"):
        say("   %s" % fabric_line(ffb))
    spec = (ffb.get("faults") or [{}])[0]
    if spec.get("action") == "flap" and ffb.get("nodes"):
        cnt, t_o, budget = retry_budget(ffb)
        l0 = ffb["links"][spec["links"][0]]
        say("   the cable %s - %s flaps: down %g ms, %d times, %g ms apart;" % (
            l0["from"], l0["to"], spec["duration_ns"] / 1e6, spec.get("count") or 1,
            spec.get("period_ns", 0) / 1e6))
        say("   InfiniBand RC retries a lost packet %d times, every %.1f ms: a budget of %.1f ms"
            % (cnt, t_o, budget))
    got = [t.get("metrics") or {} for t in (load(flap, "harness.json") or {}).get("tests", [])
           if t.get("name") == "faults"]
    for f in faults:
        say("   messages hit %d, delayed %d (%.1f ms in all), failed %d; %d of %d arrived exact" % (
            f["hit"], f["delayed"], f["delay_ns"] / 1e6, f["failed"],
            sum(m.get("received", 0) - m.get("wrong", 0) for m in got),
            sum(m.get("msgs", 0) for m in got)))
    if faults:
        r = sfreport.Run(flap)
        for ln in sfreport.text_fault_chart(r, sfreport.fault_rows(r), sfreport.completions(r)):
            say(" " + ln)
    say()

    ok_h, ok_f = bool(hrep and hrep.get("passed")), bool(frep and frep.get("passed"))
    if not ok_h:
        show_failure(shown(HDR), hout)
    if not ok_f:
        show_failure(shown(FLAP), fout)
    moved = sum(c.get("bytes") or 0 for c in (load(hdr, "stats.json") or {}).get(
        "connections") or [])
    big = max(rows, key=lambda r: r["bytes"]) if rows else None
    if ok_h and ok_f:
        say("PASS: 2 emulated nodes moved %.1f GB through the plugin, exact, at %.2f x the "
            "model at %s;" % (moved / 1e9, big["ratio"], sfreport._size(big["bytes"]))
            if big else "PASS: both runs passed;")
        say("      a link flapping within the RC retry budget delayed messages and lost none.")
    else:
        say("FAIL: %s" % " and ".join(shown(s) for s, ok in ((HDR, ok_h), (FLAP, ok_f))
                                      if not ok))
    pictures = []
    if faults and sfreport.pyplot() is not None:  # matplotlib: draw faults.png (and the rest)
        try:
            pictures = sfreport.report(flap, fmt="png", stdout=io.StringIO())
        except Exception as e:  # noqa: BLE001 - the demo goes on without its picture
            say("picture: not drawn (%s: %s)" % (type(e).__name__, e))
    if pictures:
        say("picture: %s   (all of it: %s report %s)" % (
            [p for p in pictures if p.endswith("faults.png")][0], CLI, flap))
    else:
        say("picture: the chart above; `%s report %s` draws it as faults.png" % (CLI, flap))
        say("         where python3-matplotlib is installed")
    say("runs:    %s/demo/{hdr,flap}: every log, stats.json, faults.json, series.json" % out)
    say("next:    %s" % ("simfabric run <scenarios>/job-harness-retry-exhausted.yaml  |  "
                         "man simfabric" if INSTALLED else "make test  |  README.md  |  "
                         "tools/simfabric run scenarios/job-harness-retry-exhausted.yaml"))
    return 0 if ok_h and ok_f else 1


if __name__ == "__main__":
    sys.exit(main())
