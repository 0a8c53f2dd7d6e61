/* Passive target: every rank adds to rank 0's counter under an exclusive lock, then
 * fetch_and_op and compare_and_swap under lock_all; rank 0 reads its own window after
 * locking itself. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size;
    long *counter;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_allocate(2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &counter, &win);

    long one = rank + 1;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_unlock(0, win);
    MPI_Barrier(MPI_COMM_WORLD);

    long total = size * (size + 1) / 2;
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        CHECK(counter[0] == total, "counter is %ld, expected %ld", counter[0], total);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    long before = -1, add = 1, swapped = -1, mine = rank, nobody = -7;
    MPI_Win_lock_all(0, win);
    MPI_Fetch_and_op(&add, &before, MPI_LONG, 0, 0, MPI_SUM, win);
    MPI_Win_flush(0, win);
    CHECK(before >= total && before < total + size, "fetch_and_op saw %ld", before);
    /* only one rank swaps -1 → its rank into slot 1 (it starts at 0: compare with 0) */
    long zero = 0;
    MPI_Compare_and_swap(&mine, &zero, &swapped, MPI_LONG, 0, 1, win);
    MPI_Win_flush_all(win);
    CHECK(swapped == 0 || (swapped >= 0 && swapped < size), "compare_and_swap saw %ld", swapped);
    (void) nobody;
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);

    long result[2] = {-1, -1};
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Get_accumulate(NULL, 0, MPI_LONG, result, 2, MPI_LONG, 0, 0, 2, MPI_LONG, MPI_NO_OP, win);
    MPI_Win_unlock(0, win);
    CHECK(result[0] == total + size, "counter after fetch_and_op is %ld", result[0]);
    MPI_Win_free(&win);
    return finish(rank, "lock_acc");
}
