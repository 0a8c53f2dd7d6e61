/* Ranks 1 and 2 put to the same element of rank 0 under shared locks, unordered: a race
 * `onesided mpiexec --check` reports. With the argument `ordered`, rank 1 sends rank 2 a
 * message after its epoch and rank 2 receives it before its own: the message orders the two
 * puts, and the check finds nothing. */
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    int rank, buf = 0, value, token = 0;
    int ordered = argc > 1 && strcmp(argv[1], "ordered") == 0;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Win_create(&buf, sizeof buf, sizeof buf, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (rank > 0) {
        if (ordered && rank == 2)
            MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        value = rank;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
        if (ordered && rank == 1)
            MPI_Send(&token, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    if (rank == 0)
        printf("race: done\n");
    return 0;
}
