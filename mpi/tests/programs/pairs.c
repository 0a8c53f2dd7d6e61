/* The pair types of MPI_MAXLOC/MPI_MINLOC: accumulates with MAXLOC and MINLOC on MPI_2INT and
 * MPI_DOUBLE_INT (whose C struct pads the int to offset 8), a get of them, and a message of
 * them; sizes and extents as MPI defines them. */
#include "check.h"

struct double_int { double value; int index; };

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int type_size;
    MPI_Aint lb, extent;
    MPI_Type_size(MPI_DOUBLE_INT, &type_size);
    MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &extent);
    CHECK(type_size == 12 && extent == sizeof(struct double_int), "double_int size %d extent %ld",
          type_size, (long) extent);

    int *ints;
    struct double_int *doubles;
    MPI_Win wi, wd;
    MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &ints, &wi);
    MPI_Win_allocate(2 * sizeof(struct double_int), sizeof(struct double_int), MPI_INFO_NULL,
                     MPI_COMM_WORLD, &doubles, &wd);
    ints[0] = -1, ints[1] = -1;
    doubles[0].value = 1e9, doubles[0].index = -1;
    doubles[1].value = 1e9, doubles[1].index = -1;
    MPI_Win_fence(0, wi);
    MPI_Win_fence(0, wd);

    /* every rank offers (value = 10 * rank % 7, index = rank): the max and the min land at 0 */
    int mine[2] = {(10 * rank) % 7, rank};
    struct double_int two[2] = {{(10 * rank) % 7 + 0.5, rank}, {(10 * rank) % 7 + 0.5, rank}};
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wi);
    MPI_Accumulate(mine, 1, MPI_2INT, 0, 0, 1, MPI_2INT, MPI_MAXLOC, wi);
    MPI_Win_unlock(0, wi);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wd);
    MPI_Accumulate(two, 2, MPI_DOUBLE_INT, 0, 0, 2, MPI_DOUBLE_INT, MPI_MINLOC, wd);
    MPI_Win_unlock(0, wd);
    MPI_Barrier(MPI_COMM_WORLD);

    int best = 0, best_rank = 0, low = 1 << 30, low_rank = 0;
    for (int r = 0; r < size; r++) {
        int v = (10 * r) % 7;
        if (v > best || (v == best && r < best_rank))
            best = v, best_rank = r;
        if (v < low || (v == low && r < low_rank))
            low = v, low_rank = r;
    }
    int got[2];
    struct double_int back[2];
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wi);
    MPI_Get(got, 1, MPI_2INT, 0, 0, 1, MPI_2INT, wi);
    MPI_Win_unlock(0, wi);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wd);
    MPI_Get(back, 2, MPI_DOUBLE_INT, 0, 0, 2, MPI_DOUBLE_INT, wd);
    MPI_Win_unlock(0, wd);
    CHECK(got[0] == best && got[1] == best_rank, "maxloc (%d, %d), expected (%d, %d)", got[0],
          got[1], best, best_rank);
    for (int i = 0; i < 2; i++)
        CHECK(back[i].value == low + 0.5 && back[i].index == low_rank, "minloc %d: (%g, %d)", i,
              back[i].value, back[i].index);

    /* a message of two DOUBLE_INTs keeps both halves of each */
    if (size > 1) {
        if (rank == 1)
            MPI_Send(back, 2, MPI_DOUBLE_INT, 0, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            struct double_int in[2] = {{0, 0}, {0, 0}};
            MPI_Status status;
            int count;
            MPI_Recv(in, 2, MPI_DOUBLE_INT, 1, 0, MPI_COMM_WORLD, &status);
            MPI_Get_count(&status, MPI_DOUBLE_INT, &count);
            CHECK(count == 2 && in[1].value == back[1].value && in[1].index == back[1].index,
                  "message of pairs: count %d, (%g, %d)", count, in[1].value, in[1].index);
        }
    }
    MPI_Win_free(&wi);
    MPI_Win_free(&wd);
    return finish(rank, "pairs");
}
