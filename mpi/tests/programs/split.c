/* Communicators: split (by parity, reversed keys), dup and free; an allreduce, a window and
 * its fences over a subcommunicator. */
#include "check.h"
int main(int argc, char **argv) {
    int rank, size, sub_rank, sub_size;
    MPI_Comm sub, dup;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &sub);
    MPI_Comm_rank(sub, &sub_rank);
    MPI_Comm_size(sub, &sub_size);
    CHECK(sub_size == (size + 1 - rank % 2) / 2, "sub size %d", sub_size);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, sub);
    int buf = 0;
    MPI_Win win;
    MPI_Win_create(&buf, sizeof buf, sizeof buf, MPI_INFO_NULL, sub, &win);
    MPI_Win_fence(0, win);
    MPI_Accumulate(&rank, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    if (sub_rank == 0) CHECK(buf == sum, "buf %d sum %d", buf, sum);
    MPI_Win_free(&win);
    MPI_Comm_dup(sub, &dup);
    MPI_Barrier(dup);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&sub);
    return finish(rank, "split");
}
