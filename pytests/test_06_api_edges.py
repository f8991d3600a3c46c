# SPDX-License-Identifier: MIT
"""The plugin's API edges, driven directly (apidrv.py, in a child process each)."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.realpath(__file__))
OK, INVALID_USAGE, REMOTE = 0, 5, 6  # ncclSuccess, ncclInvalidUsage, ncclRemoteError


def drive(sf_env, fabric, case, env=None, timeout=60):
    e = dict(os.environ, SIMFABRIC_SOCKET=fabric.socket, SIMFABRIC_NODE="edge")
    e.update(env or {})
    p = subprocess.run([sys.executable, os.path.join(HERE, "apidrv.py"), sf_env.plugin, case],
                       env=e, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "apidrv %s crashed (%s):\n%s\n%s\n--- daemon ---\n%s" % (
        case, p.returncode, p.stdout, p.stderr, fabric.log())
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_06_01_properties_are_complete(sf_env, fabric_factory):
    f = fabric_factory(args=["--nics", "2"])
    hello = f.request("hello", node="probe", pid=str(os.getpid()), version="1", client="cli")
    want_lat_us = float(dict(hello)["nic.0.latency_ns"]) / 1000.0
    r = drive(sf_env, f, "props")
    assert r["init"] == OK and r["devices_rc"] == OK and r["ndev"] == 2, r
    names = {d["name"] for d in r["devs"]}
    guids = {d["guid"] for d in r["devs"]}
    assert len(names) == 2 and len(guids) == 2, r
    for i, d in enumerate(r["devs"]):
        assert d["rc"] == OK
        assert d["pciPath"] is None, d  # virtual NICs: NCCL attaches them to the CPU
        assert d["ptrSupport"] == 1, d  # host memory only, for now
        # the ideal fabric's documented NIC (scenarios/README.md): 200 Gb/s on the host path
        # (this process loads no CUDA), and the daemon's own latency figure for it
        assert d["maxRecvs"] >= 8 and d["speed"] == 200000, d
        assert d["latency"] == pytest.approx(want_lat_us, abs=1e-3), (d, want_lat_us)
        assert 0 < d["maxP2pBytes"] <= 1 << 40 and 0 < d["maxCollBytes"] <= 1 << 40, d
        assert d["netDeviceType"] == 0 and d["netDeviceVersion"] == 0, d
        assert d["vndevs"] == 1 and d["vdevs"][0] == i, d
        assert d["maxMultiRequestSize"] == 1 and d["railId"] == -1 and d["planeId"] == -1, d
        assert d["regIsGlobal"] in (0, 1) and d["forceFlush"] == 0 and d["port"] >= 0, d
        assert d["maxComms"] > 0, d


def test_06_02_a_corrupt_handle_is_invalid_usage(sf_env, fabric):
    r = drive(sf_env, fabric, "bad_magic")
    assert r["rc"] == INVALID_USAGE and r["seconds"] < 1, r


def test_06_03_a_handle_of_another_daemon_is_invalid_usage(sf_env, fabric):
    r = drive(sf_env, fabric, "other_instance")
    assert r["rc"] == INVALID_USAGE and r["seconds"] < 1, r


def test_06_04_connect_to_an_unknown_listener_fails_in_bounded_time(sf_env, fabric_factory):
    f = fabric_factory(args=["--connect-wait-ms", "300"])
    r = drive(sf_env, f, "unknown_listener")
    assert r["rc"] not in (OK, "hang"), r
    assert 0.25 < r["seconds"] < 5, r
    assert "ECONNREFUSED" in f.log() or "refused" in f.log(), f.log()


def test_06_05_accept_times_out_with_the_plugins_own_timeout(sf_env, fabric):
    r = drive(sf_env, fabric, "accept_timeout", env={"SIMFABRIC_CONNECT_TIMEOUT_MS": "400"})
    assert r["rc"] not in (OK, "hang"), r
    assert 0.35 < r["seconds"] < 5, r


def test_06_06_gpu_memory_is_refused_host_memory_registers(sf_env, fabric):
    r = drive(sf_env, fabric, "regmr")
    assert r["host"] == OK and r["dereg"] == OK, r
    assert r["cuda"] == INVALID_USAGE, r
    assert r["close"] == [OK, OK] and r["finalize"] == OK, r


def test_06_07_requests_always_written(sf_env, fabric):
    r = drive(sf_env, fabric, "request_always_written")
    assert r["isend_rc"] == OK and r["isend_req_null"], r
    assert r["irecv_rc"] == OK and r["irecv_req"] != "hint", r
    assert r["test_rc"] == OK and r["done_written"], r
    assert r["close"] == [OK, OK] and r["finalize"] == OK, r


def test_06_08_a_post_after_the_peer_closed_succeeds_and_fails_at_test(sf_env, fabric):
    # as on an RC queue pair (and NCCL's Socket transport): the post takes, the completion fails
    r = drive(sf_env, fabric, "post_after_peer_close")
    assert len(r["rounds"]) == 10, r
    for one in r["rounds"]:
        assert one["isend"] == OK and one["isend_test"] == REMOTE, one
        assert one["irecv"] == OK and one["irecv_test"] == REMOTE, one
        assert [one[k] for k in ("close_recv", "close_send", "close_send2", "close_recv2")] == \
            [OK] * 4, one
    assert r["again_irecv"] == OK and r["again_isend"] == OK, r
    assert r["again_done"] == ["done", "done"], r
    assert r["close"] == [OK, OK] and r["finalize"] == OK, r


def test_06_08b_posting_threads_survive_the_peer_closing_under_them(sf_env, fabric):
    # multi-threaded, as NCCL's proxy threads post while a peer tears down: a sending thread
    # and a receiving thread each have a request pending when the far end closes, then post
    # three more; every post takes and every test fails with the peer's error, in bounded time
    r = drive(sf_env, fabric, "post_after_peer_close_threads")
    assert len(r["rounds"]) == 10, r
    for one in r["rounds"]:
        assert one["joined"], one  # no thread hung
        assert one["close_far"] == [OK, OK] and one["close_near"] == [OK, OK], one
        for side in ("send", "recv"):
            assert one[side] == [[OK, REMOTE]] * 4, (side, one)
    assert r["again"] == [OK, OK] and r["again_done"] == ["done", "done"], r
    assert r["close"] == [OK, OK] and r["finalize"] == OK, r


def test_06_09_a_send_completes_while_its_receiver_is_not_testing(sf_env, fabric):
    # RC: the NIC acknowledges without the receiving host; on the host path the receive agent
    # (plugin/agent.h) does the receiver's part. 1 MiB, never a call on the receiving side for
    # 300 ms: with the agent the send is done well before (the bound: a loaded 2-core machine
    # gets 100 ms for 16 slots and its wakeups); without it, only once the receiver tests.
    on = drive(sf_env, fabric, "send_without_receiver", env={"SIMFABRIC_RECV_AGENT": "on"})
    assert on["irecv"] == OK and on["isend"] == OK, on
    assert on["send_done_s"] is not None and on["send_done_s"] < 0.1, on
    assert on["recv"] == "done" and on["send"] == "done" and on["exact"], on
    off = drive(sf_env, fabric, "send_without_receiver", env={"SIMFABRIC_RECV_AGENT": "off"})
    sys.stderr.write("\nsend completion while the receiver does not test: %.1f ms with the "
                     "agent, %s without\n" % (on["send_done_s"] * 1e3, "not done in 300 ms"
                                              if off["send_done_s"] is None else
                                              "%.1f ms" % (off["send_done_s"] * 1e3)))
    assert off["send_done_s"] is None, off  # the control: the agent is what does it
    assert off["recv"] == "done" and off["send"] == "done" and off["exact"], off
    assert on["close"] == off["close"] == [OK, OK], (on, off)


RELOAD = r'''
import ctypes as C, _ctypes, json, os, sys
V, P = C.c_void_p, C.POINTER
version = int(sys.argv[2])
res = []
for round_ in range(2):
    # a fresh copy each round: RTLD_LOCAL, then dlclose, as NCCL loads and unloads a plugin
    lib = C.CDLL(sys.argv[1], mode=os.RTLD_LOCAL)
    base = C.addressof(C.c_void_p.in_dll(lib, "ncclNetPlugin_v%d" % version))
    slots = (V * 20).from_address(base)
    # v8..v10 share the first slots: name, init, devices, getProperties, listen;
    # init(logFunction) until v9, init(logFunction, profFunction) in v10
    if version >= 10:
        init = C.CFUNCTYPE(C.c_int, V, V)(slots[1])
        rc = init(None, None)
    else:
        init = C.CFUNCTYPE(C.c_int, V)(slots[1])
        rc = init(None)
    listen = C.CFUNCTYPE(C.c_int, C.c_int, V, P(V))(slots[4])
    handle = (C.c_char * 128)()
    lc = V()
    lrc = listen(0, handle, C.byref(lc)) if rc == 0 else -1
    res.append({"init": rc, "listen": lrc})
    # the listenComm is leaked (NCCL does this after an aborted setup); v8..v10 have no finalize
    h = lib._handle
    del lib, init, listen, slots
    _ctypes.dlclose(h)
print(json.dumps(res))
'''


@pytest.mark.parametrize("version", [8, 9, 10], ids=["v8", "v9", "v10"])
def test_06_20_reload_after_a_leaked_listen_comm(sf_env, fabric, version):
    """v8..v10 have no finalize: a copy unloaded with a listenComm still open must still let
    the next copy in the same process say hello (the daemon would refuse a second session)."""
    env = dict(os.environ, **fabric.env_vars())
    cp = subprocess.run([sys.executable, "-c", RELOAD, sf_env.plugin, str(version)],
                        capture_output=True, text=True, timeout=60, env=env)
    assert cp.returncode == 0, cp.stderr + fabric.log()
    res = json.loads(cp.stdout.strip().splitlines()[-1])
    assert res == [{"init": 0, "listen": 0}, {"init": 0, "listen": 0}], (res, fabric.log())
