# SPDX-License-Identifier: MIT
"""apidrv.py - drive ncclNetPlugin_v12 directly from Python (ctypes), for edge cases.

Run as a script in a child process (so a crash or a hang cannot take pytest down):
    python3 apidrv.py PLUGIN CASE
prints one JSON object with what happened. The logger is NULL (the plugin stays silent).
"""
import ctypes as C
import json
import os
import sys
import threading
import time

V = C.c_void_p
P = C.POINTER
RES = C.c_int
SLOTS = ["name", "init", "devices", "getProperties", "listen", "connect", "accept", "regMr",
         "regMrDmaBuf", "deregMr", "isend", "irecv", "iflush", "test", "closeSend", "closeRecv",
         "closeListen", "getDeviceMr", "irecvConsumed", "makeVDevice", "finalize", "setNetAttr"]
PROTO = {
    "init": C.CFUNCTYPE(RES, P(V), C.c_uint64, V, V, V),
    "devices": C.CFUNCTYPE(RES, P(C.c_int)),
    "getProperties": C.CFUNCTYPE(RES, C.c_int, V),
    "listen": C.CFUNCTYPE(RES, V, C.c_int, V, P(V)),
    "connect": C.CFUNCTYPE(RES, V, C.c_int, V, P(V), P(V)),
    "accept": C.CFUNCTYPE(RES, V, P(V), P(V)),
    "regMr": C.CFUNCTYPE(RES, V, V, C.c_size_t, C.c_int, P(V)),
    "deregMr": C.CFUNCTYPE(RES, V, V),
    "isend": C.CFUNCTYPE(RES, V, V, C.c_size_t, C.c_int, V, V, P(V)),
    "irecv": C.CFUNCTYPE(RES, V, C.c_int, P(V), P(C.c_size_t), P(C.c_int), P(V), P(V), P(V)),
    "test": C.CFUNCTYPE(RES, V, P(C.c_int), P(C.c_int)),
    "closeSend": C.CFUNCTYPE(RES, V),
    "closeRecv": C.CFUNCTYPE(RES, V),
    "closeListen": C.CFUNCTYPE(RES, V),
    "finalize": C.CFUNCTYPE(RES, V),
}


class Props(C.Structure):  # ncclNetProperties_v12_t, offsets checked in plugin/ncclnet.h
    _fields_ = [("name", C.c_char_p), ("pciPath", C.c_char_p), ("guid", C.c_uint64),
                ("ptrSupport", C.c_int), ("regIsGlobal", C.c_int), ("forceFlush", C.c_int),
                ("speed", C.c_int), ("port", C.c_int), ("latency", C.c_float),
                ("maxComms", C.c_int), ("maxRecvs", C.c_int), ("netDeviceType", C.c_int),
                ("netDeviceVersion", C.c_int), ("vndevs", C.c_int), ("vdevs", C.c_int * 8),
                ("maxP2pBytes", C.c_size_t), ("maxCollBytes", C.c_size_t),
                ("maxMultiRequestSize", C.c_int), ("railId", C.c_int16), ("planeId", C.c_int16)]


assert C.sizeof(Props) == 128 and Props.maxP2pBytes.offset == 104


class Net:
    def __init__(self, path, profiler=None):
        """profiler: an ncclProfilerCallback_t (a ctypes function) handed to init, or None."""
        self.lib = C.CDLL(path)
        base = C.addressof(C.c_void_p.in_dll(self.lib, "ncclNetPlugin_v12"))
        slots = (V * 22).from_address(base)
        for i, name in enumerate(SLOTS):
            if name in PROTO and slots[i]:
                setattr(self, name, PROTO[name](slots[i]))
        self.ctx = V()
        cfg = C.c_int(-1)
        self.profiler = profiler  # kept alive as long as the plugin may call it
        self.rc_init = self.init(C.byref(self.ctx), 42, C.addressof(cfg), None,
                                 C.cast(profiler, V) if profiler else None)


def poll(fn, deadline_s):
    """Call fn() until it returns (rc, done) with done or rc != 0; returns (rc, seconds)."""
    t0 = time.monotonic()
    while True:
        rc, done = fn()
        if rc or done:
            return rc, time.monotonic() - t0
        if time.monotonic() - t0 > deadline_s:
            return "hang", time.monotonic() - t0
        time.sleep(0.001)


def setup_pair(net):
    h = (C.c_char * 128)()
    lc, sc, rc_ = V(), V(), V()
    assert net.listen(net.ctx, 0, h, C.byref(lc)) == 0 and lc
    r = {"sc": 0, "rc": 0}

    def step():
        if not sc:
            r["sc"] = net.connect(net.ctx, 0, h, C.byref(sc), None)
        if not rc_:
            r["rc"] = net.accept(lc, C.byref(rc_), None)
        return (r["sc"] or r["rc"]), bool(sc and rc_)
    rc, secs = poll(step, 20)
    assert rc == 0, rc
    net.closeListen(lc)
    return sc, rc_


def case(net, name):
    out = {"init": net.rc_init}
    if name == "props":
        n = C.c_int()
        out["devices_rc"] = net.devices(C.byref(n))
        out["ndev"] = n.value
        out["devs"] = []
        for d in range(n.value):
            p = Props()
            C.memset(C.byref(p), 0x5a, C.sizeof(p))  # NCCL does not zero it
            rc = net.getProperties(d, C.byref(p))
            out["devs"].append({k: (getattr(p, k).decode() if isinstance(getattr(p, k), bytes)
                                    else list(getattr(p, k)) if k == "vdevs" else getattr(p, k))
                                for k, _ in Props._fields_} | {"rc": rc})
    elif name in ("bad_magic", "other_instance", "unknown_listener"):
        h = (C.c_char * 128)()
        lc = V()
        assert net.listen(net.ctx, 0, h, C.byref(lc)) == 0
        raw = bytearray(h.raw)
        if name == "bad_magic":
            raw[0] ^= 0xff
        elif name == "other_instance":
            raw[16] ^= 0xff
        else:
            raw[24] ^= 0xff  # a listener id nobody registered
        h2 = (C.c_char * 128).from_buffer_copy(bytes(raw))
        sc = V()
        rc, secs = poll(lambda: (net.connect(net.ctx, 0, h2, C.byref(sc), None), bool(sc)), 60)
        out.update(rc=rc, seconds=secs)
        net.closeListen(lc)
    elif name == "accept_timeout":
        h = (C.c_char * 128)()
        lc, rcm = V(), V()
        assert net.listen(net.ctx, 0, h, C.byref(lc)) == 0
        rc, secs = poll(lambda: (net.accept(lc, C.byref(rcm), None), bool(rcm)), 60)
        out.update(rc=rc, seconds=secs)
        net.closeListen(lc)
    elif name == "regmr":
        sc, rcm = setup_pair(net)
        buf = C.create_string_buffer(1 << 16)
        mh = V()
        out["host"] = net.regMr(sc, buf, 1 << 16, 1, C.byref(mh))
        out["dereg"] = net.deregMr(sc, mh)
        mh2 = V()
        out["cuda"] = net.regMr(sc, buf, 1 << 16, 2, C.byref(mh2))
        out["close"] = [net.closeSend(sc), net.closeRecv(rcm)]
    elif name == "request_always_written":
        sc, rcm = setup_pair(net)
        buf = C.create_string_buffer(64)
        req = V(0x1)  # NCCL's optional-completion hint, and garbage for the send slot
        sreq = V(0xdead)
        out["isend_rc"] = net.isend(sc, buf, 8, 0, None, None, C.byref(sreq))
        out["isend_req_null"] = sreq.value is None  # no receive posted yet: would block
        data = (V * 1)(C.addressof(buf))
        sizes = (C.c_size_t * 1)(64)
        tags = (C.c_int * 1)(0)
        out["irecv_rc"] = net.irecv(rcm, 1, data, sizes, tags, None, None, C.byref(req))
        out["irecv_req"] = "hint" if req.value == 1 else ("null" if req.value is None else "real")
        done = C.c_int(7)
        out["test_rc"] = net.test(req, C.byref(done), None)
        out["done_written"] = done.value in (0, 1)
        out["close"] = [net.closeSend(sc), net.closeRecv(rcm)]
    elif name == "post_after_peer_close":
        # RC semantics: posting on a connection whose peer has closed succeeds; test() fails
        buf = C.create_string_buffer(64)
        data = (V * 1)(C.addressof(buf))
        sizes = (C.c_size_t * 1)(64)
        tags = (C.c_int * 1)(0)
        out["rounds"] = []
        for _ in range(10):
            sc, rcm = setup_pair(net)
            one = {"close_recv": net.closeRecv(rcm)}
            one["isend"], one["isend_test"] = post_until(
                net, lambda r: net.isend(sc, buf, 8, 0, None, None, r))
            one["close_send"] = net.closeSend(sc)
            sc, rcm = setup_pair(net)
            one["close_send2"] = net.closeSend(sc)
            one["irecv"], one["irecv_test"] = post_until(
                net, lambda r: net.irecv(rcm, 1, data, sizes, tags, None, None, r))
            one["close_recv2"] = net.closeRecv(rcm)
            out["rounds"].append(one)
        # and the same devices connect again and carry a message
        sc, rcm = setup_pair(net)
        rreq, sreq = V(), V()
        out["again_irecv"] = net.irecv(rcm, 1, data, sizes, tags, None, None, C.byref(rreq))
        out["again_isend"] = net.isend(sc, buf, 8, 0, None, None, C.byref(sreq))
        # the receive first: on the host path a send completes when its receiver has tested
        out["again_done"] = [wait_done(net, rreq), wait_done(net, sreq)]
        out["close"] = [net.closeSend(sc), net.closeRecv(rcm)]
    elif name == "post_after_peer_close_threads":
        # the same, with the posting threads running while the peer closes under them: one
        # thread sends on one pair, another receives on a second; this thread closes the far
        # ends. No post may fail; each thread's pending request, and every post after, fails
        # at test() with the peer's error; 10 rounds, then the devices carry a message again
        out["rounds"] = []
        for _ in range(10):
            p1, p2 = setup_pair(net), setup_pair(net)
            res = {"send": [], "recv": []}

            def worker(key, post):
                bufs = [C.create_string_buffer(64) for _ in range(4)]
                for b in bufs:  # one pending when the close comes, then three after it
                    data = (V * 1)(C.addressof(b))
                    sizes = (C.c_size_t * 1)(64)
                    tags = (C.c_int * 1)(0)
                    res[key].append(post_until(net, lambda r: post(b, data, sizes, tags, r)))

            ts = threading.Thread(target=worker, args=(
                "send", lambda b, d, s_, t, r: net.isend(p1[0], b, 8, 0, None, None, r)))
            tr = threading.Thread(target=worker, args=(
                "recv", lambda b, d, s_, t, r: net.irecv(p2[1], 1, d, s_, t, None, None, r)))
            ts.start()
            tr.start()
            time.sleep(0.005)  # both have posted and are testing
            one = {"close_far": [net.closeRecv(p1[1]), net.closeSend(p2[0])]}
            ts.join(30)
            tr.join(30)
            one["joined"] = not ts.is_alive() and not tr.is_alive()
            one["send"], one["recv"] = res["send"], res["recv"]
            one["close_near"] = [net.closeSend(p1[0]), net.closeRecv(p2[1])]
            out["rounds"].append(one)
        sc, rcm = setup_pair(net)
        buf = C.create_string_buffer(64)
        data = (V * 1)(C.addressof(buf))
        sizes = (C.c_size_t * 1)(64)
        tags = (C.c_int * 1)(0)
        rreq, sreq = V(), V()
        out["again"] = [net.irecv(rcm, 1, data, sizes, tags, None, None, C.byref(rreq)),
                        net.isend(sc, buf, 8, 0, None, None, C.byref(sreq))]
        out["again_done"] = [wait_done(net, rreq), wait_done(net, sreq)]
        out["close"] = [net.closeSend(sc), net.closeRecv(rcm)]
    elif name == "send_without_receiver":
        # the receiving side is never called for 300 ms: does the send complete meanwhile?
        n = 1 << 20
        src = C.create_string_buffer(bytes(range(256)) * (n // 256), n)
        dst = C.create_string_buffer(n)
        sc, rcm = setup_pair(net)
        rreq, sreq = V(), V()
        data = (V * 1)(C.addressof(dst))
        sizes = (C.c_size_t * 1)(n)
        tags = (C.c_int * 1)(0)
        out["irecv"] = net.irecv(rcm, 1, data, sizes, tags, None, None, C.byref(rreq))
        t0 = time.monotonic()
        out["isend"] = net.isend(sc, src, n, 0, None, None, C.byref(sreq))
        done = C.c_int(0)
        out["send_done_s"] = None
        while time.monotonic() - t0 < 0.3:
            if net.test(sreq, C.byref(done), None) != 0:
                break
            if done.value:
                out["send_done_s"] = time.monotonic() - t0
                break
        out["recv"] = wait_done(net, rreq)
        out["send"] = "done" if done.value else wait_done(net, sreq)
        out["exact"] = dst.raw == src.raw
        out["close"] = [net.closeSend(sc), net.closeRecv(rcm)]
    elif name == "chdir_after_init":
        os.chdir("/")  # as a training script moves to its output directory
        h = (C.c_char * 128)()
        lc = V()
        out["listen"] = net.listen(net.ctx, 0, h, C.byref(lc))
        if out["listen"] == 0:
            net.closeListen(lc)
            sc, rcm = setup_pair(net)
            out["close"] = [net.closeSend(sc), net.closeRecv(rcm)]
    out["finalize"] = net.finalize(net.ctx)
    return out


def post_until(net, post, tries=100000):
    """Post until a request comes back (NULL is back-pressure); then test it once it resolves.
    Returns (the post's last rc, the test's rc) or (rc, None) if no request ever came."""
    req = V()
    rc = None
    for _ in range(tries):
        rc = post(C.byref(req))
        if rc != 0 or req.value is not None:
            break
    if rc != 0 or req.value is None:
        return rc, None
    done = C.c_int(0)
    for _ in range(tries):
        trc = net.test(req, C.byref(done), None)
        if trc != 0 or done.value:
            return rc, trc
    return rc, "pending"


def wait_done(net, req, tries=1000000):
    done = C.c_int(0)
    for _ in range(tries):
        rc = net.test(req, C.byref(done), None)
        if rc != 0:
            return rc
        if done.value:
            return "done"
    return "pending"


if __name__ == "__main__":
    net = Net(sys.argv[1])
    print(json.dumps(case(net, sys.argv[2])))
