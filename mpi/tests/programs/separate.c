/* The separate model in C (asked with info onesided_memory_model=separate): rank 0's store
 * into its window memory is not public until it synchronizes, so rank 1 reads the obsolete
 * value first (SEMANTICS.md), then the new one after rank 0's MPI_Win_sync. */
#include "check.h"

/* Rank 0's int as rank 1 reads it now (in its lock_all epoch, completed by a flush). */
static int read_rank0(MPI_Win win)
{
    int got = -1;
    MPI_Get(&got, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
    MPI_Win_flush(0, win);
    return got;
}

int main(int argc, char **argv)
{
    int rank, buf = 0, flag = 0, *model = NULL;
    MPI_Win win;
    MPI_Info info;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_memory_model", "separate");
    MPI_Win_create(&buf, sizeof buf, sizeof(int), info, MPI_COMM_WORLD, &win);
    MPI_Info_free(&info);
    MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag);
    CHECK(flag && *model == MPI_WIN_SEPARATE, "the model asked is separate");
    MPI_Win_lock_all(0, win);
    if (rank == 0)
        buf = 5; /* a local store: the private copy only */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        int got = read_rank0(win);
        CHECK(got == 0, "read %d before rank 0 synchronized: expected the obsolete 0", got);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_Win_sync(win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        int got = read_rank0(win);
        CHECK(got == 5, "read %d after rank 0's MPI_Win_sync", got);
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    return finish(rank, "separate");
}
