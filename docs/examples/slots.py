#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slots.py - which ncclNetPlugin_vN tables a plugin exports, and which of their slots are NULL.

    python3 docs/examples/slots.py PLUGIN

Loads the library the way NCCL does (RTLD_NOW | RTLD_LOCAL) and calls nothing in it, so no daemon
is needed. Slot lists per version: plugin/ncclnet.h (from NCCL's src/include/plugin/net/net_v8.h
to net_v12.h); which slots NCCL checks for NULL before calling: docs/net-plugin-guide.md section
11. Exits 1 if a slot NCCL calls unchecked is NULL.
"""
import ctypes as C
import os
import sys

V8 = ["init", "devices", "getProperties", "listen", "connect", "accept", "regMr", "regMrDmaBuf",
      "deregMr", "isend", "irecv", "iflush", "test", "closeSend", "closeRecv", "closeListen",
      "getDeviceMr", "irecvConsumed"]
SLOTS = {8: V8, 9: V8 + ["makeVDevice"], 10: V8 + ["makeVDevice"],
         11: V8 + ["makeVDevice", "finalize", "setNetAttr"],
         12: V8 + ["makeVDevice", "finalize", "setNetAttr"]}
OPTIONAL = {"regMrDmaBuf", "getDeviceMr", "irecvConsumed", "makeVDevice", "setNetAttr"}


def main():
    lib = C.CDLL(os.path.abspath(sys.argv[1]), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    bad = 0
    for v in (12, 11, 10, 9, 8):
        try:
            base = C.addressof(C.c_void_p.in_dll(lib, "ncclNetPlugin_v%d" % v))
        except ValueError:
            print("ncclNetPlugin_v%d: not exported" % v)
            continue
        names = SLOTS[v]
        tab = (C.c_void_p * (1 + len(names))).from_address(base)
        null = [n for i, n in enumerate(names, 1) if not tab[i]]
        unchecked = [n for n in null if n not in OPTIONAL]
        bad += len(unchecked)
        print("ncclNetPlugin_v%d: name %r, %d slots; NULL: %s%s" % (
            v, C.c_char_p(tab[0]).value.decode(), len(names), ", ".join(null) or "none",
            "  <-- NCCL calls %s unchecked" % ", ".join(unchecked) if unchecked else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
