/* The collectives beyond bcast/reduce, on the world and on a subcommunicator: gather,
 * allgather, scatter(v), gatherv, allgatherv, alltoall(v), reduce_scatter(_block), with
 * MPI_IN_PLACE where MPI allows it, and collectives of two communicators interleaved with the
 * program's own messages (each on a context of its own). */
#include "check.h"

static void run(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *send = malloc(size * 4 * sizeof(int)), *recv = malloc(size * 4 * sizeof(int));
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));

    /* scatter from the last rank: member m gets 10*m, 10*m+1 */
    int root = size - 1, two[2] = {-1, -1};
    for (int i = 0; i < 2 * size; i++)
        send[i] = 10 * (i / 2) + i % 2;
    MPI_Scatter(send, 2, MPI_INT, two, 2, MPI_INT, root, comm);
    CHECK(two[0] == 10 * rank && two[1] == 10 * rank + 1, "%s scatter got %d %d", name, two[0], two[1]);

    /* gather to the last rank and allgather in place: two ints per member, in rank order */
    int pair[2] = {rank, -rank};
    for (int i = 0; i < 2 * size; i++)
        recv[i] = -1;
    MPI_Gather(pair, 2, MPI_INT, recv, 2, MPI_INT, root, comm);
    if (rank == root)
        for (int m = 0; m < size; m++)
            CHECK(recv[2 * m] == m && recv[2 * m + 1] == -m, "%s gather from %d", name, m);
    for (int i = 0; i < 2 * size; i++)
        recv[i] = i / 2 == rank ? 10 * rank + i % 2 : -1;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, 2, MPI_INT, comm);
    for (int m = 0; m < size; m++)
        CHECK(recv[2 * m] == 10 * m && recv[2 * m + 1] == 10 * m + 1, "%s allgather from %d",
              name, m);

    /* scatterv: member m gets m+1 elements, placed backwards in the root's buffer */
    int total = 0;
    for (int m = size - 1; m >= 0; m--) {
        counts[m] = m + 1;
        displs[m] = total;
        total += m + 1;
    }
    for (int i = 0; i < total; i++)
        send[i] = 100 + i;
    for (int i = 0; i < size; i++)
        recv[i] = -1;
    MPI_Scatterv(send, counts, displs, MPI_INT, recv, rank + 1, MPI_INT, 0, comm);
    for (int i = 0; i <= rank; i++)
        CHECK(recv[i] == 100 + displs[rank] + i, "%s scatterv %d: %d", name, i, recv[i]);

    /* gatherv to 0 of rank+1 copies of the rank, and allgatherv of the same, in place */
    for (int i = 0; i <= rank; i++)
        send[i] = rank;
    for (int i = 0; i < total; i++)
        recv[i] = -1;
    MPI_Gatherv(send, rank + 1, MPI_INT, recv, counts, displs, MPI_INT, 0, comm);
    if (rank == 0)
        for (int m = 0; m < size; m++)
            for (int i = 0; i < counts[m]; i++)
                CHECK(recv[displs[m] + i] == m, "%s gatherv [%d][%d]: %d", name, m, i, recv[displs[m] + i]);
    for (int i = 0; i < total; i++)
        recv[i] = -1;
    for (int i = 0; i <= rank; i++)
        recv[displs[rank] + i] = rank;
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts, displs, MPI_INT, comm);
    for (int m = 0; m < size; m++)
        for (int i = 0; i < counts[m]; i++)
            CHECK(recv[displs[m] + i] == m, "%s allgatherv [%d][%d]: %d", name, m, i, recv[displs[m] + i]);

    /* alltoall: member m gets 1000*rank + m from each rank */
    for (int m = 0; m < size; m++)
        send[m] = 1000 * rank + m;
    MPI_Alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, comm);
    for (int m = 0; m < size; m++)
        CHECK(recv[m] == 1000 * m + rank, "%s alltoall from %d: %d", name, m, recv[m]);

    /* alltoallv: rank r sends m+1 elements to member m; receives r+1 from each */
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int at = 0;
    for (int m = 0; m < size; m++) {
        sc[m] = m + 1;
        sd[m] = at;
        for (int i = 0; i <= m; i++)
            send[at + i] = 100 * rank + m;
        at += m + 1;
        rc[m] = rank + 1;
        rd[m] = m * (rank + 1);
    }
    MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
    for (int m = 0; m < size; m++)
        for (int i = 0; i <= rank; i++)
            CHECK(recv[rd[m] + i] == 100 * m + rank, "%s alltoallv from %d: %d", name, m, recv[rd[m] + i]);

    /* reduce_scatter: the sum over ranks of (i + rank), member m keeping m+1 elements */
    for (int i = 0; i < total; i++)
        send[i] = i + rank;
    for (int m = 0; m < size; m++)
        counts[m] = m + 1;
    MPI_Reduce_scatter(send, recv, counts, MPI_INT, MPI_SUM, comm);
    int start = rank * (rank + 1) / 2, ranksum = size * (size - 1) / 2;
    for (int i = 0; i <= rank; i++)
        CHECK(recv[i] == size * (start + i) + ranksum, "%s reduce_scatter %d: %d", name, i, recv[i]);
    for (int i = 0; i < 2 * size; i++)
        send[i] = rank;
    MPI_Reduce_scatter_block(send, two, 2, MPI_INT, MPI_MAX, comm);
    CHECK(two[0] == size - 1 && two[1] == size - 1, "%s reduce_scatter_block %d", name, two[0]);

    free(sc), free(sd), free(rc), free(rd);
    free(send), free(recv), free(counts), free(displs);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    run(MPI_COMM_WORLD, "world");
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    /* a program message sent before the collectives is not taken by them */
    if (size > 1 && rank < 2) {
        int v = 5 + rank;
        MPI_Send(&v, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
    }
    run(half, "half");
    MPI_Barrier(half);
    if (size > 1 && rank < 2) {
        int v = 0;
        MPI_Recv(&v, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == 5 + (1 - rank), "the program's message came as %d", v);
    }
    MPI_Comm_free(&half);
    return finish(rank, "collectives");
}
