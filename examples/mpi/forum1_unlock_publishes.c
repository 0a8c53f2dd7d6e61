/* Forum example 1 (MPI-3.1 Example 11.6, SEMANTICS.md "Example 1"): B stores X under a lock of
 * its own window; the unlock publishes it (rule 5), the barrier orders that before A's lock,
 * and A's get returns the new value — guaranteed.
 * Then the broken variant: B stores Y and only calls the barrier. A barrier synchronises
 * processes, not memory: nothing publishes the store in the separate model, and A's get
 * returns the old value (not guaranteed to be the new one; onesided gives the old one). */
#include "forum.h"

int main(int argc, char **argv)
{
    int rank;
    long *mem, got[2] = {-1, -1};
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mem = separate_window(2, &win);
    if (rank == B) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, B, 0, win);
        mem[0] = 42; /* X */
        MPI_Win_unlock(B, win);
        mem[1] = 43; /* Y: no synchronization publishes it */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == A) {
        get_locked(MPI_LOCK_EXCLUSIVE, got, 2, B, win);
        EXPECT(got[0] == 42, "X is %ld: the unlock published it", got[0]);
        EXPECT(got[1] == 0, "Y is %ld: onesided publishes only at post, fence, unlock, "
               "unlock_all and sync", got[1]);
        printf("forum1: X = %ld (guaranteed), Y = %ld (the obsolete value)\n", got[0], got[1]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
