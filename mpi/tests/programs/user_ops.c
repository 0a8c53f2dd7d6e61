/* User-defined reduction operations: a non-commutative one folds in rank order (the canonical
 * order MPI asks of it), a commutative one, a function that calls MPI itself, over the world and
 * a subcommunicator, and Op_commutative / Op_free. */
#include "check.h"

/* inout = in * 10 + inout: rank order 0, 1, 2, ... makes the digits 1, 2, 3, ... */
static void digits(void *in, void *inout, int *len, MPI_Datatype *type)
{
    int size;
    MPI_Type_size(*type, &size); /* a call of MPI from inside the op */
    CHECK(size == sizeof(long), "the op's datatype has size %d", size);
    for (int i = 0; i < *len; i++)
        ((long *) inout)[i] = ((long *) in)[i] * 10 + ((long *) inout)[i];
}

static void absmax(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void) type;
    for (int i = 0; i < *len; i++) {
        int a = ((int *) in)[i], b = ((int *) inout)[i];
        if ((a < 0 ? -a : a) > (b < 0 ? -b : b))
            ((int *) inout)[i] = a;
    }
}

int main(int argc, char **argv)
{
    int rank, size, commutes;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Op ordered, largest;
    MPI_Op_create(digits, 0, &ordered);
    MPI_Op_create(absmax, 1, &largest);
    MPI_Op_commutative(ordered, &commutes);
    CHECK(!commutes, "digits commutes?");
    MPI_Op_commutative(largest, &commutes);
    CHECK(commutes, "absmax does not commute?");
    MPI_Op_commutative(MPI_SUM, &commutes);
    CHECK(commutes, "MPI_SUM does not commute?");

    long mine[2] = {rank + 1, rank + 1}, all[2] = {0, 0}, expected = 0;
    for (int r = 0; r < size; r++)
        expected = expected * 10 + r + 1;
    MPI_Allreduce(mine, all, 2, MPI_LONG, ordered, MPI_COMM_WORLD);
    CHECK(all[0] == expected && all[1] == expected, "digits gave %ld, expected %ld", all[0], expected);

    int value = (rank % 2 ? -1 : 1) * (rank + 1), top = 0;
    MPI_Reduce(&value, &top, 1, MPI_INT, largest, size - 1, MPI_COMM_WORLD);
    if (rank == size - 1)
        CHECK(top == (size % 2 ? size : -size), "absmax gave %d", top);

    /* on a subcommunicator of the odd ranks, in place */
    MPI_Comm odds;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &odds);
    long in_place = rank + 1, sub_expected = 0;
    for (int r = rank % 2; r < size; r += 2)
        sub_expected = sub_expected * 10 + r + 1;
    MPI_Allreduce(MPI_IN_PLACE, &in_place, 1, MPI_LONG, ordered, odds);
    CHECK(in_place == sub_expected, "on the half: %ld, expected %ld", in_place, sub_expected);
    MPI_Comm_free(&odds);

    MPI_Op_free(&ordered);
    MPI_Op_free(&largest);
    CHECK(ordered == MPI_OP_NULL, "a freed op is MPI_OP_NULL");
    return finish(rank, "user_ops");
}
