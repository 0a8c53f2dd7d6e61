/* MPI_ERRORS_RETURN gives MPICH's error classes; then, under the default
 * MPI_ERRORS_ARE_FATAL, the same mistake ends the job. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, buf = 0, class, len, v = 1;
    char text[MPI_MAX_ERROR_STRING];
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_create(&buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);

    int err = MPI_Win_unlock(0, win);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_RMA_SYNC, "unlock without lock: class %d", class);
    MPI_Error_string(err, text, &len);
    CHECK(len > 0, "empty error string");

    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    err = MPI_Put(&v, 1, MPI_INT, size + 3, 0, 1, MPI_INT, win);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_RANK, "put to rank %d: class %d", size + 3, class);
    err = MPI_Put(&v, 1, MPI_INT, 0, 5, 1, MPI_INT, win);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_RMA_RANGE, "put past the window: class %d", class);
    err = MPI_Win_lock(77, 0, 0, win);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_LOCKTYPE, "lock type 77: class %d", class);
    MPI_Win_unlock(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("errors: returned classes ok\n");
    fflush(stdout);

    MPI_Win_set_errhandler(win, MPI_ERRORS_ARE_FATAL);
    if (argc > 1 && rank == size - 1)
        MPI_Win_unlock(0, win); /* fatal: MPI_ERR_RMA_SYNC ends the job */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
