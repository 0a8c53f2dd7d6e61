/* Forum example 3 (MPI-3.1 Example 11.10): B stores X, then locks its own window shared; A
 * reads X under a shared lock. A lock does not publish private stores — only B's unlock,
 * after A's get, does — so A reads the old value (not guaranteed to be new). With
 * MPI_Win_sync before the barrier (the fix the MPI-3.0 text gives), A reads the new value. */
#include "forum.h"

static long attempt(MPI_Win win, long *mem, int rank, long value, int sync)
{
    long got = -1;
    if (rank == B) {
        *mem = value;
        MPI_Win_lock(MPI_LOCK_SHARED, B, 0, win);
        if (sync)
            MPI_Win_sync(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == A)
        get_locked(MPI_LOCK_SHARED, &got, 1, B, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == B)
        MPI_Win_unlock(B, win);
    MPI_Barrier(MPI_COMM_WORLD);
    return got;
}

int main(int argc, char **argv)
{
    int rank;
    long *mem;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mem = separate_window(1, &win);
    long plain = attempt(win, mem, rank, 7, 0);
    long synced = attempt(win, mem, rank, 8, 1);
    if (rank == A) {
        EXPECT(plain == 0, "A read %ld before B's unlock published 7", plain);
        EXPECT(synced == 8, "A read %ld after B's MPI_Win_sync", synced);
        printf("forum3: store before shared lock %ld (the obsolete value), with win_sync %ld "
               "(guaranteed)\n", plain, synced);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
