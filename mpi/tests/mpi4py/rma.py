"""mpi4py on onesided: MPI.Win with fences, locks, accumulate and get; the separate model's
obsolete value in the window's own memory (asked for with an info key), the unified model's
(the default, as MPICH's) fresh one; collectives and messages of Python objects.
Run under `onesided mpiexec -n N python3 rma.py` (N >= 2); prints one line per rank."""

import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert size >= 2, "run it on 2 ranks or more"

memory = array.array("q", [0] * size)
separate = MPI.Info.Create()
separate.Set("onesided_memory_model", "separate")
win = MPI.Win.Create(memory, 8, separate, comm)
separate.Free()
assert win.Get_attr(MPI.WIN_MODEL) == MPI.WIN_SEPARATE

# a fence epoch: every rank puts rank + 1 into its own slot at rank 0
win.Fence()
win.Put(array.array("q", [rank + 1]), 0, target=(rank, 1, MPI.INT64_T))
win.Fence()
if rank == 0:
    assert list(memory) == [r + 1 for r in range(size)], list(memory)

# passive target: every rank adds 10 to slot 0 of rank 0 under a shared lock
win.Lock(0, MPI.LOCK_SHARED)
win.Accumulate(array.array("q", [10]), 0, target=(0, 1, MPI.INT64_T), op=MPI.SUM)
win.Unlock(0)
comm.Barrier()
if rank == size - 1:
    got = array.array("q", [0])
    win.Lock(0, MPI.LOCK_SHARED)
    win.Get(got, 0, target=(0, 1, MPI.INT64_T))
    win.Unlock(0)
    assert got[0] == 1 + 10 * size, got[0]
if rank == 0:
    # the separate model: rank 0's memory holds what its last synchronization left there:
    obsolete = memory[0]
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    fresh = memory[0]
    win.Unlock(0)
    # its own lock pulled the public copy, holding the accumulates applied by then
    assert fresh == 1 + 10 * size and (obsolete - 1) % 10 == 0 and obsolete <= fresh, obsolete
    print(f"mpi4py: obsolete {obsolete}, after the lock {fresh}")

# the unified model, a window's default: what every rank accumulated at rank 0 is in rank 0's
# memory once the barrier ordered it, with no call on the window in between
counter = array.array("q", [0])
unified = MPI.Win.Create(counter, 8, MPI.INFO_NULL, comm)
assert unified.Get_attr(MPI.WIN_MODEL) == MPI.WIN_UNIFIED
unified.Lock(0, MPI.LOCK_SHARED)
unified.Accumulate(array.array("q", [1]), 0, target=(0, 1, MPI.INT64_T), op=MPI.SUM)
unified.Unlock(0)
comm.Barrier()
if rank == 0:
    assert counter[0] == size, counter[0]
unified.Free()

# collectives and messages through the service
assert comm.allreduce(rank, op=MPI.SUM) == size * (size - 1) // 2
assert comm.bcast({"from": 0} if rank == 0 else None, root=0) == {"from": 0}
if rank == 0:
    comm.send([1, 2, 3], dest=1, tag=5)
elif rank == 1:
    assert comm.recv(source=0, tag=5) == [1, 2, 3]
win.Free()
print(f"mpi4py rank {rank}: ok")
