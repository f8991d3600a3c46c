"""Fault clocks that cannot miss (issue 16): a fault whose `at:` window closes before the job's
first message hits nothing; the daemon warns, and `simfabric run`'s faults check fails naming it,
unless expect: faults: {may_miss: [...]} allows it. `after: {first_traffic: ...}` counts from
the job's traffic, so the same window hits. CPU only (the harness's faults test)."""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# job-harness-flap.yaml's fabric (a 2-node star, a 29.4 ms retry budget), with this fault and job
TAIL = """\
faults:
  - {{name: cut, action: link_down, link: [node0, sw0], {when}for: 2ms}}
job:
  program: harness
  tests: [faults]
  args: [--fault-msgs, "100", --fault-gap-us, "200", --fault-expect, ok]
  timeout_s: 60
expect:
  data: exact
{expect}"""


def _scenario(tmp_path, name, when, expect=""):
    with open(os.path.join(ROOT, "scenarios", "job-harness-flap.yaml")) as f:
        head = f.read().split("\nfaults:")[0]
    p = tmp_path / name
    p.write_text(head + "\n" + TAIL.format(when=when, expect=expect))
    return str(p)


def _faults_check(r):
    return [c for c in r.json["checks"] if c["name"] == "faults"]


def test_31_01_a_clock_window_before_the_job_fails_the_faults_check(sf_run, tmp_path):
    r = sf_run(_scenario(tmp_path, "early.yaml", "at: 0, "))
    assert r.rc == 1 and not r.passed, r.explain()
    (c,) = _faults_check(r)
    assert not c["ok"], c
    assert "fault #0 'cut' opened at 0 ms and closed at 2 ms (fabric time), before the job " \
        "started at" in c["detail"] and "it hit nothing" in c["detail"], c
    assert "after: {first_traffic: LINK}" in c["detail"] and "may_miss" in c["detail"], c
    assert "FAIL faults   fault #0 'cut'" in r.report, r.report
    # the data itself was fine: only the faults check failed
    assert all(x["ok"] for x in r.json["checks"] if x["name"] != "faults"), r.json["checks"]
    # the daemon's log says it too, when the window closed
    with open(os.path.join(r.run_dir, "simfabricd.log")) as f:
        log = f.read()
    assert "fault #0 'cut' opened at 0ns and closed at 2ms" in log and "hit nothing" in log, log
    # faults.json states its clock
    with open(os.path.join(r.run_dir, "faults.json")) as f:
        fj = json.load(f)
    assert "since the daemon's start" in fj["clock"], fj


def test_31_02_may_miss_allows_it(sf_run, tmp_path):
    """A window before the job, and a trigger that never fires (test_34_10)."""
    for i, when in enumerate(["at: 0, ", "after: {messages: 1000000, link: node0}, "]):
        r = sf_run(_scenario(tmp_path, "allowed-%d.yaml" % i, when,
                             "  faults: {may_miss: [cut]}\n")).check_ok()
        (c,) = _faults_check(r)
        assert c["ok"] and "1 hit nothing, as may_miss allows" in c["detail"], (when, c)


def test_31_03_a_traffic_trigger_hits(sf_run, tmp_path):
    # 10 ms, not 2: on a loaded machine a sender can stall 2.5 ms with nothing posted, and a
    # 2 ms window then truly hits nothing (1 run in 5 at load 9); within the 29.4 ms budget
    sc = _scenario(tmp_path, "job.yaml", "after: {first_traffic: node0}, at: 1ms, ")
    with open(sc) as f:
        text = f.read()
    with open(sc, "w") as f:
        f.write(text.replace("for: 2ms}", "for: 10ms}"))
    r = sf_run(sc)
    r.check_ok()
    (c,) = _faults_check(r)
    assert c["ok"] and "0 message(s) hit" not in c["detail"], c
    with open(os.path.join(r.run_dir, "fabric.json")) as f:
        fb = json.load(f)
    assert fb["faults"][0]["clock"] == "trigger", fb["faults"]


def test_31_04_the_dump_says_each_faults_clock(sf_env, tmp_path):
    import subprocess
    sc = _scenario(tmp_path, "dump.yaml", "at: 0, ")
    r = subprocess.run([sf_env.daemon, "--scenario", sc, "--dump-fabric"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["faults"][0]["clock"] == "fabric_start"
