/* A user error handler on a communicator: called with the communicator and the error code of a
 * failing call on it (a send to a rank outside it), and by MPI_Comm_call_errhandler; the call
 * then returns the code. */
#include "check.h"

static int calls = 0, last_code = 0;
static MPI_Comm last_comm = MPI_COMM_NULL;

static void handler(MPI_Comm *comm, int *code, ...)
{
    calls++;
    last_code = *code;
    last_comm = *comm;
}

int main(int argc, char **argv)
{
    int rank, size, class, value = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Errhandler eh, got;
    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm_set_errhandler(dup, eh);
    MPI_Comm_get_errhandler(dup, &got);
    CHECK(got == eh, "the handler set is the one got");

    int err = MPI_Send(&value, 1, MPI_INT, size, 0, dup);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_RANK, "the send returned class %d", class);
    MPI_Error_class(last_code, &class);
    CHECK(calls == 1 && class == MPI_ERR_RANK && last_comm == dup,
          "the handler saw %d call(s), class %d", calls, class);

    MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
    CHECK(calls == 2 && last_code == MPI_ERR_OTHER, "call_errhandler: %d calls", calls);

    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&dup);
    return finish(rank, "comm_errhandler");
}
