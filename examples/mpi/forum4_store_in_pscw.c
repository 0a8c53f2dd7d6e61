/* Forum example 4 (MPI-3.1 Example 11.11): A stores Y before posting (post publishes it) and
 * stores X during its exposure epoch; neither complete nor wait publishes private stores, so
 * after the barrier B reads Y = 11 (guaranteed) and X's old value (not guaranteed to be 22).
 * The fix: A puts X to itself inside its access epoch, which B then reads (guaranteed). */
#include "forum.h"

int main(int argc, char **argv)
{
    int rank;
    long *mem, got[3] = {-1, -1, -1}, z = 33;
    MPI_Win win;
    MPI_Group world, both, owner;
    int ranks[2] = {A, B}, a = A;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 2, ranks, &both);
    MPI_Group_incl(world, 1, &a, &owner);
    mem = separate_window(3, &win);
    if (rank == A) {
        mem[1] = 11;                     /* Y, before post */
        MPI_Win_post(both, 0, win);      /* rule 5: Y is public */
        MPI_Win_start(owner, 0, win);
        mem[0] = 22;                     /* X: private copy only */
        MPI_Put(&z, 1, MPI_LONG, A, 2, 1, MPI_LONG, win); /* Z: the fix, a put to itself */
        MPI_Win_complete(win);
        MPI_Win_wait(win);               /* wait does not publish */
    } else if (rank == B) {
        MPI_Win_start(owner, 0, win);
        MPI_Win_complete(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == B) {
        get_locked(MPI_LOCK_EXCLUSIVE, got, 3, A, win);
        EXPECT(got[1] == 11, "Y is %ld: post published it", got[1]);
        EXPECT(got[0] == 0, "X is %ld: neither complete nor wait publishes", got[0]);
        EXPECT(got[2] == 33, "Z is %ld: the put to itself updated the public copy", got[2]);
        printf("forum4: Y = %ld (guaranteed), X = %ld (the obsolete value), Z = %ld "
               "(guaranteed)\n", got[1], got[0], got[2]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Group_free(&both);
    MPI_Group_free(&owner);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
