/* Fence semantics as stated on the mpiwg-rma list (Rajeev Thakur, "FENCE local completion
 * requirements"; seeds/001), whatever a fence does internally:
 *  1. the memory of a target cannot be accessed until the target has called its fence;
 *  2. a process cannot leave a fence until every RMA operation targeted to it has completed.
 * B stores W[0] = 5 and reaches its fence late: A's get after the opening fence still reads 5
 * (it waits for B's fence, which publishes first, rule 5). A puts W[1] = 9 late: B's closing
 * fence returns only once it is applied, then pulls it (rule 2, then rule 6). The
 * fence(NOPRECEDE) ... fence(NOSTORE | NOSUCCEED) pattern of MPI §11.8 moves data alike. */
#include <unistd.h>

#include "forum.h"

int main(int argc, char **argv)
{
    int rank;
    long *mem, got = -1, nine = 9, three = 3;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Win_allocate(3 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    mem[0] = mem[1] = mem[2] = 0;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    if (rank == B) {
        mem[0] = 5;
        usleep(50000); /* makes it likely that A reaches its get first */
    }
    MPI_Win_fence(0, win);
    if (rank == A) {
        MPI_Get(&got, 1, MPI_LONG, B, 0, 1, MPI_LONG, win);
        usleep(50000); /* makes it likely that B waits in its fence for A's put */
        MPI_Put(&nine, 1, MPI_LONG, B, 1, 1, MPI_LONG, win);
    }
    MPI_Win_fence(0, win);
    if (rank == A) {
        EXPECT(got == 5, "A's get read %ld: B's fence publishes before it lets the get in", got);
        MPI_Put(&three, 1, MPI_LONG, B, 2, 1, MPI_LONG, win);
    }
    if (rank == B)
        EXPECT(mem[1] == 9, "B loads %ld after the closing fence", mem[1]);
    MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOSUCCEED, win);
    if (rank == B) {
        EXPECT(mem[2] == 3, "B loads %ld after fence(nostore, nosucceed)", mem[2]);
        printf("fence: %ld, %ld and %ld as the rules guarantee\n", mem[0], mem[1], mem[2]);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
