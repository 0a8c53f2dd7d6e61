/* Forum example 2 (MPI-3.1 Example 11.8): A puts X under an exclusive lock of B; after the
 * barrier B locks its own window, which brings the public copy into its private copy (rule
 * 6), and loads A's value — guaranteed. A load without that lock reads the private copy as it
 * was: the "obsolete value" (onesided gives the old one deterministically). */
#include "forum.h"

int main(int argc, char **argv)
{
    int rank;
    long *mem, value = 42;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mem = separate_window(1, &win);
    if (rank == A)
        put_locked(value, B, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == B) {
        long before = *mem; /* no lock: the private copy as it was */
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, B, 0, win);
        long after = *mem;
        MPI_Win_unlock(B, win);
        EXPECT(before == 0, "without the lock B loads %ld", before);
        EXPECT(after == 42, "after its lock B loads %ld", after);
        printf("forum2: without lock %ld (the obsolete value), after lock %ld (guaranteed)\n",
               before, after);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
