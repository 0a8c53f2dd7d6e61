/* Derived datatypes: a column of a 4x4 matrix (MPI_Type_vector) put into a row of the
 * target's, a get into an indexed origin, an accumulate through a subarray; the h forms of
 * vector, indexed and indexed_block (displacements in bytes) make the types of the plain
 * forms; a struct of several basic types put and got (its padding untouched), refused by an
 * accumulate and against a target type of another signature (MPI_ERR_TYPE). */
#include <stddef.h>
#include <string.h>

#include "check.h"

struct pair {
    long along;
    int anint; /* then 4 bytes of padding */
};

/* The h form hform has the bounds, extents and size of the plain form plain, as the MPI_Count
 * calls give them. */
static void check_alike(MPI_Datatype plain, MPI_Datatype hform, const char *what)
{
    static const char *facts[5] = {"lb", "extent", "true lb", "true extent", "size"};
    MPI_Count of[2][5];
    MPI_Datatype both[2] = {plain, hform};
    for (int i = 0; i < 2; i++) {
        MPI_Type_get_extent_x(both[i], &of[i][0], &of[i][1]);
        MPI_Type_get_true_extent_x(both[i], &of[i][2], &of[i][3]);
        MPI_Type_size_x(both[i], &of[i][4]);
    }
    for (int k = 0; k < 5; k++)
        CHECK(of[0][k] == of[1][k], "%s: %s %lld, the plain form's %lld", what, facts[k],
              (long long) of[1][k], (long long) of[0][k]);
}

int main(int argc, char **argv)
{
    int rank, size, a[16], b[16], got[8];
    MPI_Datatype column, picks, corner;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 16; i++) {
        a[i] = 100 * rank + i;
        b[i] = 0;
    }
    MPI_Type_vector(4, 1, 4, MPI_INT, &column);
    MPI_Type_commit(&column);
    int lens[2] = {1, 2}, disps[2] = {0, 4};
    MPI_Type_indexed(2, lens, disps, MPI_INT, &picks);
    MPI_Type_commit(&picks);
    int sizes[2] = {4, 4}, subsizes[2] = {2, 2}, starts[2] = {2, 2};
    MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &corner);
    MPI_Type_commit(&corner);
    MPI_Aint lb, extent;
    int bytes;
    MPI_Type_get_extent(column, &lb, &extent);
    MPI_Type_size(column, &bytes);
    CHECK(lb == 0 && extent == 13 * sizeof(int) && bytes == 4 * sizeof(int),
          "vector: lb %ld extent %ld size %d", (long) lb, (long) extent, bytes);

    MPI_Datatype hcolumn, hpicks, pairs, hpairs;
    MPI_Aint hdisps[2] = {disps[0] * sizeof(int), disps[1] * sizeof(int)};
    MPI_Type_create_hvector(4, 1, 4 * sizeof(int), MPI_INT, &hcolumn);
    check_alike(column, hcolumn, "hvector");
    MPI_Type_create_hindexed(2, lens, hdisps, MPI_INT, &hpicks);
    check_alike(picks, hpicks, "hindexed");
    MPI_Type_create_indexed_block(2, 2, disps, MPI_INT, &pairs);
    MPI_Type_create_hindexed_block(2, 2, hdisps, MPI_INT, &hpairs);
    check_alike(pairs, hpairs, "hindexed_block");
    MPI_Type_get_extent(pairs, &lb, &extent);
    CHECK(lb == 0 && extent == 6 * sizeof(int), "indexed_block: lb %ld extent %ld", (long) lb,
          (long) extent);
    MPI_Type_free(&hcolumn);
    MPI_Type_free(&hpicks);
    MPI_Type_free(&pairs);
    MPI_Type_free(&hpairs);

    MPI_Win_create(b, sizeof b, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Win_fence(0, win);
    /* column 1 of a → row 0 of b at the right neighbour */
    MPI_Put(a + 1, 1, column, right, 0, 4, MPI_INT, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < 4; i++)
        CHECK(b[i] == 100 * left + 1 + 4 * i, "b[%d] is %d", i, b[i]);
    for (int i = 0; i < 8; i++)
        got[i] = -1;
    /* b[0..3] of the right neighbour into got[0], got[4], got[5] */
    MPI_Get(got, 1, picks, right, 0, 3, MPI_INT, win);
    MPI_Win_fence(0, win);
    CHECK(got[0] == 100 * rank + 1 && got[4] == 100 * rank + 5 && got[5] == 100 * rank + 9 &&
          got[1] == -1, "indexed get: %d %d %d %d", got[0], got[4], got[5], got[1]);
    int ones[4] = {1, 1, 1, 1};
    /* add 1 to the lower right 2x2 corner of every rank's b */
    MPI_Accumulate(ones, 4, MPI_INT, right, 0, 1, corner, MPI_SUM, win);
    MPI_Win_fence(0, win);
    CHECK(b[10] == 1 && b[11] == 1 && b[14] == 1 && b[15] == 1 && b[9] == 0,
          "subarray accumulate: %d %d %d %d %d", b[10], b[11], b[14], b[15], b[9]);
    MPI_Win_free(&win);

    /* a struct of a long and an int, through a window of such structs */
    MPI_Datatype pairtype;
    int blens[2] = {1, 1};
    MPI_Aint pdisps[2] = {offsetof(struct pair, along), offsetof(struct pair, anint)};
    MPI_Datatype ptypes[2] = {MPI_LONG, MPI_INT};
    MPI_Type_create_struct(2, blens, pdisps, ptypes, &pairtype);
    MPI_Type_commit(&pairtype);
    MPI_Type_size(pairtype, &bytes);
    CHECK(bytes == sizeof(long) + sizeof(int), "struct size %d", bytes);
    MPI_Type_get_extent(pairtype, &lb, &extent);
    CHECK(lb == 0 && extent == sizeof(struct pair), "struct extent %ld (C pads it to %zu)",
          (long) extent, sizeof(struct pair));
    struct pair mine[2], theirs[2], back[2];
    memset(theirs, 0x5a, sizeof theirs);
    for (int i = 0; i < 2; i++) {
        mine[i].along = 1000L * rank + i;
        mine[i].anint = -rank - i;
    }
    MPI_Win_create(theirs, sizeof theirs, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_fence(0, win);
    MPI_Put(mine, 2, pairtype, right, 0, 2, pairtype, win);
    MPI_Win_fence(0, win);
    unsigned char padding[4];
    memset(padding, 0x5a, 4);
    for (int i = 0; i < 2; i++)
        CHECK(theirs[i].along == 1000L * left + i && theirs[i].anint == -left - i &&
              memcmp((char *) &theirs[i] + sizeof(long) + sizeof(int), padding, 4) == 0,
              "struct put [%d]: %ld %d", i, theirs[i].along, theirs[i].anint);
    memset(back, 0, sizeof back);
    MPI_Get(back, 2, pairtype, right, 0, 2, pairtype, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < 2; i++)
        CHECK(back[i].along == 1000L * rank + i && back[i].anint == -rank - i,
              "struct get [%d]: %ld %d", i, back[i].along, back[i].anint);
    int class, err = MPI_Accumulate(mine, 1, pairtype, right, 0, 1, pairtype, MPI_REPLACE, win);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_TYPE, "an accumulate of a struct: class %d", class);
    err = MPI_Put(mine, 1, pairtype, right, 0, 3, MPI_INT, win);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_TYPE, "a struct put into ints: class %d", class);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    MPI_Type_free(&pairtype);
    MPI_Type_free(&column);
    MPI_Type_free(&picks);
    MPI_Type_free(&corner);
    return finish(rank, "datatypes");
}
