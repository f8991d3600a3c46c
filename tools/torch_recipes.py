#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_recipes.py - recovery recipes for torch.distributed (NCCL backend), run as program
torch of a scenario's job (`args: [--recipe NAME, ...]`: tools/torch_collectives.py hands them
here), one process per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.

  shrink    lose a node and carry on: steps of all_reduce and all_gather_into_tensor, each
            checked exactly; when a collective fails or stalls (--stall-s) the survivors meet
            in the TCP store (rank 0 hosts it: losing rank 0 is fatal), agree whom they lost
            and where to resume, abort the old group's communicator and go on in a new group
            of the survivors (new_group(use_local_synchronization=True): a fresh
            ncclCommInitRank among them, nothing asked of the lost rank). Rank 0 prints one
            JSON line: results, errors, shrinks.
  watchdog  a training loop of all_reduce with PyTorch's NCCL watchdog set short (--timeout-s)
            and the flight recorder on: when a peer freezes, the watchdog times out, dumps
            every rank's trace into the run directory (TORCH_NCCL_DEBUG_INFO_TEMP_FILE) and
            ends the process.

Exit status: 0 every step exact, 1 wrong data, 3 a failure that could not be mended.
"""
import argparse
import json
import os
import sys
import time
from datetime import timedelta


def say(rank, msg):
    print("torch_recipes[rank %d]: %s" % (rank, msg), file=sys.stderr, flush=True)


def run_dir():
    res = os.environ.get("SIMFABRIC_RESULT")
    return os.path.dirname(res) if res else os.getcwd()


# ---- shrink ------------------------------------------------------------------------------------

def agree(store, rank, members, rnd, failed_step, grace_s, poll_s=0.05, meanwhile=None):
    """A loss round in the store (any object with set, check, get, wait(keys, timedelta)):
    every survivor checks in with the step it failed at; rank 0 waits grace_s for them (a
    lost rank never comes), then says who is in and where to resume: the earliest step any
    survivor failed at (a later one may have finished it; steps are deterministic, so running
    one again is harmless). meanwhile() runs once this rank has checked in (the old group's
    abort: however long it takes, it does not delay the check-in rank 0 waits for). (verdict,
    lost), or (None, []) when nobody was lost: fatal."""
    store.set("loss%d/open" % rnd, "1")  # wakes the survivors still polling a collective
    store.set("loss%d/here/%d" % (rnd, rank), str(failed_step))
    if meanwhile:
        meanwhile()
    if rank == 0:
        end = time.monotonic() + grace_s
        here = {}
        while time.monotonic() < end and len(here) < len(members):
            for m in members:
                key = "loss%d/here/%d" % (rnd, m)
                if m not in here and store.check([key]):
                    here[m] = int(store.get(key))
            time.sleep(poll_s)
        store.set("loss%d/verdict" % rnd, json.dumps(
            {"members": sorted(here), "step": min(here.values())}))
    store.wait(["loss%d/verdict" % rnd], timedelta(seconds=grace_s + 30))
    v = json.loads(store.get("loss%d/verdict" % rnd))
    lost = [m for m in members if m not in v["members"]]
    return (v, lost) if lost else (None, [])


def work_error(work):
    """The error a finished work holds, or None: Work.exception() where torch binds it."""
    fn = getattr(work, "exception", None)
    try:
        return fn() if fn else None
    except Exception:  # not bound for this work type: wait() is the only word
        return None


class Lost(Exception):
    """A collective failed or stalled: step says where."""

    def __init__(self, step, why):
        super().__init__(why)
        self.step, self.why = step, why


def shrink(a):
    # the watchdog must not end the process on the collective error we mean to survive: the
    # script polls its works itself, with its own bound (--stall-s)
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
    # nor dump on it: on an H100 the flight recorder's dump, which one survivor's error asks of
    # every rank through the store, held each survivor's abort 60 s (one dump's bound), and
    # then again for every collective of the old group that timed out meanwhile, until the job's
    # timeout. The heartbeat monitor, which ends a process whose watchdog looks stuck, goes too.
    for name in ("TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_ENABLE_MONITORING",
                 "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"):
        os.environ.setdefault(name, "0")
    import torch
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          rank == 0, timeout=timedelta(seconds=a.store_timeout_s))
    # no device_id: no communicator is made for the default group (nothing runs on it), and
    # each new_group makes its own with ncclCommInitRank instead of splitting one (a split
    # would wait for the lost rank). The work runs in a group of its own, which can be
    # aborted without taking the default group (and the store new_group needs) with it.
    dist.init_process_group("nccl", store=dist.PrefixStore("world", store), rank=rank,
                            world_size=world, timeout=timedelta(seconds=a.stall_s * 4))
    members = list(range(world))  # the group's ranks, as RANKs

    def make_group():
        return dist.new_group(ranks=members, use_local_synchronization=True,
                              timeout=timedelta(seconds=a.stall_s * 4))

    group = make_group()
    n = max(1, a.bytes // 4)
    results, errors, shrinks = {}, [], []

    def wait(work, step, what):
        end = time.monotonic() + a.stall_s
        while not work.is_completed():
            if store.check(["loss%d/open" % len(shrinks)]):
                raise Lost(step, "a peer opened a loss round during %s" % what)
            if time.monotonic() > end:
                raise Lost(step, "%s did not complete in %g s" % (what, a.stall_s))
            time.sleep(0.005)
        err = work_error(work)
        if err is None:
            try:
                work.wait()
            except Exception as e:  # NCCL's error, through the work
                err = e
        if err is not None:
            raise Lost(step, "%s failed: %s" % (what, str(err).splitlines()[0][:300]))

    def one_step(step):
        gsize, grank = len(members), members.index(rank)
        k = step + 1
        x = torch.full((n,), float(k * (grank + 1)), device=dev)
        t0 = time.perf_counter()
        wait(dist.all_reduce(x, group=group, async_op=True), step, "all_reduce")
        out = torch.empty(n * gsize, device=dev)
        y = torch.arange(n, device=dev, dtype=torch.float32) % 251 + 1000 * grank + k
        wait(dist.all_gather_into_tensor(out, y, group=group, async_op=True), step, "all_gather")
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) * 1e6
        ok_r = torch.equal(x, torch.full((n,), float(k * gsize * (gsize + 1) // 2), device=dev))
        base = torch.arange(n, device=dev, dtype=torch.float32) % 251 + k
        ok_g = torch.equal(out, torch.cat([base + 1000 * g for g in range(gsize)]))
        return [{"collective": "all_reduce", "bytes": n * 4, "ok": ok_r, "time_us": t / 2,
                 "step": step, "nranks": gsize},
                {"collective": "all_gather", "bytes": n * 4 * gsize, "ok": ok_g,
                 "time_us": t / 2, "step": step, "nranks": gsize}]

    def abort(g):
        # ncclCommAbort of the old communicator: its kernels stop spinning on the lost peer
        for how, fn in (("_abort_process_group", lambda: c10d._abort_process_group(g)),
                        ("ProcessGroup.abort", lambda: g.abort()),
                        ("backend abort", lambda: g._get_backend(dev).abort())):
            try:
                fn()
                return how
            except Exception:  # not in this torch: the next way
                continue
        return "none (this torch has no abort: the old communicator is left)"

    def all_there(step):
        """A wrong result is a data error only if every member finished the step: with
        TORCH_NCCL_ASYNC_ERROR_HANDLING=0 a work that failed can look completed (its error
        unread), and its output is then whatever arrived before the peer died."""
        end = time.monotonic() + a.stall_s
        keys = ["done%d/%d/%d" % (len(shrinks), step, m) for m in members]
        while not store.check(keys):
            if store.check(["loss%d/open" % len(shrinks)]) or time.monotonic() > end:
                raise Lost(step, "a wrong result, and not every rank finished the step")
            time.sleep(0.01)

    step = 0
    while step < a.steps:
        try:
            done = one_step(step)
            # every step, so that a rank with a wrong result can ask who finished it
            store.set("done%d/%d/%d" % (len(shrinks), step, rank), "1")
            if not all(r["ok"] for r in done):
                all_there(step)
            for res in done:
                results[(step, res["collective"])] = res
            step += 1
        except Lost as e:
            say(rank, "step %d: %s; waiting for the survivors (round %d)" % (
                e.step, e.why, len(shrinks)))
            # the old communicator aborted as soon as this rank has checked in (while it lives
            # its works keep timing out in the watchdog), before the wait for the others
            aborted = []
            v, lost = agree(store, rank, members, len(shrinks), e.step, a.grace_s,
                            meanwhile=lambda: aborted.append(abort(group)))
            how = aborted[0]
            if v is None or rank not in v["members"]:
                say(rank, "no rank was lost (or this one was left out): cannot carry on")
                errors.append("step %d: %s" % (e.step, e.why))
                break
            members = v["members"]
            group = make_group()
            shrinks.append({"step": v["step"], "lost": lost, "nranks": len(members),
                            "abort": how})
            say(rank, "lost rank(s) %s at step %d (%s); old communicator aborted by %s; now "
                "rank %d of %d; running step %d again" % (
                    ", ".join(map(str, lost)), e.step, e.why, how, members.index(rank),
                    len(members), v["step"]))
            step = v["step"]
    res = [results[k] for k in sorted(results)]
    wrong = [r for r in res if not r["ok"]]
    errors += ["step %d %s on %d ranks: wrong result" % (r["step"], r["collective"],
                                                          r["nranks"]) for r in wrong]
    if shrinks and not errors:
        say(rank, "survivor: %d shrink(s), rank %d of %d at the end; %d step(s), every result "
            "exact here" % (len(shrinks), members.index(rank), len(members), a.steps))
    if rank == 0:
        print(json.dumps({"world": world, "recipe": "shrink", "results": res, "errors": errors,
                          "shrinks": shrinks, "torch": torch.__version__}), flush=True)
    sys.stdout.flush()
    # no destroy_process_group: the world group's communicator was aborted, and a clean
    # teardown of one that waited on a dead peer can hang
    os._exit(1 if wrong else 3 if errors else 0)


# ---- watchdog ----------------------------------------------------------------------------------

def watchdog(a):
    rank = int(os.environ["RANK"])
    # the flight recorder: on, dumped on a watchdog timeout, into the run directory
    os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")  # its name from torch 2.7
    # on a timeout the watchdog dumps, then ends the process (no ncclCommAbort, which a frozen
    # peer could keep waiting)
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
    os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    os.environ.setdefault("TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                          os.path.join(run_dir(), "nccl_trace_rank_"))
    os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE",  # its name from torch 2.7
                          os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"])
    import torch
    import torch.distributed as dist

    world = int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev,
                            timeout=timedelta(seconds=a.timeout_s))
    x = torch.ones(max(1, a.bytes // 4), device=dev)
    say(rank, "training: all_reduce of %d B per step, watchdog timeout %g s, traces to %s*" % (
        x.numel() * 4, a.timeout_s, os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]))
    t0 = time.monotonic()
    for step in range(a.steps):
        x.fill_(1.0)
        dist.all_reduce(x)
        torch.cuda.synchronize()  # a frozen peer keeps this rank here until the watchdog
        if not torch.equal(x, torch.full_like(x, float(world))):
            say(rank, "step %d: wrong result" % step)
            os._exit(1)
        if step % 100 == 0:
            say(rank, "step %d after %.1f s" % (step, time.monotonic() - t0))
    say(rank, "every step done: the watchdog never fired (was no peer frozen?)")
    dist.destroy_process_group()
    sys.exit(0)


RECIPES = {"shrink": shrink, "watchdog": watchdog}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", required=True, choices=sorted(RECIPES))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--bytes", type=int, default=1 << 20, help="per rank buffer")
    ap.add_argument("--stall-s", type=float, default=10.0,
                    help="shrink: a collective this late is a failure")
    ap.add_argument("--grace-s", type=float, default=5.0,
                    help="shrink: how long rank 0 waits for the survivors to check in")
    ap.add_argument("--store-timeout-s", type=float, default=120.0)
    ap.add_argument("--timeout-s", type=float, default=10.0,
                    help="watchdog: the process group's timeout (PyTorch's watchdog)")
    # what tools/torch_collectives.py passes on from the job: (sizes, collectives, iters,
    # warmup) the recipe decides those itself
    ap.add_argument("--sizes"), ap.add_argument("--collectives")
    ap.add_argument("--iters"), ap.add_argument("--warmup")
    a = ap.parse_args(argv)
    RECIPES[a.recipe](a)


if __name__ == "__main__":
    main()
