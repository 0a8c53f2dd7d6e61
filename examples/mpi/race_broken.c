/* A race of our own, for `onesided mpiexec --check`: ranks 1 and 2 put to the same element of
 * rank 0 under shared locks, and nothing orders the two epochs. MPI leaves the result
 * undefined; the checker names both puts. Run it with `ordered` and rank 1 sends rank 2 a
 * message between the epochs: the puts are ordered, and the checker finds nothing. */
#include <string.h>

#include "forum.h"

int main(int argc, char **argv)
{
    int rank, *mem, value, token = 0;
    int ordered = argc > 1 && strcmp(argv[1], "ordered") == 0;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    if (rank == 2 && ordered)
        MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank > 0) {
        value = rank;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
    }
    if (rank == 1 && ordered)
        MPI_Send(&token, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    if (rank == 0)
        printf("race: done\n");
    return 0;
}
