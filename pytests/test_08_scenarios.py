# SPDX-License-Identifier: MIT
"""Scenario files: the daemon loads every shipped one and op=fabric says what it resolved to;
bad files exit 2 with file:line:column; nodes the scenario lacks are refused; the docs' parameter
table is the daemon's. Parameters are read from op=fabric, never by parsing the YAML here."""
import glob
import os
import re
import socket
import subprocess
import time

import pytest

import sfctl

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
SCENARIOS = sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.yaml")))


def scenario(name):
    return os.path.join(ROOT, "scenarios", name + ".yaml")


def hello(fabric, node):
    return dict(fabric.request("hello", node=node, pid=os.getpid(), version=1, client="pytest"))


def link(fb, frm, to):
    found = [l for l in fb["links"] if l["from"] == frm and l["to"] == to]
    assert len(found) == 1, (frm, to, [(l["from"], l["to"]) for l in fb["links"]])
    return found[0]


def path(fb, src, dst):
    found = [p for p in fb["paths"] if p["src"] == src and p["dst"] == dst]
    assert len(found) == 1, (src, dst)
    return found[0]


def test_08_00_shipped_scenarios_exist():
    names = {os.path.basename(p)[:-5] for p in SCENARIOS}
    for want in ("ideal", "hdr-2node", "roce-4node-jitter", "leafspine-8node-2to1", "slow-lossy",
                 "model-latency", "model-bandwidth", "model-contention", "model-loss-bernoulli",
                 "model-loss-ge", "model-loss-4state", "model-reorder", "model-duplicate",
                 "model-corrupt", "model-hostlimit", "model-multihop", "model-oversub"):
        assert want in names, want
    assert any(n.startswith("model-jitter-") for n in names)


@pytest.mark.parametrize("path_", SCENARIOS, ids=[os.path.basename(p)[:-5] for p in SCENARIOS])
def test_08_01_every_shipped_scenario_loads(fabric_factory, path_):
    f = fabric_factory(args=["--scenario", path_])
    fb = sfctl.fabric(f.socket)
    name = os.path.basename(path_)[:-5]
    assert fb["scenario"] == path_ and fb["name"] == name
    st = f.show()
    assert st["seed"] == fb["seed"] == fb["config"]["seed"] and st["fabric"] == fb["kind"]
    c = fb["counts"]
    assert (c["nodes"], c["switches"], c["links"]) == (
        len(fb["nodes"]), len(fb["switches"]), len(fb["links"]))
    assert c["nics"] == sum(len(n["nics"]) for n in fb["nodes"])
    if fb["kind"] == "ideal":
        assert fb["nodes"] == [] and fb["paths"] is None
        return
    # Every NIC's hello entry is the dump's; every NIC has its cable; paths chain.
    for n in fb["nodes"]:
        h = hello(f, n["name"])
        assert int(h["nics"]) == len(n["nics"])
        for nic in n["nics"]:
            i = nic["index"]
            assert h["nic.%d.name" % i] == nic["name"]
            assert int(h["nic.%d.speed_mbps" % i]) == nic["speed_mbps"]
            assert int(h["nic.%d.latency_ns" % i]) == nic["latency_ns"]
            assert h["nic.%d.guid" % i] == nic["guid"]
            up = fb["links"][nic["link_out"]]
            assert up["from"] == "%s/%d" % (n["name"], i)
            assert fb["links"][nic["link_in"]]["to"] == up["from"]
            assert nic["speed_mbps"] == (up["rate_bps"] // 1000000 or 200000)
    if fb["paths"] is not None:
        assert len(fb["paths"]) == fb["path_pairs"] == c["nics"] * (c["nics"] - 1)
        for p in fb["paths"]:
            hops = [fb["links"][i] for i in p["links"]]
            assert hops[0]["from"] == p["src"] and hops[-1]["to"] == p["dst"], p
            assert all(a["to"] == b["from"] for a, b in zip(hops, hops[1:])), p
            assert p["latency_ns"] == sum(h["hop_latency_ns"] for h in hops)
    # Directed link ids: 2 * cable + direction, the two directions mirror each other.
    for l in fb["links"]:
        assert l["id"] // 2 == l["cable"]
        back = fb["links"][l["id"] ^ 1]
        assert (back["from"], back["to"]) == (l["to"], l["from"])


def test_08_02_hdr_2node(fabric_factory):
    f = fabric_factory(args=["--scenario", scenario("hdr-2node")])
    fb = sfctl.fabric(f.socket)
    assert [n["name"] for n in fb["nodes"]] == ["node0", "node1"]
    assert [s["name"] for s in fb["switches"]] == ["ib-sw0"]
    assert fb["switches"][0]["params"] == {"ports": 40, "port_rate_gbps": 200, "latency_ns": 130}
    for l in fb["links"]:
        assert l["params"]["rate_gbps"] == 200 and l["rate_bps"] == 200 * 10**9
        assert l["fs_per_byte"] == 40000 and l["params"]["latency_ns"] == 15
        assert l["params"]["loss"] == {"model": "none"}
        assert l["hop_latency_ns"] == (145 if l["to"] == "ib-sw0" else 15)
    nic = fb["nodes"][0]["nics"][0]
    assert nic["params"]["o_send_ns"] == 420 and nic["params"]["host_rate_gbps"] == 192
    # About 1 us one way: 420 + 145 + 15 + 420 and 2 ns of header bytes.
    assert nic["latency_ns"] == 1002 and nic["speed_mbps"] == 200000
    assert path(fb, "node0/0", "node1/0")["latency_ns"] == 160


def test_08_03_leafspine_2to1(fabric_factory):
    f = fabric_factory(args=["--scenario", scenario("leafspine-8node-2to1")])
    fb = sfctl.fabric(f.socket)
    sw = {s["name"]: s for s in fb["switches"]}
    for leaf in ("leaf0", "leaf1"):
        assert sw[leaf]["nic_gbps"] == 800 and sw[leaf]["switch_gbps"] == 400
        assert sw[leaf]["oversubscription"] == 2
        assert sw[leaf]["ports_used"] == 6
    assert sw["spine0"]["oversubscription"] is None and sw["spine0"]["switch_links"] == 2
    assert link(fb, "leaf0", "spine0")["params"]["latency_ns"] == 50
    assert link(fb, "leaf0", "spine0")["hop_latency_ns"] == 180
    # Within a leaf: 2 hops; across: 4, spread over the spines by destination gid.
    assert len(path(fb, "node0/0", "node3/0")["links"]) == 2
    via = {}
    for dst in range(4, 8):
        p = path(fb, "node0/0", "node%d/0" % dst)
        assert len(p["links"]) == 4
        via[dst] = fb["links"][p["links"][1]]["to"]
    assert via == {4: "spine0", 5: "spine1", 6: "spine0", 7: "spine1"}, via


def test_08_04_models_per_link_and_direction(fabric_factory):
    f = fabric_factory(args=["--scenario", scenario("model-asymmetric")])
    fb = sfctl.fabric(f.socket)
    up, down = link(fb, "node0/0", "sw0"), link(fb, "sw0", "node0/0")
    assert up["params"]["rate_gbps"] == 200 and up["params"]["loss"] == {"model": "none"}
    assert down["params"]["rate_gbps"] == 25
    assert down["params"]["loss"] == {"model": "bernoulli", "p": 0.001}
    assert link(fb, "node1/0", "sw0")["params"]["loss"] == {"model": "none"}

    g = fabric_factory(args=["--scenario", scenario("roce-4node-jitter")], name="roce")
    fb = sfctl.fabric(g.socket)
    for l in fb["links"]:
        assert l["params"]["jitter"] == {"dist": "normal", "sd_ns": 500, "corr": 0.2}
        assert l["params"]["hdr_bytes"] == 82 and l["params"]["rate_gbps"] == 100

    h = fabric_factory(args=["--scenario", scenario("model-loss-ge")], name="ge")
    loss = sfctl.fabric(h.socket)["links"][0]["params"]["loss"]
    assert loss == {"model": "ge", "p": 0.001, "r": 0.2, "bad": 0.5, "good": 0}


def test_08_05_seed(fabric_factory, sf_env, tmp_path):
    f = fabric_factory(args=["--scenario", scenario("slow-lossy"), "--seed", "99"])
    assert sfctl.fabric(f.socket)["seed"] == 99 and f.show()["seed"] == 99
    assert "seed 99" in f.log()
    g = fabric_factory(args=["--scenario", scenario("slow-lossy")], name="plain")
    assert sfctl.fabric(g.socket)["seed"] == 12345
    assert re.search(r"listening on \S+ \(fabric explicit, scenario \S+slow-lossy.yaml, "
                     r"seed 12345, conn-mem \d+\)", g.log()), g.log()
    h = fabric_factory(args=["--seed", "0x10"], name="ideal")  # the ideal fabric has one too
    assert h.show()["seed"] == 16 and sfctl.fabric(h.socket)["seed"] == 16


BAD = [
    pytest.param("fabric:\n  nodes: {count: 2}\n  defaults: {link: {rate_gbps: fast}}\n",
                 "3:32: rate_gbps: 'fast' is not a rate in 0.001..1000000 Gb/s", id="value"),
    pytest.param("fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]\n"
                 "  links:\n    - ends: [a, sw]\n    - ends: [c, sw]\n",
                 "6:14: ends: unknown node or switch 'c'", id="unknown-node"),
    pytest.param("fabric: {nodes: [a\n", "2:1: yaml: did not find expected ',' or ']'",
                 id="syntax"),
    pytest.param("fabric: {kind: ideal}\nextras: 1\n",
                 "2:1: extras: unknown top-level key", id="top-level"),
    pytest.param("fabric:\n  nodes: {names: [a, b, c]}\n  switches: [{name: sw}]\n"
                 "  links:\n    - ends: [[a, b], sw]\n",
                 "2:25: names: NIC c/0 (c-nic0) has no link", id="disconnected"),
]


@pytest.mark.parametrize("text,where", BAD)
def test_08_06_bad_scenarios_exit_2(sf_env, tmp_path, text, where):
    sc = tmp_path / "bad.yaml"
    sc.write_text(text)
    sock = tmp_path / "run" / "ctl.sock"
    p = subprocess.run([sf_env.daemon, "--socket", str(sock), "--scenario", str(sc)],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("simfabricd: %s:%s" % (sc, where)), p.stderr
    assert p.stderr.count("\n") == 1 and not sock.exists(), p.stderr


def test_08_07_check_and_usage(sf_env, tmp_path):
    p = subprocess.run([sf_env.daemon, "--scenario", scenario("model-multirail"), "--check"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    assert "ok: fabric explicit 'model-multirail', 4 node(s), 8 NIC(s), 3 switch(es), " \
           "10 link(s), seed 1" in p.stdout, p.stdout
    for args, needle in ((["--scenario", str(tmp_path / "none.yaml")], "No such file"),
                         (["--scenario", scenario("hdr-2node"), "--nics", "2"], "--nics"),
                         (["--check"], "--check"), (["--seed", "x"], "seed: 'x'"),
                         (["--dump-params", "html"], "markdown or json")):
        p = subprocess.run([sf_env.daemon] + args, capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and needle in p.stderr, (args, p.stderr)


def test_08_08_hello_of_an_unknown_node_is_refused(fabric_factory):
    sc = scenario("hdr-2node")
    f = fabric_factory(args=["--scenario", sc])
    with pytest.raises(sfctl.CtlError) as e:
        hello(f, "node7")
    assert e.value.errno == 2
    assert "node 'node7' is not in scenario %s" % sc in str(e.value), e.value
    assert hello(f, "node1")["node_id"] == "1"  # the scenario's own nodes are there
    assert f.show()["nodes"][1]["name"] == "node1"


def test_08_09_the_ideal_fabric_dump_follows_hellos(fabric):
    fb = sfctl.fabric(fabric.socket)
    assert fb["kind"] == "ideal" and fb["scenario"] is None and fb["nodes"] == []
    assert fb["config"] == {"seed": 1, "switching": "cut_through", "nics_per_node": 1,
                            "speed_mbps": 200000, "latency_ns": 0}
    s = socket.socket(socket.AF_UNIX)  # a session holds the node while it is dumped
    s.connect(fabric.socket)
    s.sendall(b"op=hello\nnode=alpha\npid=%d\nversion=1\nclient=pytest\n\n" % os.getpid())
    assert dict(sfctl._read_message(s, time.monotonic() + 5))["errno"] == "0"
    fb = sfctl.fabric(fabric.socket)
    assert [n["name"] for n in fb["nodes"]] == ["alpha"]
    assert fb["nodes"][0]["nics"][0]["link_out"] is None
    s.close()  # nothing holds it now: the ideal fabric forgets it (red team finding 4)
    deadline = time.monotonic() + 10
    while sfctl.fabric(fabric.socket)["nodes"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sfctl.fabric(fabric.socket)["nodes"] == []


def test_08_10_paging(fabric_factory, tmp_path):
    sc = tmp_path / "big.yaml"
    sc.write_text("fabric:\n  nodes: {count: 300, name: \"host-{i}\"}\n")
    f = fabric_factory(args=["--scenario", str(sc)])
    first = dict(f.request("fabric"))
    chunks = int(first["chunks"])
    assert chunks > 60 and int(first["next"]) == 60 and int(first["bytes"]) > 60 * 1024
    fb = sfctl.fabric(f.socket)
    assert fb["counts"]["nodes"] == 300 and len(fb["links"]) == 600 and fb["paths"] is None
    assert fb["path_pairs"] == 300 * 299
    last = dict(f.request("fabric", skip=chunks))
    assert not any(k.startswith("json.") for k in last) and "next" not in last
    with pytest.raises(sfctl.CtlError) as e:
        f.request("fabric", skip=chunks + 1)
    assert e.value.errno == 22


def test_08_11_cli(fabric_factory, sf_env):
    f = fabric_factory(args=["--scenario", scenario("leafspine-8node-2to1")])
    p = subprocess.run([sf_env.cli, "fabric", "--socket", f.socket], capture_output=True,
                       text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    assert "leaf0" in p.stdout and "2:1" in p.stdout and "node7-nic0" in p.stdout, p.stdout
    p = subprocess.run([sf_env.cli, "fabric", "--socket", f.socket, "--json"],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0 and '"oversubscription": 2' in p.stdout


def test_08_12_the_readme_table_is_the_daemons(sf_env):
    p = subprocess.run([sf_env.daemon, "--dump-params", "markdown"], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 0
    readme = open(os.path.join(ROOT, "scenarios", "README.md")).read()
    m = re.search(r"<!-- params: begin.*?-->\n(.*?)<!-- params: end -->", readme, re.S)
    assert m, "scenarios/README.md has no generated parameter section"
    assert m.group(1) == p.stdout, (
        "scenarios/README.md's parameter table is stale: regenerate it with "
        "`build/simfabricd --dump-params markdown`")
    j = subprocess.run([sf_env.daemon, "--dump-params", "json"], capture_output=True, text=True,
                       timeout=10)
    import json
    rows = json.loads(j.stdout)
    assert {r["name"] for r in rows} >= {"rate_gbps", "loss.p", "host_rate_gbps", "ports", "seed"}


def test_08_13_the_plugin_sees_the_scenarios_nics(harness, fabric_factory):
    f = fabric_factory(args=["--scenario", scenario("model-multirail")])
    fb = sfctl.fabric(f.socket)
    r = harness(nranks=2, tests="connect,props,sizes", fabric=f, extra=["--max-bytes", "65536"])
    r.check_ok()
    props = r.tests("props")
    assert props, r.report()
    for t in props:
        devs = t["metrics"]["devices"]
        node = fb["nodes"][t["rank"]]
        assert [d["name"] for d in devs] == [n["name"] for n in node["nics"]], devs
        assert [d["guid"] for d in devs] == [n["guid"] for n in node["nics"]]
        assert [d["speed"] for d in devs] == [n["speed_mbps"] for n in node["nics"]]


def test_08_14_dump_fabric_on_hosts(sf_env, tmp_path):
    """--dump-fabric --hosts H: each node's host and each link's owner (scenarios/README.md,
    "Placement"); without --hosts the dump has neither, and a bad count or map exits 2."""
    import json
    ls = scenario("leafspine-8node-2to1")
    plain = subprocess.run([sf_env.daemon, "--dump-fabric", "--scenario", ls],
                           capture_output=True, text=True, timeout=10)
    assert plain.returncode == 0 and '"hosts"' not in plain.stdout, plain.stderr
    p = subprocess.run([sf_env.daemon, "--dump-fabric", "--scenario", ls, "--hosts", "2"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    fb = json.loads(p.stdout)
    h = fb["hosts"]
    assert h["count"] == 2 and h["node_host"] == [0] * 4 + [1] * 4, h
    owner = {(l["from"], l["to"]): h["link_owner"][l["id"]] for l in fb["links"]}
    assert owner[("node5/0", "leaf1")] == 1 and owner[("leaf0", "node2/0")] == 0
    assert owner[("spine0", "leaf1")] == 1 and owner[("leaf0", "spine1")] == 0
    assert {k: v for k, v in json.loads(plain.stdout).items()} == \
        {k: v for k, v in fb.items() if k != "hosts"}
    sc = tmp_path / "placed.yaml"
    sc.write_text(open(ls).read() + "placement: {node0..node3: 1, node4..node7: 0}\n")
    p = subprocess.run([sf_env.daemon, "--dump-fabric", "--scenario", str(sc), "--hosts", "2"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    fb = json.loads(p.stdout)
    assert fb["hosts"]["node_host"] == [1] * 4 + [0] * 4
    assert fb["placement"][0] == {"nodes": "node0..node3", "first": "node0", "last": "node3",
                                  "host": 1}
    for args, needle in ((["--dump-fabric", "--hosts", "9"], "--hosts 9: not in 1..8"),
                         (["--dump-fabric", "--hosts", "0"], "--hosts: '0' is not a host count"),
                         (["--check", "--hosts", "2"], "--hosts: with --dump-fabric (the placement), or "
                                         "with --host-rank R")):
        q = subprocess.run([sf_env.daemon, "--scenario", str(sc)] + args,
                           capture_output=True, text=True, timeout=10)
        assert q.returncode == 2 and needle in q.stderr, (args, q.stderr)
    sc.write_text(open(ls).read() + "placement: {node0..node3: 2}\n")
    q = subprocess.run([sf_env.daemon, "--dump-fabric", "--scenario", str(sc), "--hosts", "2"],
                       capture_output=True, text=True, timeout=10)
    assert q.returncode == 2 and "placed.yaml:25:13: placement: 'node0..node3' on host 2, " \
        "but there are 2 hosts (0..1)" in q.stderr, q.stderr
