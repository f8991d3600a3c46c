#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_collectives.py - a torch.distributed (NCCL backend) check and timing job.

Run one process per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as torchrun or
`simfabric launch` set them). Every collective is checked exactly: inputs are small integers, so
float sums are exact in any order. Rank 0 prints one JSON object on stdout.
"""
import argparse
import json
import os
import sys
import time


def main():
    if "--recipe" in sys.argv:  # a recovery recipe (a job's args:): tools/torch_recipes.py
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import torch_recipes
        return torch_recipes.main(sys.argv[1:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,4096,1048576,67108864",
                    help="message sizes in bytes (per rank buffer)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--collectives",
                    default="all_reduce,broadcast,all_gather,reduce_scatter,all_to_all,send_recv")
    a = ap.parse_args()

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ngpu = torch.cuda.device_count()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % ngpu)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    sizes = [int(s) for s in a.sizes.split(",")]
    colls = a.collectives.split(",")
    results, errors = [], []

    def timed(fn):
        for _ in range(a.warmup):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(a.iters):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        ts.sort()
        return ts[len(ts) // 2]

    for nbytes in sizes:
        n = max(1, nbytes // 4)
        n -= n % world if n >= world else 0
        n = max(n, world)
        base = torch.arange(n, device=dev, dtype=torch.float32) % 251
        for c in colls:
            ok, t = True, None
            if c == "all_reduce":
                x = base + rank
                dist.all_reduce(x)
                want = base * world + world * (world - 1) / 2
                ok = torch.equal(x, want)
                buf = base.clone()
                t = timed(lambda: dist.all_reduce(buf))
                busbw = 2 * (world - 1) / world * n * 4 / t
            elif c == "broadcast":
                x = base + rank
                dist.broadcast(x, src=world - 1)
                ok = torch.equal(x, base + (world - 1))
                t = timed(lambda: dist.broadcast(x, src=0))
                busbw = n * 4 / t
            elif c == "all_gather":
                x = base[: n // world] + rank
                out = torch.empty(n // world * world, device=dev)
                dist.all_gather_into_tensor(out, x)
                want = torch.cat([base[: n // world] + r for r in range(world)])
                ok = torch.equal(out, want)
                t = timed(lambda: dist.all_gather_into_tensor(out, x))
                busbw = (world - 1) / world * out.numel() * 4 / t
            elif c == "reduce_scatter":
                x = base + rank
                out = torch.empty(n // world, device=dev)
                dist.reduce_scatter_tensor(out, x)
                chunk = (base * world + world * (world - 1) / 2)[rank * (n // world):(rank + 1) * (n // world)]
                ok = torch.equal(out, chunk)
                t = timed(lambda: dist.reduce_scatter_tensor(out, x))
                busbw = (world - 1) / world * n * 4 / t
            elif c == "all_to_all":
                x = base + 1000 * rank
                out = torch.empty_like(x)
                dist.all_to_all_single(out, x)
                k = n // world
                want = torch.cat([base[rank * k:(rank + 1) * k] + 1000 * r for r in range(world)])
                ok = torch.equal(out, want)
                t = timed(lambda: dist.all_to_all_single(out, x))
                busbw = (world - 1) / world * n * 4 / t
            elif c == "send_recv":
                x = base + rank
                y = torch.empty_like(x)
                peer_to, peer_from = (rank + 1) % world, (rank - 1) % world

                def sr():
                    ops = [dist.P2POp(dist.isend, x, peer_to), dist.P2POp(dist.irecv, y, peer_from)]
                    for w in dist.batch_isend_irecv(ops):
                        w.wait()
                sr()
                torch.cuda.synchronize()
                ok = torch.equal(y, base + peer_from)
                t = timed(sr)
                busbw = n * 4 / t
            else:
                print("unknown collective %s" % c, file=sys.stderr)
                sys.exit(2)
            ok_all = torch.tensor([1 if ok else 0], device=dev)
            dist.all_reduce(ok_all, op=dist.ReduceOp.MIN)
            ok = bool(ok_all.item())
            results.append({"collective": c, "bytes": n * 4, "ok": ok, "time_us": t * 1e6,
                            "busbw_GBps": busbw / 1e9})
            if not ok:
                errors.append("%s %d bytes: wrong result" % (c, n * 4))
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"world": world, "results": results, "errors": errors,
                          "net": os.environ.get("NCCL_NET", ""),
                          "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
                          "torch": torch.__version__}))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
