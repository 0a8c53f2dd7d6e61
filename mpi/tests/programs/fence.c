/* Put and get between fences, on a window of the program's own memory (its initial values
 * are the window's public copy), and on an allocated one. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, buf[4], got = -1;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < 4; i++)
        buf[i] = 100 * rank + i;
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    int value = 1000 + rank;
    MPI_Put(&value, 1, MPI_INT, right, 2, 1, MPI_INT, win);
    MPI_Get(&got, 1, MPI_INT, right, 1, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    CHECK(got == 100 * right + 1, "got %d from rank %d", got, right);
    CHECK(buf[2] == 1000 + left, "buf[2] is %d, rank %d put %d", buf[2], left, 1000 + left);
    CHECK(buf[0] == 100 * rank, "buf[0] is %d", buf[0]);
    MPI_Win_free(&win);

    double *base;
    MPI_Win_allocate(8 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    double d = 0.5 * rank;
    MPI_Put(&d, 1, MPI_DOUBLE, right, rank, 1, MPI_DOUBLE, win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    CHECK(base[left] == 0.5 * left, "base[%d] is %g", left, base[left]);
    MPI_Win_free(&win);

    int sum = -1;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size * (size - 1) / 2, "allreduce gave %d", sum);
    return finish(rank, "fence");
}
