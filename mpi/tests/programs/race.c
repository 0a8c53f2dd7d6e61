/* Ranks 1 and 2 put to the same element of rank 0 under shared locks, unordered: a race
 * `onesided mpiexec --check` reports. With the argument `ordered`, rank 1 sends rank 2 a
 * message after its epoch and rank 2 receives it before its own: the message orders the two
 * puts, and the check finds nothing. With `collective`, a broadcast from rank 1 over a
 * communicator of ranks 1 and 2 orders them the same way. */
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    int rank, buf = 0, value, token = 0;
    int ordered = argc > 1 && strcmp(argv[1], "ordered") == 0;
    int collective = argc > 1 && strcmp(argv[1], "collective") == 0;
    MPI_Comm pair;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split(MPI_COMM_WORLD, rank > 0, rank, &pair);
    MPI_Win_create(&buf, sizeof buf, sizeof buf, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (rank > 0) {
        if (collective && rank == 2)
            MPI_Bcast(&token, 1, MPI_INT, 0, pair);
        if (ordered && rank == 2)
            MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        value = rank;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
        if (ordered && rank == 1)
            MPI_Send(&token, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
        if (collective && rank == 1)
            MPI_Bcast(&token, 1, MPI_INT, 0, pair);
    }
    MPI_Comm_free(&pair);
    MPI_Win_free(&win);
    MPI_Finalize();
    if (rank == 0)
        printf("race: done\n");
    return 0;
}
