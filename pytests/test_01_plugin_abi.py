# SPDX-License-Identifier: MIT
"""The plugin library: what it exports, and what NCCL finds at those symbols."""
import ctypes
import subprocess


def test_01_01_exports_only_the_plugin_tables(sf_env):
    out = subprocess.run(["nm", "-D", "--defined-only", sf_env.plugin], capture_output=True,
                         text=True, check=True).stdout
    syms = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    assert syms == ["ncclNetPlugin_v%d" % v for v in (10, 11, 12, 8, 9)], out
    kinds = {line.split()[1] for line in out.splitlines() if line.strip()}
    assert kinds <= {"D", "R"}, "the tables must be data objects, not functions:\n" + out


def test_01_02_every_table_is_named_simfabric(sf_env):
    lib = ctypes.CDLL(sf_env.plugin, mode=ctypes.RTLD_LOCAL)
    for v in (8, 9, 10, 11, 12):
        table = ctypes.c_void_p.in_dll(lib, "ncclNetPlugin_v%d" % v)
        name = ctypes.cast(table.value, ctypes.c_char_p).value
        assert name == b"simfabric", "ncclNetPlugin_v%d.name = %r" % (v, name)
        # Every mandatory slot is set (NCCL calls them without a NULL check).
        addr = ctypes.addressof(table)
        nslots = {8: 19, 9: 20, 10: 20, 11: 22, 12: 22}[v]
        slots = (ctypes.c_void_p * nslots).from_address(addr)
        optional = {"v8": {8, 17, 18}, "v9": {8, 17, 18, 19}, "v10": {8, 17, 18, 19},
                    "v11": {8, 17, 18, 19, 21}, "v12": {8, 17, 18, 19, 21}}["v%d" % v]
        for i in range(1, nslots):
            if i not in optional:
                assert slots[i], "ncclNetPlugin_v%d slot %d is NULL" % (v, i)


def test_01_03_loads_without_cuda_or_nccl(sf_env):
    out = subprocess.run(["ldd", sf_env.plugin], capture_output=True, text=True).stdout
    for lib in ("libcuda", "libcudart", "libnccl", "libevent"):
        assert lib not in out, "the plugin must not link %s:\n%s" % (lib, out)
