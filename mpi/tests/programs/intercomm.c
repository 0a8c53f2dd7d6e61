/* Intercommunicators, made and merged: the two halves of the world as an intercommunicator
 * (its local and remote groups), merged low half first, high half first, and with equal
 * `high` (the group of the lower world rank first), a window over a merged one; MPICH's
 * classes for the calls that need one kind or the other, and unsupported sends over one. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, n, flag, r;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int half = size / 2, low = rank < half;

    MPI_Comm local, inter, merged;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &local);
    CHECK(class_of(MPI_Intercomm_create(local, 7, MPI_COMM_WORLD, 0, 5, &inter)) == MPI_ERR_RANK,
          "a local leader outside the group");
    CHECK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? half : 0, 99, &inter) ==
          MPI_SUCCESS, "MPI_Intercomm_create");
    MPI_Comm_test_inter(inter, &flag);
    CHECK(flag, "test_inter of an intercommunicator");
    MPI_Comm_test_inter(local, &flag);
    CHECK(!flag, "test_inter of an intracommunicator");
    MPI_Comm_size(inter, &n);
    CHECK(n == (low ? half : size - half), "local size %d", n);
    MPI_Comm_rank(inter, &r);
    CHECK(r == (low ? rank : rank - half), "local rank %d", r);
    MPI_Comm_remote_size(inter, &n);
    CHECK(n == (low ? size - half : half), "remote size %d", n);
    MPI_Group remote, world;
    MPI_Comm_remote_group(inter, &remote);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero = 0, first;
    MPI_Group_translate_ranks(remote, 1, &zero, world, &first);
    CHECK(first == (low ? half : 0), "the remote group starts at world rank %d", first);
    MPI_Group_free(&remote);
    MPI_Group_free(&world);

    /* bad kinds */
    CHECK(class_of(MPI_Comm_remote_size(local, &n)) == MPI_ERR_COMM, "remote_size, intra");
    CHECK(class_of(MPI_Intercomm_merge(local, 0, &merged)) == MPI_ERR_COMM, "merge, intra");
    MPI_Win win;
    int *mem;
    CHECK(class_of(MPI_Win_allocate(4, 4, MPI_INFO_NULL, inter, &mem, &win)) == MPI_ERR_COMM,
          "a window over an intercommunicator");
    CHECK(class_of(MPI_Send(&r, 1, MPI_INT, 0, 0, inter)) == MPI_ERR_UNSUPPORTED_OPERATION,
          "a send over an intercommunicator");

    /* low half first: the world's order */
    MPI_Intercomm_merge(inter, !low, &merged);
    MPI_Comm_rank(merged, &r);
    CHECK(r == rank, "merged low first: rank %d", r);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, merged);
    CHECK(sum == size * (size - 1) / 2, "allreduce over the merged: %d", sum);
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, merged, &mem, &win);
    *mem = -1;
    MPI_Win_fence(0, win);
    MPI_Put(&rank, 1, MPI_INT, (r + 1) % size, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    CHECK(*mem == (rank + size - 1) % size, "a put over the merged: %d", *mem);
    MPI_Win_free(&win);
    MPI_Comm_free(&merged);

    /* high half first */
    MPI_Intercomm_merge(inter, low, &merged);
    MPI_Comm_rank(merged, &r);
    CHECK(r == (low ? rank + size - half : rank - half), "merged high first: rank %d", r);
    MPI_Comm_free(&merged);

    /* equal high: the group holding the lower world rank first */
    MPI_Intercomm_merge(inter, 1, &merged);
    MPI_Comm_rank(merged, &r);
    CHECK(r == rank, "merged with equal high: rank %d", r);
    MPI_Barrier(merged);
    MPI_Comm_free(&merged);

    MPI_Comm_free(&inter);
    CHECK(inter == MPI_COMM_NULL, "free sets MPI_COMM_NULL");
    MPI_Comm_free(&local);
    return finish(rank, "intercomm");
}
