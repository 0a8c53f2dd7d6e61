/* Generalized active target: even ranks expose, odd ranks access their left neighbour. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, buf[2] = {0, 0};
    MPI_Win win;
    MPI_Group world, peer;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    if (rank % 2 == 0 && rank + 1 < size) {
        int other = rank + 1;
        MPI_Group_incl(world, 1, &other, &peer);
        MPI_Win_post(peer, 0, win);
        MPI_Win_wait(win);
        CHECK(buf[1] == 7 * other, "buf[1] is %d", buf[1]);
        MPI_Group_free(&peer);
    } else if (rank % 2 == 1) {
        int other = rank - 1, value = 7 * rank;
        MPI_Group_incl(world, 1, &other, &peer);
        MPI_Win_start(peer, 0, win);
        MPI_Put(&value, 1, MPI_INT, other, 1, 1, MPI_INT, win);
        MPI_Win_complete(win);
        MPI_Group_free(&peer);
    }
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    return finish(rank, "pscw");
}
