/* A call of a later phase (MPI_Alltoall) fails with MPI_ERR_UNSUPPORTED_OPERATION: returned
 * under MPI_ERRORS_RETURN, fatal (the job ends, the class printed) by default. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, value = 1, class;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int out = 0;
    int err = MPI_Alltoall(&value, 1, MPI_INT, &out, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Alltoall gave class %d", class);
    /* printed before the barrier: rank 1 ends the job after it */
    if (rank == 0)
        printf("unsupported: returned\n");
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    if (rank == 1)
        MPI_Alltoall(&value, 1, MPI_INT, &out, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
