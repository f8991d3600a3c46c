#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""walkthrough.py - one connection through ncclNetPlugin_v12, call by call, in NCCL's order.

    python3 docs/examples/walkthrough.py [PLUGIN]     (default build/libnccl-net-simfabric.so)

A single process plays both ranks: it listens, "ships" the 128-byte handle to itself (NCCL does
this through its bootstrap), connects and accepts without blocking, registers host buffers, sends
one message and receives it the way NCCL's proxy does (the 0x1 hint preloaded, NULL requests
retried, only the oldest request tested), then tears down in NCCL's order. Every call is printed
with its result. The logger is NULL, so the plugin itself stays silent. simfabric's plugin needs
a daemon (SIMFABRIC_SOCKET); standard library only.
"""
import ctypes as C
import os
import sys
import time

V, P, RES = C.c_void_p, C.POINTER, C.c_int
NAMES = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError",
         3: "ncclInternalError", 4: "ncclInvalidArgument", 5: "ncclInvalidUsage",
         6: "ncclRemoteError", 7: "ncclInProgress"}
NCCL_PTR_HOST, OPTIONAL_RECV_COMPLETION = 0x1, 0x1
# ncclNet_v12_t: name, then 21 function pointers (slot index = position in the struct).
SLOTS = {
    "init": (1, C.CFUNCTYPE(RES, P(V), C.c_uint64, V, V, V)),
    "devices": (2, C.CFUNCTYPE(RES, P(C.c_int))),
    "getProperties": (3, C.CFUNCTYPE(RES, C.c_int, V)),
    "listen": (4, C.CFUNCTYPE(RES, V, C.c_int, V, P(V))),
    "connect": (5, C.CFUNCTYPE(RES, V, C.c_int, V, P(V), P(V))),
    "accept": (6, C.CFUNCTYPE(RES, V, P(V), P(V))),
    "regMr": (7, C.CFUNCTYPE(RES, V, V, C.c_size_t, C.c_int, P(V))),
    "deregMr": (9, C.CFUNCTYPE(RES, V, V)),
    "isend": (10, C.CFUNCTYPE(RES, V, V, C.c_size_t, C.c_int, V, V, P(V))),
    "irecv": (11, C.CFUNCTYPE(RES, V, C.c_int, P(V), P(C.c_size_t), P(C.c_int), P(V), P(V),
                              P(V))),
    "iflush": (12, C.CFUNCTYPE(RES, V, C.c_int, P(V), P(C.c_int), P(V), P(V))),
    "test": (13, C.CFUNCTYPE(RES, V, P(C.c_int), P(C.c_int))),
    "closeSend": (14, C.CFUNCTYPE(RES, V)),
    "closeRecv": (15, C.CFUNCTYPE(RES, V)),
    "closeListen": (16, C.CFUNCTYPE(RES, V)),
    "finalize": (20, C.CFUNCTYPE(RES, V)),
}


class Props(C.Structure):  # ncclNetProperties_v12_t (128 bytes; maxP2pBytes at 104)
    _fields_ = [("name", C.c_char_p), ("pciPath", C.c_char_p), ("guid", C.c_uint64),
                ("ptrSupport", C.c_int), ("regIsGlobal", C.c_int), ("forceFlush", C.c_int),
                ("speed", C.c_int), ("port", C.c_int), ("latency", C.c_float),
                ("maxComms", C.c_int), ("maxRecvs", C.c_int), ("netDeviceType", C.c_int),
                ("netDeviceVersion", C.c_int), ("vndevs", C.c_int), ("vdevs", C.c_int * 8),
                ("maxP2pBytes", C.c_size_t), ("maxCollBytes", C.c_size_t),
                ("maxMultiRequestSize", C.c_int), ("railId", C.c_int16), ("planeId", C.c_int16)]


assert C.sizeof(Props) == 128 and Props.maxP2pBytes.offset == 104


def say(call, rc, extra=""):
    print("%-62s -> %s%s" % (call, NAMES.get(rc, rc), ("  " + extra) if extra else ""))
    if rc != 0:
        sys.exit("walkthrough: %s failed" % call)


def ptr(v):
    return "NULL" if not v.value else "0x%x" % v.value


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/libnccl-net-simfabric.so"
    os.environ.setdefault("SIMFABRIC_NODE", "walkthrough")  # the plugin reads it at first init
    lib = C.CDLL(os.path.abspath(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    table = (V * 22).from_address(C.addressof(C.c_void_p.in_dll(lib, "ncclNetPlugin_v12")))
    net = {k: proto(table[i]) for k, (i, proto) in SLOTS.items()}
    print("plugin %s: ncclNetPlugin_v12.name = %r" % (path, C.c_char_p(table[0]).value.decode()))

    # 1. init: once per communicator; the config is on NCCL's stack (the plugin copies it).
    ctx, cfg = V(), C.c_int(-1)
    say("init(&ctx, commId, {trafficClass=-1}, logger, profiler)",
        net["init"](C.byref(ctx), 0x5eed, C.addressof(cfg), None, None))
    ndev = C.c_int()
    say("devices(&ndev)", net["devices"](C.byref(ndev)), "ndev=%d" % ndev.value)
    p = Props()
    C.memset(C.byref(p), 0xA5, C.sizeof(p))  # NCCL does not zero it: every field must be set
    say("getProperties(0, &props)", net["getProperties"](0, C.byref(p)),
        "name=%s ptrSupport=0x%x maxRecvs=%d speed=%d Mbps maxP2pBytes=%d" % (
            p.name.decode(), p.ptrSupport, p.maxRecvs, p.speed, p.maxP2pBytes))

    # 2. listen fills the 128-byte handle; NCCL sends it to the peer over its bootstrap.
    handle = (C.c_char * 128)()
    lcomm = V()
    say("listen(ctx, 0, handle, &listenComm)",
        net["listen"](ctx, 0, handle, C.byref(lcomm)), "handle starts %r" % handle.raw[:8])

    # 3. connect and accept never block: NCCL's service thread calls both again and again.
    scomm, rcomm, calls = V(), V(), 0
    deadline = time.monotonic() + 20
    while not (scomm.value and rcomm.value):
        calls += 1
        if not scomm.value:
            rc = net["connect"](ctx, 0, handle, C.byref(scomm), None)
            if rc:
                say("connect(ctx, 0, handle, &sendComm, NULL)", rc)
        if not rcomm.value:
            rc = net["accept"](lcomm, C.byref(rcomm), None)
            if rc:
                say("accept(listenComm, &recvComm, NULL)", rc)
        if time.monotonic() > deadline:
            sys.exit("walkthrough: connect/accept did not finish in 20 s")
        time.sleep(0.0002)  # NCCL spins; a short nap keeps this example off the CPU
    say("connect(...) / accept(...), retried while NULL", 0,
        "sendComm and recvComm after %d pass(es)" % calls)
    say("closeListen(listenComm)   [NCCL: right after accept]", net["closeListen"](lcomm))

    # 4. Register the buffers NCCL allocated (pinned host memory when ptrSupport is HOST).
    sbuf, rbuf = C.create_string_buffer(4096), C.create_string_buffer(4096)
    msg = b"hello, fabric"
    C.memmove(sbuf, msg, len(msg))
    smh, rmh = V(), V()
    say("regMr(sendComm, sbuf, 4096, NCCL_PTR_HOST, &mh)",
        net["regMr"](scomm, sbuf, 4096, NCCL_PTR_HOST, C.byref(smh)))
    say("regMr(recvComm, rbuf, 4096, NCCL_PTR_HOST, &mh)",
        net["regMr"](rcomm, rbuf, 4096, NCCL_PTR_HOST, C.byref(rmh)))

    # 5. The data path. NCCL never clears a send slot: a stale value must be overwritten.
    sreq = V(0xdead)
    rc = net["isend"](scomm, sbuf, len(msg), 7, smh, None, C.byref(sreq))
    say("isend(sendComm, sbuf, %d, tag=7, ..., &req)  [no irecv yet]" % len(msg), rc,
        "request=%s%s" % (ptr(sreq), " (would block: call again later)" if not sreq.value else ""))
    data, sizes, tags = (V * 1)(C.cast(rbuf, V)), (C.c_size_t * 1)(4096), (C.c_int * 1)(7)
    mhs = (V * 1)(rmh)
    rreq = V(OPTIONAL_RECV_COMPLETION)  # NCCL preloads 0x1 for single LL/LL128 receives
    say("irecv(recvComm, n=1, [rbuf], [4096], [tag=7], ..., &req=0x1)",
        net["irecv"](rcomm, 1, data, sizes, tags, mhs, None, C.byref(rreq)),
        "request=%s (a real request, not the hint)" % ptr(rreq))
    tries = 0
    while not sreq.value:  # NCCL retries a NULL send with the same buffer and size
        tries += 1
        say("isend(...) again", net["isend"](scomm, sbuf, len(msg), 7, smh, None,
                                              C.byref(sreq)), "request=%s" % ptr(sreq))
        if tries > 1000:
            sys.exit("walkthrough: isend kept would-blocking")

    # 6. test: *done always written; sizes only once done (int sizes, or NULL). Like NCCL's
    # progress thread, each pass tests the oldest request of every comm: here the send
    # completes only once the receiver has taken the data (as an RC ACK would).
    reqs = {"send": sreq, "recv": rreq}
    done = {k: C.c_int(0) for k in reqs}
    got = {k: (C.c_int * 64)() for k in reqs}
    passes = 0
    while not all(d.value for d in done.values()):
        passes += 1
        for what, req in reqs.items():
            if not done[what].value:
                rc = net["test"](req, C.byref(done[what]), got[what])
                if rc:
                    say("test(%s request, &done, sizes)" % what, rc)
                if done[what].value:
                    say("test(%s request, &done, sizes)" % what, rc,
                        "done=1 sizes[0]=%d (pass %d)" % (got[what][0], passes))
        if passes > 100000:
            sys.exit("walkthrough: the requests did not complete")
    print("received %r" % rbuf.value)

    # 7. iflush is for GPU memory written by the NIC (GDR); for host memory: nothing to do.
    freq, isizes = V(0xdead), (C.c_int * 1)(len(msg))
    say("iflush(recvComm, 1, [rbuf], [%d], ..., &req)" % len(msg),
        net["iflush"](rcomm, 1, data, isizes, mhs, C.byref(freq)),
        "request=%s (NULL: nothing to flush, NCCL skips test)" % ptr(freq))

    # 8. Teardown in NCCL's order: deregister, close the comms, then finalize the ctx.
    say("deregMr(sendComm, mh)", net["deregMr"](scomm, smh))
    say("deregMr(recvComm, mh)", net["deregMr"](rcomm, rmh))
    say("closeSend(sendComm)", net["closeSend"](scomm))
    say("closeRecv(recvComm)", net["closeRecv"](rcomm))
    say("finalize(ctx)", net["finalize"](ctx))


if __name__ == "__main__":
    main()
