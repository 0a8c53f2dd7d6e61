/* The unified model in C, what onesided's windows have unless asked otherwise (as MPICH's):
 * public and private copy are one memory, so rank 0's store reaches rank 1's get once a
 * barrier orders them, and rank 1's put reaches rank 0's memory once a message orders them,
 * with no synchronization call on the window in between (MPICH's own tests rely on both).
 * With the argument "separate" (the job run with --memory-model separate) the window says
 * separate instead, and "bad-info" asks for a model that does not exist. */
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    int rank, buf = 0, got = -1, flag = 0, *model = NULL, one = 7;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1 && strcmp(argv[1], "bad-info") == 0) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "onesided_memory_model", "shared");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int err = MPI_Win_create(&buf, sizeof buf, sizeof(int), info, MPI_COMM_WORLD, &win);
        int class = -1;
        MPI_Error_class(err, &class);
        CHECK(class == MPI_ERR_INFO_VALUE, "class %d for an unknown memory model", class);
        MPI_Info_free(&info);
        return finish(rank, "unified");
    }
    MPI_Win_create(&buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag);
    if (argc > 1 && strcmp(argv[1], "separate") == 0) {
        CHECK(flag && *model == MPI_WIN_SEPARATE, "--memory-model separate");
        MPI_Win_free(&win);
        return finish(rank, "unified");
    }
    CHECK(flag && *model == MPI_WIN_UNIFIED, "unified unless asked");
    MPI_Win_lock_all(0, win);
    if (rank == 0)
        buf = 5; /* a local store: public memory in the unified model */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Get(&got, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
        MPI_Win_flush(0, win);
        CHECK(got == 5, "read %d after the barrier: expected rank 0's store", got);
        MPI_Put(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
        MPI_Win_flush(0, win);
        MPI_Send(NULL, 0, MPI_INT, 0, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) {
        MPI_Recv(NULL, 0, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(buf == 7, "memory holds %d after rank 1's flushed put and its message", buf);
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    return finish(rank, "unified");
}
