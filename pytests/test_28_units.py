"""Values as netem and users write them (issue 16): `latency: 5us`, `rate: 25gbit`, `mtu: 4K`,
`loss: 0.1%`. A scenario written with units must resolve to the very fabric of the same scenario
in the unit-named keys (`latency_ns`, `rate_gbps`, ...): the daemon's `--dump-fabric` is compared,
over every shipped scenario rewritten with units and over hand-written ones. The errors of the new
spellings are one line, `file:line:column: key: reason`, exit 2; the daemon's flags take units
through the same parser. The grammar itself is tested in C (sim/test/test_units.c)."""
import glob
import json
import os
import re
import subprocess

import pytest

import sfctl

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
SCENARIOS = sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.yaml")))

# old key (its unit in the name) -> the alias and the unit a bare number of the old key is in
_NS = r"(latency|o_send|o_recv|ack_proc|reorder_delay|sd|add_latency)_ns"
_GBPS = r"(rate|host_rate|port_rate)_gbps"


def with_units(text):
    """The scenario text with every unit-named key spelled with its alias and a unit."""
    num = r"([0-9][0-9.e+-]*)"
    text = re.sub(r"\b%s(\s*):(\s*)%s\b" % (_NS, num), r"\1\2:\3\4ns", text)
    text = re.sub(r"\b%s(\s*):(\s*)%s(?=[\s,}\]]|$)" % (_GBPS, num), r"\1\2:\3\4gbit", text)
    text = re.sub(r"\bspeed_mbps(\s*):(\s*)%s\b" % num, r"speed\1:\2\3mbit", text)
    text = re.sub(r"\b(timeout|bound|op_timeout|within)_s(\s*):(\s*)%s\b" % num, r"\1\2:\3\4s",
                  text)
    return text


def dump(sf_env, path):
    p = subprocess.run([sf_env.daemon, "--dump-fabric", "--scenario", str(path)],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    fb = json.loads(p.stdout)
    fb.pop("scenario", None)  # the file's path
    return fb


@pytest.mark.parametrize("path_", SCENARIOS, ids=[os.path.basename(s) for s in SCENARIOS])
def test_28_01_shipped_scenarios_with_units_resolve_the_same(sf_env, tmp_path, path_):
    old = open(path_).read()
    new = with_units(old)
    if new == old:
        pytest.skip("no unit-named key to rewrite")
    sc = tmp_path / os.path.basename(path_)
    sc.write_text(new)
    assert dump(sf_env, sc) == dump(sf_env, path_), new


SAME = [
    pytest.param(
        "fabric:\n  defaults:\n    link: {rate: 12.5GB/s, latency: 1.5us, mtu: 2K, loss: 0.1%,"
        " jitter: {dist: normal, sd: 0.2us}}\n"
        "    nic: {host_rate: 24GBps, o_send: 0.3us, o_recv: 300ns}\n"
        "  nodes: {count: 2}\n  switches: [{name: s, port_rate: 400Gbps, latency: 0.13us}]\n"
        "  links: [{ends: [[n0, n1], s], b_to_a: {rate: 10000Mb/s}}]\n"
        "faults:\n  - {action: degrade, link: n0, at: 1ms, for: 2ms,"
        " set: {rate: 1gbit, add_latency: 3us}}\n",
        "fabric:\n  defaults:\n    link: {rate_gbps: 100, latency_ns: 1500, mtu: 2048,"
        " loss: {model: bernoulli, p: 0.001}, jitter: {dist: normal, sd_ns: 200}}\n"
        "    nic: {host_rate_gbps: 192, o_send_ns: 300, o_recv_ns: 300}\n"
        "  nodes: {count: 2}\n  switches: [{name: s, port_rate_gbps: 400, latency_ns: 130}]\n"
        "  links: [{ends: [[n0, n1], s], b_to_a: {rate_gbps: 10}}]\n"
        "faults:\n  - {action: degrade, link: n0, at: 1000000, for: 2000000,"
        " set: {rate_gbps: 1, add_latency_ns: 3000}}\n", id="explicit"),
    pytest.param("fabric: {kind: ideal, speed: 400gbit, latency: 2us}\n",
                 "fabric: {kind: ideal, speed_mbps: 400000, latency_ns: 2000}\n", id="ideal"),
    pytest.param("fabric:\n  nodes: {count: 2}\njob: {program: harness, timeout: 90s, bound: 250ms,"
                 " max_bytes: 1M}\nexpect:\n  failure: {error: ncclRemoteError, within: 1.5s}\n",
                 "fabric:\n  nodes: {count: 2}\njob: {program: harness, timeout_s: 90, bound_s: 0.25,"
                 " max_bytes: 1048576}\nexpect:\n  failure: {error: ncclRemoteError, within_s: 1.5}\n",
                 id="job-times"),
    pytest.param("fabric:\n  nodes: {count: 2}\njob: {program: nccl, sizes: [1K, 64KiB, 1M]}\n",
                 "fabric:\n  nodes: {count: 2}\njob: {program: nccl, sizes: [1024, 65536,"
                 " 1048576]}\n", id="job-sizes"),
]


@pytest.mark.parametrize("units,old", SAME)
def test_28_02_written_with_units_resolves_as_the_old_keys(sf_env, tmp_path, units, old):
    (tmp_path / "units").mkdir()
    (tmp_path / "old").mkdir()
    a, b = tmp_path / "units" / "t.yaml", tmp_path / "old" / "t.yaml"  # the name is the file's
    a.write_text(units)
    b.write_text(old)
    assert dump(sf_env, a) == dump(sf_env, b)


BAD = [
    ("link: {latency: 5us, latency_ns: 5000}",
     "latency_ns: latency is given too: two spellings of one parameter, keep one"),
    ("link: {rate: 5us}", "rate: '5us' has the unit of a time (us), not of a rate"),
    ("link: {latency: 5}", "latency: '5' needs a unit: ns, us, ms or s"),
    ("link: {latency: -5us}", "latency: '-5us' is negative"),
    ("link: {latency: 20s}", "latency: '20s' is not a time in 0..10s"),
    ("link: {latency: 5xs}", "latency: '5xs' has an unknown unit 'xs'"),
    ("link: {rate: 25gbps}", "rate: '25gbps' is ambiguous: tc reads gbps as BYTES per second"),
    ("link: {rate: 1e30bit}", "rate: '1e30bit' is too large"),
    ("link: {rate_gbps: 25gbit}", "with a unit, write rate: 25gbit"),
    ("link: {mtu: 1M}", "mtu: '1M' is not a size in 64B..64KiB"),
    ("nic: {o_send: 1.5ns}", "o_send: '1.5ns' is not a whole number of nanoseconds"),
    ("link: {}\njob: {program: harness, timeout: 1.5s}",
     "timeout: '1.5s' is not a whole number of seconds"),
    ("link: {}\njob: {program: harness, timeout_s: 5, timeout: 5s}",
     "timeout: timeout_s is given too: two spellings of one parameter, keep one"),
    ("link: {}\njob: {program: harness, bound: 5}", "bound: '5' needs a unit: ns, us, ms or s"),
]


@pytest.mark.parametrize("defaults,why", BAD, ids=[b[0] for b in BAD])
def test_28_03_errors_name_the_value_the_key_and_the_place(sf_env, tmp_path, defaults, why):
    sc = tmp_path / "bad.yaml"
    sc.write_text("fabric:\n  nodes: {count: 2}\n  defaults:\n    %s\n" % defaults)
    p = subprocess.run([sf_env.daemon, "--check", "--scenario", str(sc)], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert re.match(r"simfabricd: %s:[45]:\d+: " % re.escape(str(sc)), p.stderr), p.stderr
    assert why in p.stderr and p.stderr.count("\n") == 1, p.stderr


@pytest.mark.parametrize("args,why", [
    (["--conn-mem", "8Q"], "--conn-mem: '8Q' has an unknown unit 'Q'"),
    (["--conn-mem", "-1"], "--conn-mem: '-1' is negative"),
    (["--sample", "5us"], "--sample: '5us' is not a whole number of milliseconds"),
    (["--sample", "5gbit"], "--sample: '5gbit' has the unit of a rate"),
    (["--partial-timeout", "50ms"], "--partial-timeout: '50ms' is not a time in 100ms..3600s"),
    (["--connect-wait-ms", "5s"], "--connect-wait-ms: '5s' is not a number of milliseconds"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_28_04_daemon_flags_take_units(sf_env, args, why):
    p = subprocess.run([sf_env.daemon] + args, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and p.stderr.startswith("simfabricd: " + why), p.stderr


def test_28_05_daemon_flags_with_units_are_the_bare_ones(fabric_factory):
    sc = ["--scenario", os.path.join(ROOT, "scenarios", "hdr-2node.yaml")]
    f = fabric_factory(args=sc + ["--conn-mem", "8MiB", "--connect-wait", "2s",
                                  "--partial-timeout", "1.5s", "--sample", "10ms"], name="units")
    g = fabric_factory(args=sc + ["--conn-mem", "8388608", "--connect-wait-ms", "2000",
                                  "--partial-timeout-ms", "1500", "--sample-ms", "10"],
                       name="bare")
    assert "connect wait 2000 ms" in f.log(), f.log()
    mem = [re.search(r"conn-mem (\d+)", x.log()) for x in (f, g)]
    assert mem[0] and mem[1] and mem[0].group(1) == mem[1].group(1), (f.log(), g.log())
    assert sfctl.series(f.socket)["period_ns"] == sfctl.series(g.socket)["period_ns"] == 10000000
