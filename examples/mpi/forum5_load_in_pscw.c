/* Forum example 5 (MPI-3.1 Example 11.12): A puts X under a lock; after the barrier B posts
 * and starts on itself and loads X. Post and start do not refresh the private copy, so the
 * load reads the old value (not guaranteed to be 42); a get of X from itself inside the epoch
 * reads the public copy, and a load after wait sees A's put (both guaranteed). */
#include "forum.h"

int main(int argc, char **argv)
{
    int rank, b = B;
    long *mem, value = 42, early = -1, fetched = -1, late = -1;
    MPI_Win win;
    MPI_Group world, self;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &b, &self);
    mem = separate_window(1, &win);
    if (rank == A)
        put_locked(value, B, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == B) {
        MPI_Win_post(self, 0, win);
        MPI_Win_start(self, 0, win);
        early = *mem;                                              /* private copy */
        MPI_Get(&fetched, 1, MPI_LONG, B, 0, 1, MPI_LONG, win);   /* public copy */
        MPI_Win_complete(win);
        MPI_Win_wait(win);
        late = *mem;
        EXPECT(early == 0, "the load in the epoch read %ld", early);
        EXPECT(fetched == 42, "the get from itself read %ld", fetched);
        EXPECT(late == 42, "the load after wait read %ld", late);
        printf("forum5: load in the epoch %ld (the obsolete value), get from itself %ld and "
               "load after wait %ld (guaranteed)\n", early, fetched, late);
    }
    MPI_Group_free(&self);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
