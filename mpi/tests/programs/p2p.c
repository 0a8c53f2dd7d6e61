/* Point-to-point through the service: blocking and nonblocking sends and receives, wildcards,
 * MPI's non-overtaking order, probes, statuses and counts, MPI_PROC_NULL, a derived datatype,
 * a subcommunicator's own context, truncation under MPI_ERRORS_RETURN. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 3, "needs 3 ranks");
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    /* a ring: every rank sends to the next and receives from the previous */
    int out = 100 + rank, in = -1;
    MPI_Status status;
    MPI_Sendrecv(&out, 1, MPI_INT, next, 7, &in, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, &status);
    CHECK(in == 100 + prev, "ring got %d", in);
    CHECK(status.MPI_SOURCE == prev && status.MPI_TAG == 7, "ring status %d %d",
          status.MPI_SOURCE, status.MPI_TAG);

    /* non-overtaking: rank 1 sends 0..9 to rank 0 with two tags; any-tag receives see the
     * order sent */
    if (rank == 1) {
        for (int i = 0; i < 10; i++)
            MPI_Send(&i, 1, MPI_INT, 0, i % 2, MPI_COMM_WORLD);
    } else if (rank == 0) {
        int flag = 0;
        MPI_Probe(1, 1, MPI_COMM_WORLD, &status);
        int count = -1;
        MPI_Get_count(&status, MPI_INT, &count);
        CHECK(count == 1 && status.MPI_TAG == 1, "probe count %d tag %d", count, status.MPI_TAG);
        MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, &status);
        CHECK(flag && status.MPI_SOURCE == 1, "iprobe flag %d", flag);
        for (int i = 0; i < 10; i++) {
            int got = -1;
            MPI_Recv(&got, 1, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
            CHECK(got == i && status.MPI_TAG == i % 2, "message %d came as %d", i, got);
        }
    }

    /* nonblocking: post the receives first, then everyone sends to everyone */
    int *got = malloc(size * sizeof(int));
    MPI_Request *reqs = malloc(2 * size * sizeof(MPI_Request));
    MPI_Status *statuses = malloc(2 * size * sizeof(MPI_Status));
    for (int r = 0; r < size; r++)
        MPI_Irecv(&got[r], 1, MPI_INT, r, 3, MPI_COMM_WORLD, &reqs[r]);
    int mine = 1000 * rank;
    for (int r = 0; r < size; r++)
        MPI_Isend(&mine, 1, MPI_INT, r, 3, MPI_COMM_WORLD, &reqs[size + r]);
    MPI_Waitall(2 * size, reqs, statuses);
    for (int r = 0; r < size; r++) {
        CHECK(got[r] == 1000 * r, "from %d got %d", r, got[r]);
        CHECK(statuses[r].MPI_SOURCE == r, "status %d says %d", r, statuses[r].MPI_SOURCE);
    }

    /* a test loop completes a receive */
    if (rank == 0) {
        int v = -1, flag = 0;
        MPI_Request req;
        MPI_Irecv(&v, 1, MPI_INT, 2, 9, MPI_COMM_WORLD, &req);
        MPI_Barrier(MPI_COMM_WORLD);
        while (!flag)
            MPI_Test(&req, &flag, &status);
        CHECK(v == 42 && status.MPI_SOURCE == 2, "test got %d", v);
    } else {
        if (rank == 2) {
            int v = 42;
            MPI_Send(&v, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* MPI_PROC_NULL: nothing sent, the receive complete at once */
    MPI_Send(&out, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    MPI_Recv(&in, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &status);
    CHECK(status.MPI_SOURCE == MPI_PROC_NULL, "proc_null source %d", status.MPI_SOURCE);

    /* a strided datatype on both ends: every other element of 8 */
    MPI_Datatype every_other;
    MPI_Type_vector(4, 1, 2, MPI_DOUBLE, &every_other);
    MPI_Type_commit(&every_other);
    double wide[8];
    for (int i = 0; i < 8; i++)
        wide[i] = rank * 10 + i;
    if (rank == 0)
        MPI_Send(wide, 1, every_other, 1, 5, MPI_COMM_WORLD);
    if (rank == 1) {
        double packed[4];
        MPI_Recv(packed, 4, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, &status);
        for (int i = 0; i < 4; i++)
            CHECK(packed[i] == 2 * i, "strided %d is %g", i, packed[i]);
        int count;
        MPI_Get_count(&status, MPI_DOUBLE, &count);
        CHECK(count == 4, "count %d", count);
    }
    MPI_Type_free(&every_other);

    /* a subcommunicator has a context of its own: its message is not received on the world */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int half_rank, half_size;
    MPI_Comm_rank(half, &half_rank);
    MPI_Comm_size(half, &half_size);
    if (half_size > 1) {
        if (half_rank == 1) {
            int v = 77;
            MPI_Send(&v, 1, MPI_INT, 0, 0, half);
        } else if (half_rank == 0) {
            int flag = 1, v = 0;
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, &status);
            CHECK(!flag, "the subcommunicator's message showed on the world");
            MPI_Recv(&v, 1, MPI_INT, 1, 0, half, &status);
            CHECK(v == 77 && status.MPI_SOURCE == 1, "half got %d from %d", v, status.MPI_SOURCE);
        }
    }
    if (!(half_size > 1 && half_rank == 0))
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&half);

    /* truncation: a message larger than the buffer is MPI_ERR_TRUNCATE */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 1) {
        int two[2] = {1, 2};
        MPI_Send(two, 2, MPI_INT, 0, 11, MPI_COMM_WORLD);
    } else if (rank == 0) {
        int one, class;
        int err = MPI_Recv(&one, 1, MPI_INT, 1, 11, MPI_COMM_WORLD, &status);
        MPI_Error_class(err, &class);
        CHECK(class == MPI_ERR_TRUNCATE, "truncation gave class %d", class);
        err = MPI_Send(&one, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
        MPI_Error_class(err, &class);
        CHECK(class == MPI_ERR_RANK, "a bad rank gave class %d", class);
        err = MPI_Send(&one, 1, MPI_INT, 1, -5, MPI_COMM_WORLD);
        MPI_Error_class(err, &class);
        CHECK(class == MPI_ERR_TAG, "a bad tag gave class %d", class);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(got);
    free(reqs);
    free(statuses);
    return finish(rank, "p2p");
}
