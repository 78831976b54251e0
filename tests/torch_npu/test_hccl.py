"""HCCL through torch.distributed on braid-acl-sim's collectives: one rank through
init_process_group('hccl'); several ranks in one process (one thread each, each its own
ProcessGroupHCCL over a shared store); and one process per rank, whose simulators exchange
the collectives' parts over braid-acl-sim's own TCP stand-in for HCCL's transport."""

import subprocess
import sys

import torch
import torch.distributed as dist

import braid_npu


def test_one_rank_through_init_process_group(tmp_path):
    dist.init_process_group(
        "hccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        t = torch.arange(8, dtype=torch.float32).npu()
        dist.all_reduce(t)
        assert torch.equal(t.cpu(), torch.arange(8, dtype=torch.float32))
        out = torch.empty(8, device="npu")
        dist.all_gather_into_tensor(out, t)
        assert torch.equal(out.cpu(), t.cpu())
        dist.broadcast(t, 0)
        dist.barrier()
        assert torch.equal(t.cpu(), torch.arange(8, dtype=torch.float32))
    finally:
        dist.destroy_process_group()


def test_several_ranks_in_one_process(run_child):
    # In a program of its own: should a collective fail, torch_npu's HCCL watchdog ends the
    # whole process, which must not take the suite with it.
    proc = run_child(
        """
        import threading, torch, torch_npu
        import torch.distributed as dist
        from torch_npu._C._distributed_c10d import ProcessGroupHCCL
        world = 4
        store = dist.HashStore()
        results, errors = [None] * world, []
        issued = threading.Barrier(world, timeout=120)

        def rank_main(rank):
            try:
                torch.npu.set_device(rank)
                pg = ProcessGroupHCCL(dist.PrefixStore("threads", store), rank, world, ProcessGroupHCCL.Options())
                t = torch.full((16,), float(rank + 1), device=f"npu:{rank}")
                ints = torch.tensor([rank + 1, 2**62], dtype=torch.int64, device=f"npu:{rank}")
                parts = [torch.empty(2, dtype=torch.int32, device=f"npu:{rank}") for _ in range(world)]
                mine = torch.tensor([rank, -rank], dtype=torch.int32, device=f"npu:{rank}")
                works = [pg.allreduce([t]), pg.allreduce([ints]), pg.allgather([parts], [mine])]
                # Every rank issues before any waits: a wait holds the interpreter's lock, so
                # a rank still to issue could not run until the simulator's collective timeout.
                issued.wait()
                for work in works:
                    work.wait()
                results[rank] = [t.cpu().tolist(), ints.cpu().tolist(), [p.cpu().tolist() for p in parts]]
            except Exception as e:  # reported with its rank
                errors.append((rank, repr(e)))

        threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        braid_npu.result({"errors": errors, "results": results})
        """
    )
    done = braid_npu.child_result(proc)
    assert done["errors"] == []
    # 4 · 2^62 wraps around int64 to 0.
    gathered = [[r, -r] for r in range(4)]
    assert done["results"] == [[[10.0] * 16, [10, 0], gathered]] * 4


def test_a_rank_later_than_the_collective_timeout_is_named_and_stops_the_process(run_child):
    # Rank 3 issues its all-reduce long after the others synchronize: their waits fail after
    # the collective timeout naming rank 3, and torch_npu's watchdog ends the process, as it
    # does on a real NPU when HCCL_EXEC_TIMEOUT runs out. The timeout is CANN's own variable,
    # in seconds, which braid-acl-sim honours when its own is unset.
    proc = run_child(
        """
        import threading, time, torch, torch_npu
        import torch.distributed as dist
        from torch_npu._C._distributed_c10d import ProcessGroupHCCL
        store, joined = dist.HashStore(), threading.Barrier(4)

        def rank_main(rank):
            torch.npu.set_device(rank)
            pg = ProcessGroupHCCL(dist.PrefixStore("late", store), rank, 4, ProcessGroupHCCL.Options())
            t = torch.ones(16, device=f"npu:{rank}")
            pg.allreduce([t]).wait()
            joined.wait()
            if rank == 3:
                time.sleep(30)
            pg.allreduce([t]).wait()
            t.cpu()

        threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        """,
        env={braid_npu.COLLECTIVE_TIMEOUT_ENV: None, "HCCL_EXEC_TIMEOUT": "1"},
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "which rank(s) 3 have not issued" in proc.stderr, proc.stderr
    assert "the collective timeout is 1s" in proc.stderr, proc.stderr


RANK_PROGRAM = """
import braid_npu
import os, sys, torch, torch_npu
import torch.distributed as dist
rank = int(sys.argv[1])
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=sys.argv[2], rank=rank, world_size=2)
t = torch.full((32,), float(rank + 1), device="npu")
dist.all_reduce(t)
out = torch.empty(64, device="npu")
dist.all_gather_into_tensor(out, t)
mine, theirs = torch.full((8,), float(rank + 10), device="npu"), torch.empty(8, device="npu")
if rank == 0:
    dist.send(mine, 1)
    dist.recv(theirs, 1)
else:
    dist.recv(theirs, 0)
    dist.send(mine, 0)
# HCCL's integer types (torch_npu itself refuses float64 all-reduce): integer sums wrap in their type, max compares as the type does, the
# list form of all_gather pads each tensor with aclnnConstantPadNd.
i32 = torch.tensor([rank + 1, 2**31 - 1], dtype=torch.int32, device="npu")
dist.all_reduce(i32)
u8 = torch.tensor([100 * (rank + 1)], dtype=torch.uint8, device="npu")
dist.all_reduce(u8)
i64 = torch.tensor([2**40 * (rank + 1), -rank], dtype=torch.int64, device="npu")
dist.all_reduce(i64, op=dist.ReduceOp.MAX)
i16 = torch.tensor([rank * 1000 + 7], dtype=torch.int16, device="npu")
dist.broadcast(i16, 1)
parts = [torch.empty(3, dtype=torch.int64, device="npu") for _ in range(2)]
dist.all_gather(parts, torch.tensor([rank, 2**50, -7], dtype=torch.int64, device="npu"))
braid_npu.result([
    t.cpu().tolist() == [3.0] * 32,
    out.cpu().tolist() == [3.0] * 64,
    theirs.cpu().tolist() == [float(11 - rank)] * 8,
    i32.cpu().tolist() == [3, -2],
    u8.cpu().tolist() == [44],
    i64.cpu().tolist() == [2**41, 0],
    i16.cpu().tolist() == [1007],
    [p.cpu().tolist() for p in parts] == [[0, 2**50, -7], [1, 2**50, -7]],
])
dist.destroy_process_group()
"""


def test_one_process_per_rank(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_PROGRAM)
    env = braid_npu.child_env()
    init = f"tcp://127.0.0.1:{braid_npu.free_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), init],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        done = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        assert braid_npu.child_result(done) == [True] * 8


DYING_RANK_PROGRAM = """
import braid_npu
import os, sys, time, torch, torch_npu
import torch.distributed as dist
rank = int(sys.argv[1])
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=sys.argv[2], rank=rank, world_size=2)
t = torch.ones(8, dtype=torch.int32, device="npu")
dist.all_reduce(t)
torch.npu.synchronize()
if rank == 1:
    os._exit(3)  # dies before its second all-reduce
start = time.time()
try:
    dist.all_reduce(t)
    t.cpu()
    braid_npu.result("no error")
except RuntimeError as e:
    braid_npu.result([time.time() - start, str(e)])
"""


def test_a_rank_that_dies_fails_its_peers_naming_it(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(DYING_RANK_PROGRAM)
    env = braid_npu.child_env({braid_npu.COLLECTIVE_TIMEOUT_ENV: "60000"})
    init = f"tcp://127.0.0.1:{braid_npu.free_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), init],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert procs[1].returncode == 3
    done = subprocess.CompletedProcess(procs[0].args, procs[0].returncode, *outs[0])
    elapsed, message = braid_npu.child_result(done)
    # At once, not after the minute of the collective timeout, naming the rank.
    assert elapsed < 30, elapsed
    assert "rank 1 closed the connection" in message, message
