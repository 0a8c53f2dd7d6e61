/* Rank 1 dies of a segmentation fault inside a fence epoch: the job ends, naming it. */
#include "check.h"
#include <signal.h>

int main(int argc, char **argv)
{
    int rank, buf = 0;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Win_create(&buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    if (rank == 1)
        raise(SIGSEGV);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
