# SPDX-License-Identifier: MIT
"""profdrv.py - drive the test profiler (build/libnccl-profiler-simfabric-check.so,
tools/profcheck/profcheck.c) the way NCCL 2.28.9 does, from Python (ctypes), with no GPU.

Run as a script in a child process (the library keeps process-wide totals, and a crash must not
take pytest down):
    python3 profdrv.py PROFILER CASE [NET_PLUGIN]
The profiler writes its summary where SIMFABRIC_PROFCHECK_OUT says; this prints one JSON object
with what the case did. Cases:
  events  every kind of event: simfabric's, IB's, Socket's and an unknown type's net events, paired
  misuse  NULL arguments, unknown event types, no context, bad simfabric descriptors, a second Stop,
          a Stop of a handle never given, an event never stopped
  env     init and finalize only (for SIMFABRIC_PROFCHECK_MASK / _OUT)
  plugin  the real net plugin NET_PLUGIN (over SIMFABRIC_SOCKET's fabric) sending and receiving,
          with NCCL's forwarding (src/plugin/profiler.cc, ncclProfilerCallback) played here: each
          Start the plugin reports becomes a NetPlugin event under a proxy step, each Stop a Stop
"""
import ctypes as C
import json
import sys

import apidrv

V = C.c_void_p
P = C.POINTER
RES = C.c_int
U64 = (1 << 64) - 1
GROUP, COLL, PROXY_STEP, NET_PLUGIN = 1 << 0, 1 << 1, 1 << 4, 1 << 7
NET_UPDATE = 21  # ncclProfilerNetPluginUpdate
SF, IB, SOCK = 0x5346 << 16, 1 << 16, 2 << 16
SEND, RECV = 1, 2


class Descr(C.Structure):  # ncclProfilerEventDescr_v5_t (tools/profcheck/ncclprof.h); the union as words
    _fields_ = [("type", C.c_uint64), ("parentObj", V), ("rank", C.c_int),
                ("u", C.c_uint64 * 11)]


class SfDescr(C.Structure):  # struct sfprof_descr_v1 (plugin/prof.h)
    _fields_ = [("kind", C.c_uint8), ("buf", C.c_uint8), ("reserved", C.c_uint16),
                ("tag", C.c_int32), ("size", C.c_uint64), ("chan", C.c_uint64),
                ("node", C.c_uint32), ("dev", C.c_uint32)]


assert C.sizeof(Descr) == 112 and Descr.u.offset == 24 and C.sizeof(SfDescr) == 32
# NCCL's logger is variadic; the fixed arguments are all a callback needs
LOGGER = C.CFUNCTYPE(None, C.c_int, C.c_ulong, C.c_char_p, C.c_int, C.c_char_p)
CALLBACK = C.CFUNCTYPE(RES, P(V), C.c_int, V, C.c_int64, V)  # ncclProfilerCallback_t


class Profiler:
    SLOTS = {"init": C.CFUNCTYPE(RES, P(V), C.c_uint64, P(C.c_int), C.c_char_p, C.c_int,
                                 C.c_int, C.c_int, V),
             "startEvent": C.CFUNCTYPE(RES, V, P(V), P(Descr)),
             "stopEvent": C.CFUNCTYPE(RES, V),
             "recordEventState": C.CFUNCTYPE(RES, V, C.c_int, V),
             "finalize": C.CFUNCTYPE(RES, V)}

    def __init__(self, path):
        self.lib = C.CDLL(path)
        slots = (V * 6).from_address(C.addressof(V.in_dll(self.lib, "ncclProfiler_v5")))
        self.name = C.cast(slots[0], C.c_char_p).value.decode()
        for i, name in enumerate(self.SLOTS, 1):
            setattr(self, name, self.SLOTS[name](slots[i]))
        self.mask = C.c_int(-1)  # NCCL's process-wide activation mask
        self.logs = []
        self.logger = LOGGER(lambda lvl, flags, f, line, fmt: self.logs.append(
            [lvl, fmt.decode()]))

    def comm(self, comm_id, rank=0):
        ctx = V()
        rc = self.init(C.byref(ctx), comm_id, C.byref(self.mask), b"profdrv", 2, 2, rank,
                       C.cast(self.logger, V))
        assert rc == 0 and ctx, rc
        return ctx

    def start(self, ctx, etype, parent=None, net_id=0, data=None):
        """startEvent; returns the handle (an int) or None."""
        d = Descr(type=etype, parentObj=parent, rank=0)
        d.u[0], d.u[1] = net_id & U64, data or 0
        h = V(0xbad)  # must be written, to NULL at least
        assert self.startEvent(ctx, C.byref(h), C.byref(d)) == 0
        return h.value

    def net(self, ctx, parent, net_id, descr=None, **kw):
        """A net plugin event; descr: an SfDescr's fields (kept alive here only: as NCCL's)."""
        sd = SfDescr(**(descr or {}))
        return self.start(ctx, NET_PLUGIN, parent, net_id, kw.get("data", C.addressof(sd)))


def sf(kind, size, buf=0, chan=5, node=1, **kw):
    return dict(kind=kind, size=size, buf=buf, chan=chan, node=node, tag=kw.get("tag", 7),
                reserved=kw.get("reserved", 0))


def case_events(p):
    a, b = p.comm(0x1111), p.comm(0x2222, rank=1)
    out = {"group": p.start(a, GROUP), "coll": p.start(a, COLL)}
    step = p.start(a, PROXY_STEP)
    hs = [p.net(a, step, SF | 1, sf(SEND, 4096)),
          p.net(a, step, SF | 1, sf(RECV, 8192, node=2)),
          p.net(a, step, SF | 1, sf(RECV, 0, buf=1, node=2)),
          p.net(a, step, IB | 1),
          p.net(b, None, SOCK | 1),
          p.net(a, step, (0x77 << 16) | 3)]
    out["record"] = p.recordEventState(hs[0], NET_UPDATE, None)
    out["stops"] = [p.stopEvent(h) for h in hs] + [p.stopEvent(step)]
    out["handles"] = len({h for h in hs if h})
    out["step"] = bool(step)
    out["finalize"] = [p.finalize(a), p.finalize(b)]
    return out


def case_misuse(p):
    a = p.comm(1)
    d = Descr(type=GROUP)
    h = V(0xbad)
    out = {"null_handle": p.startEvent(a, None, C.byref(d)),
           "null_descr": p.startEvent(a, C.byref(h), None), "null_descr_h": h.value}
    out["unknown"] = [p.start(a, t) for t in (0, 3, 1 << 20)]
    out["no_context"] = p.start(None, GROUP)
    step = p.start(a, PROXY_STEP)
    bad = [p.net(a, step, SF | 2, sf(SEND, 8)),
           p.net(a, step, SF | 1, data=0),
           p.net(a, step, SF | 1, sf(3, 8)),
           p.net(a, step, SF | 1, sf(SEND, 8, buf=1)),
           p.net(a, step, SF | 1, sf(RECV, 8, buf=8)),
           p.net(a, step, SF | 1, sf(RECV, 8, reserved=1)),
           p.net(a, step, SF | 1, sf(SEND, 1 << 41)),
           p.net(a, step, SF | 1, sf(SEND, 8, chan=0))]
    hi = p.net(a, step, (1 << 32) | SF | 1, sf(SEND, 8))  # not simfabric's: bits past 31
    out["bad_stops"] = [p.stopEvent(x) for x in bad + [hi]]
    twice = p.net(a, step, SF | 1, sf(SEND, 8))
    junk = C.create_string_buffer(16)
    out["second"] = [p.stopEvent(twice), p.stopEvent(twice), p.stopEvent(C.addressof(junk)),
                     p.stopEvent(None), p.recordEventState(None, NET_UPDATE, None)]
    p.net(a, step, SF | 1, sf(RECV, 8))  # never stopped
    out["finalize"] = [p.finalize(None), p.finalize(a)]
    return out


def case_env(p):
    return {"finalize": p.finalize(p.comm(3))}


def transfer(net, sc, rc, sizes, tags, phandle):
    """One receive of len(sizes) buffers and a send per buffer (in reverse order); done."""
    n = len(sizes)
    bufs = [C.create_string_buffer(max(1, s)) for s in sizes]
    rreq = V()
    data = (V * n)(*[C.addressof(b) for b in bufs])
    assert net.irecv(rc, n, data, (C.c_size_t * n)(*sizes), (C.c_int * n)(*tags), None,
                     (V * n)(*[phandle] * n) if phandle else None, C.byref(rreq)) == 0 and rreq
    sreqs = []
    for s, t in reversed(list(zip(sizes, tags))):
        buf, sreq = C.create_string_buffer(max(1, s)), V()
        r, _ = apidrv.poll(lambda: (net.isend(sc, buf, s, t, None, phandle, C.byref(sreq)),
                                    bool(sreq)), 20)
        assert r == 0, r
        sreqs.append((sreq, buf))
    pending = [rreq] + [q for q, _ in sreqs]

    def progress():  # test() every request not yet done: each side makes progress in test()
        done = C.c_int()
        for req in list(pending):
            rc_ = net.test(req, C.byref(done), None)
            if rc_:
                return rc_, True
            if done.value:
                pending.remove(req)
        return 0, not pending
    r, _ = apidrv.poll(progress, 20)
    assert r == 0, r


def case_plugin(p, plugin):
    ctx = p.comm(0x5f)
    step = p.start(ctx, PROXY_STEP)
    slot = C.create_string_buffer(8)  # NCCL's &sub->pHandles[i]: opaque to the plugin
    seen = {"starts": 0, "stops": 0, "null_phandle": 0, "other": 0}

    def forward(eh, etype, ph, plugin_id, ext):  # ncclProfilerCallback, with one proxy step
        if etype == 0:
            seen["starts"] += 1
            if ph != C.addressof(slot):
                seen["null_phandle" if not ph else "other"] += 1
                return 0  # NCCL would dereference it
            d = Descr(type=NET_PLUGIN, parentObj=step, rank=0)
            d.u[0], d.u[1] = plugin_id & U64, ext or 0
            p.startEvent(ctx, eh, C.byref(d))
        elif etype == 1:
            seen["stops"] += 1
            p.stopEvent(eh[0])
        else:
            seen["other"] += 1
        return 0

    cb = CALLBACK(forward)
    net = apidrv.Net(plugin, cb)
    assert net.rc_init == 0, net.rc_init
    sc, rc = apidrv.setup_pair(net)
    sizes = [8, 4096, 65536, 1 << 20]
    for s in sizes:
        transfer(net, sc, rc, [s], [0], C.addressof(slot))
    transfer(net, sc, rc, [1000, 3000], [0, 1], C.addressof(slot))  # a grouped receive
    transfer(net, sc, rc, [64], [0], None)  # bootstrap-style: no pHandle, no event
    out = {"close": [net.closeSend(sc), net.closeRecv(rc)], "net_finalize": net.finalize(net.ctx)}
    out.update(seen=seen, sends=len(sizes) + 2, send_bytes=sum(sizes) + 4000,
               recv_bufs=len(sizes) + 2, recv_bytes=sum(sizes) + 4000,
               stop_step=p.stopEvent(step), finalize=p.finalize(ctx))
    return out


if __name__ == "__main__":
    prof = Profiler(sys.argv[1])
    name = sys.argv[2]
    if name == "plugin":
        res = case_plugin(prof, sys.argv[3])
    else:
        res = {"events": case_events, "misuse": case_misuse, "env": case_env}[name](prof)
    res.update(name=prof.name, mask=prof.mask.value, logs=prof.logs)
    print(json.dumps(res))
