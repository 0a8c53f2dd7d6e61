/* Ranks 1 and 2 put to the same element of rank 0 under shared locks, unordered: a race
 * `onesided mpiexec --check` reports. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, buf = 0, value;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Win_create(&buf, sizeof buf, sizeof buf, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (rank > 0) {
        value = rank;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    if (rank == 0)
        printf("race: done\n");
    return 0;
}
