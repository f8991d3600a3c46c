# SPDX-License-Identifier: MIT
"""The GPU data path (plugin/gpu.h): SIMFABRIC_GPU's modes and errors on any machine; on a GPU,
NCCL's GPUDirect path over one-sided copies, every collective exact at 2 and 4 ranks, and the
host path still taken when it is switched off."""
import json
import os
import re
import sys

import pytest

import sflaunch


# ---- the switch, on any machine (the CPU harness loads no CUDA) -------------------------------

# Every GPU setting, read at init: a bad value fails init with one line naming it and what it
# may be (variable, value, the message's text).
BAD_SETTINGS = [
    ("SIMFABRIC_GPU", "yes please", "is not one of auto, on, off"),
    ("SIMFABRIC_GPU_COPY_CONTEXT", "mine", "is not one of auto, own, app"),
    ("SIMFABRIC_GPU_STREAMS", "0", "is not a number from 1 to 8"),
    ("SIMFABRIC_GPU_STREAMS", "9", "is not a number from 1 to 8"),
    ("SIMFABRIC_GPU_STREAMS", "two", "is not a number from 1 to 8"),
    ("SIMFABRIC_GPU_STREAMS", "3x", "is not a number from 1 to 8"),
    ("SIMFABRIC_GPU_SMALL", "fast", "is neither off nor kernel"),
    ("SIMFABRIC_GPU_SMALL_MAX", "0", "is not a byte count from 1 to 65536"),
    ("SIMFABRIC_GPU_SMALL_MAX", "65537", "is not a byte count from 1 to 65536"),
    ("SIMFABRIC_GPU_SMALL_MAX", "-1", "is not a byte count from 1 to 65536"),
    ("SIMFABRIC_GPU_SMALL_MAX", "16K", "is not a byte count from 1 to 65536"),
    ("SIMFABRIC_GPU_BATCH_MAX", "0", "is not a number from 1 to 32"),
    ("SIMFABRIC_GPU_BATCH_MAX", "33", "is not a number from 1 to 32"),
    ("SIMFABRIC_GPU_BATCH_MAX", "x", "is not a number from 1 to 32"),
    ("SIMFABRIC_GPU_ISSUER", "poster", "is neither thread nor sender"),
    ("SIMFABRIC_GPU_ARM", "on", "is not one of whole, pieces, off"),
    ("SIMFABRIC_GPU_ARM_AHEAD_US", "0", "is not a number of microseconds from 1 to 1000000"),
    ("SIMFABRIC_GPU_ARM_AHEAD_US", "1000001",
     "is not a number of microseconds from 1 to 1000000"),
    ("SIMFABRIC_GPU_ARM_AHEAD_US", "50us", "is not a number of microseconds from 1 to 1000000"),
    ("SIMFABRIC_LL128", "yes", "is not one of auto, on, off"),
]


@pytest.mark.parametrize("name,value,says", BAD_SETTINGS,
                         ids=["%s=%s" % (n, v) for n, v, _ in BAD_SETTINGS])
def test_20_01_a_malformed_setting_fails_init_naming_it(harness, name, value, says):
    r = harness(nranks=2, tests="connect", env={name: value}, timeout=60)
    assert r.rc == 1, r.report()
    assert "%s='%s' %s" % (name, value, says) in r.stderr, r.report()


def test_20_02_on_without_a_usable_cuda_fails_init_saying_why(harness):
    r = harness(nranks=2, tests="connect", env={"SIMFABRIC_GPU": "on"}, timeout=60)
    if r.rc == 0:
        pytest.skip("CUDA is usable in this process here: nothing to refuse")
    assert r.rc == 1, r.report()
    assert "SIMFABRIC_GPU=on, but" in r.stderr, r.report()


def test_20_03_auto_without_cuda_in_the_process_is_the_host_path(harness):
    # the harness never loads CUDA: auto must not load it either, and GPU memory is refused
    r = harness(nranks=2, tests="mr", env={"SIMFABRIC_GPU": "auto"}, timeout=60)
    r.check_ok()
    assert "GPU memory needs the GPU data path; the GPU data path is off (the process has " \
           "not loaded CUDA)" in r.stderr, r.report()


# ---- on a GPU ------------------------------------------------------------------------------

def nccl_job(paths, tmp_path, nodes, gpu, tag, sizes="--min 8 --max 64M --factor 8", extra=(),
             colls="all", env=None, iters=3, warmup=1):
    out = str(tmp_path / ("%s-%%r.json" % tag))
    cmd = [paths.nccljob, "--coll", colls, "--iters", str(iters), "--warmup", str(warmup),
           "--check", "2", "--blocking", "1", "--json", out] + sizes.split() + list(extra)
    env = dict({"SIMFABRIC_GPU": gpu, "NCCL_DEBUG": "INFO",
                "NCCL_DEBUG_SUBSYS": "INIT,NET,TUNING"}, **(env or {}))
    r = sflaunch.launch(cmd, nodes, echo=False, timeout=300, paths=paths, env=env)
    res = None
    if os.path.exists(out.replace("%r", "0")):
        with open(out.replace("%r", "0")) as f:
            res = json.load(f)
    return r, res


def channel_paths(r):
    """NCCL's channel lines' transports over simfabric, e.g. {'NET/simfabric/0/GDRDMA'}."""
    return set(re.findall(r"via (NET/simfabric\S*)", r.logs(limit=1 << 22)))


@pytest.mark.gpu
@pytest.mark.parametrize("nodes", [2, 4])
def test_20_10_gpudirect_every_collective_exact(nccl_gpu, tmp_path, nodes):
    r, res = nccl_job(nccl_gpu, tmp_path, nodes, "on", "gpu%d" % nodes)
    report = "%s\n%s" % (r.summary(), r.logs()[-8000:])
    assert res is not None and res["status"] == "ok", report
    assert all(x["ok"] and x["wrong"] == 0 for x in res["results"]), res["results"]
    assert len(res["results"]) >= 40, res["results"]
    logs = r.logs(limit=1 << 22)
    assert "GPU on (one-sided copies" in logs, report
    paths = channel_paths(r)
    # p2p connections say ".../GDRDMA/Shared" (NCCL's shared buffers): GPUDirect all the same
    assert paths and all("/GDRDMA" in p for p in paths), (paths, report)
    assert "has not completed after" not in logs, report
    # a NIC next to the GPU gets LL128 (plugin/ncclenv.h), and NCCL used it for some size
    assert "set NCCL_PROTO=LL,LL128,Simple" in logs, report
    assert re.search(r"Bytes -> Algo \w+ proto LL128", logs), report


@pytest.mark.gpu
@pytest.mark.parametrize("nodes", [2, 4])
def test_20_10b_ll128_alone_is_exact(nccl_gpu, tmp_path, nodes):
    """LL128 forced for every size: its 128-byte lines, each with its flag, are written by the
    copy engine as a NIC writes them, and NCCL's kernel reads a line once its flag is there; a
    line seen before all of it landed would show as a wrong element here."""
    r, res = nccl_job(nccl_gpu, tmp_path, nodes, "on", "ll128-%d" % nodes,
                      sizes="--min 8 --max 16M --factor 4",
                      env={"NCCL_PROTO": "LL128"}, iters=10, warmup=10)
    report = "%s\n%s" % (r.summary(), r.logs()[-8000:])
    assert res is not None and res["status"] == "ok", report
    assert all(x["ok"] and x["wrong"] == 0 for x in res["results"]), res["results"]
    assert len(res["results"]) >= 40, res["results"]
    logs = r.logs(limit=1 << 22)
    assert "NCCL_PROTO is set (LL128): yours stands" in logs, report
    assert re.search(r"Bytes -> Algo \w+ proto LL128", logs), report


@pytest.mark.gpu
def test_20_11_off_takes_the_host_path_and_stays_exact(nccl_gpu, tmp_path):
    r, res = nccl_job(nccl_gpu, tmp_path, 2, "off", "host", sizes="--min 8 --max 16M --factor 16")
    report = "%s\n%s" % (r.summary(), r.logs()[-8000:])
    assert res is not None and res["status"] == "ok", report
    assert all(x["ok"] and x["wrong"] == 0 for x in res["results"]), res["results"]
    logs = r.logs(limit=1 << 22)
    assert "GPU off (SIMFABRIC_GPU=off)" in logs, report
    paths = channel_paths(r)
    assert paths and not any("GDRDMA" in p for p in paths), (paths, report)


@pytest.mark.gpu
@pytest.mark.parametrize("buffers", ["cuda", "nccl"])
def test_20_12_buffers_registered_with_nccl_stay_exact(nccl_gpu, tmp_path, buffers):
    """ncclCommRegister of the job's own buffers (cudaMalloc: a legacy IPC export; ncclMemAlloc:
    a cuMem POSIX fd): every result exact, no copy stalled. Whether NCCL hands them to regMr is
    NCCL's choice: NCCL 2.28.9 on one H200 did not for these collectives (every regMr was of its
    own buffers, 8 MiB at most), so the test reports it rather than requiring it; the export of
    any buffer that does arrive is tested in plugin/test/test_gpu_export.c."""
    r, res = nccl_job(nccl_gpu, tmp_path, 2, "on", "reg-" + buffers,
                      sizes="--min 8 --max 64M --factor 64", colls="sendrecv,alltoall,allreduce",
                      extra=["--buffers", buffers, "--register", "1"])
    report = "%s\n%s" % (r.summary(), r.logs()[-8000:])
    assert res is not None and res["status"] == "ok", report
    assert all(x["ok"] and x["wrong"] == 0 for x in res["results"]), res["results"]
    logs = r.logs(limit=1 << 22)
    sizes = [int(m) for m in re.findall(r"regMr of (\d+) bytes of GPU memory", logs)]
    # the job's buffers hold 64 MiB or more; NCCL's own (per protocol, per channel) are smaller
    sys.stderr.write("\n%s buffers: %d GPU regMr calls, the largest %d bytes: the job's own "
                     "buffers %s the plugin\n" % (buffers, len(sizes), max(sizes or [0]),
                                                  "reached" if any(n >= 64 << 20 for n in sizes)
                                                  else "did not reach"))
    assert "has not completed after" not in logs, report


LATENT = """name: latent
seed: 1
fabric:
  defaults:
    link: {rate_gbps: 100, latency_ns: 250000}
  nodes: {count: 4, name: "node{i}"}
  switches:
    - {name: sw0}
  links:
    - ends: [[node0, node1, node2, node3], sw0]
"""


@pytest.mark.gpu
@pytest.mark.parametrize("gpu,proto,arm", [
    ("on", "LL", "off"), ("on", "LL128", "off"), ("off", "LL", "off"),
    ("on", "LL", "pieces"), ("on", "LL128", "pieces"), ("on", "LL128", "whole")])
def test_20_13_ll_lines_land_no_earlier_than_the_model(nccl_gpu, tmp_path, gpu, proto, arm):
    """NCCL's LL and LL128 kernels read their lines as they land (each line carries its flag),
    not once the proxy's receive completes, so the plugin must not place them before the model's
    delivery time (NCCL marks such receives: plugin/data.c). In a ring allreduce of 4 ranks on
    one channel, every rank's chunk carries data, and each element reaches the last rank through
    6 hops, each waiting for the one before: over 2 x 250 us links, no operation is under 3 ms on
    average (timed one by one; an even number of them: rank 0's operations i - 1 and i together
    hold the 6 hops from its start of i - 1 to rank 2's end of it, and from rank 2's start of i to
    rank 0's end, never less than 12). At 8 B most chunks are empty, their 0-byte messages carry
    no dependency, and the chain is shorter: the host path ran 2963 us there, every byte at or
    after its arrival (trace). When the lines landed at once, the chain collapsed: 1.09 ms on an
    H100 at 8 B (3.05 ms since, on the GPU path). With SIMFABRIC_GPU_ARM, LL128's held pieces
    (from GPU memory) are armed ahead and let go at their arrivals, and land no earlier either;
    LL's (from host memory) never are."""
    import simfabric_pytest
    iters = 10
    assert iters % 2 == 0  # the bound holds for pairs of operations
    r, res = simfabric_pytest.nccljob(
        nccl_gpu, tmp_path, "latent-%s-%s-%s" % (gpu, proto, arm),
        ["--coll", "allreduce", "--sizes", "64K,256K", "--warmup", "3", "--iters", str(iters),
         "--timing", "each", "--check", "2"], nodes=4, scenario_text=LATENT, timeout=120,
        env={"SIMFABRIC_GPU": gpu, "SIMFABRIC_GPU_ARM": arm, "NCCL_PROTO": proto,
             "NCCL_ALGO": "Ring",
             "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1",
             "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,TUNING"})
    report = "%s\n%s" % (r.summary(), r.logs()[-8000:])
    assert res is not None and res["status"] == "ok", report
    assert all(x["ok"] and x["wrong"] == 0 for x in res["results"]), res["results"]
    logs = r.logs(limit=1 << 22)
    assert re.search(r"Bytes -> Algo RING proto %s\b" % proto, logs, re.I), report
    chain_us = 2 * (4 - 1) * 2 * 250  # hops of the ring, each over two 250 us links
    for x in res["results"]:
        sys.stderr.write("\n%s %s %d B: %.1f us an operation (the chain: %d us)" % (
            gpu, proto, x["bytes"], x["time_us"], chain_us))
    for x in res["results"]:
        assert x["time_us"] >= chain_us, (x, report)
    # armed only where asked, and only LL128's (from GPU memory); none landed early (above)
    counts = [(int(a), int(b)) for a, b in
              re.findall(r"(\d+) GPU copies, (\d+) of them armed ahead", logs)]
    if gpu == "on":
        armed = sum(b for _, b in counts)
        assert counts and (armed > 0) == (proto == "LL128" and arm != "off"), (counts, report)
