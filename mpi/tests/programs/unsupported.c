/* A call of a later phase (MPI_Type_get_envelope) fails with MPI_ERR_UNSUPPORTED_OPERATION: returned
 * under MPI_ERRORS_RETURN, fatal (the job ends, the class printed) by default. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, class;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int integers, addresses, datatypes, combiner;
    int err = MPI_Type_get_envelope(MPI_INT, &integers, &addresses, &datatypes, &combiner);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Type_get_envelope gave class %d", class);
    /* printed before the barrier: rank 1 ends the job after it */
    if (rank == 0)
        printf("unsupported: returned\n");
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    if (rank == 1)
        MPI_Type_get_envelope(MPI_INT, &integers, &addresses, &datatypes, &combiner);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
