/* What the examples share: EXPECT ends the job with a message naming the line; rank A is 0,
 * rank B (the owner of X) is 1; separate_window makes their window, put_locked and get_locked
 * are an access in an epoch of its own. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define A 0
#define B 1

/* A window of n longs on every rank, of the separate memory model, whose outcomes these
 * examples show (onesided's windows are unified unless asked, as MPICH's are: there, public
 * and private copy are one memory and no value is left obsolete); its longs are 0 in both
 * copies, the opening fence called. */
static inline long *separate_window(int n, MPI_Win *win)
{
    long *mem;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_memory_model", "separate");
    MPI_Win_allocate(n * sizeof(long), sizeof(long), info, MPI_COMM_WORLD, &mem, win);
    MPI_Info_free(&info);
    for (int i = 0; i < n; i++)
        mem[i] = 0;
    MPI_Win_fence(0, *win);
    return mem;
}

/* Puts value into target's first long in an epoch of its own: lock exclusive, put, unlock. */
static inline void put_locked(long value, int target, MPI_Win win)
{
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
    MPI_Put(&value, 1, MPI_LONG, target, 0, 1, MPI_LONG, win);
    MPI_Win_unlock(target, win);
}

/* Gets target's first n longs into got in an epoch of its own: lock (lock_type), get, unlock. */
static inline void get_locked(int lock_type, long *got, int n, int target, MPI_Win win)
{
    MPI_Win_lock(lock_type, target, 0, win);
    MPI_Get(got, n, MPI_LONG, target, 0, n, MPI_LONG, win);
    MPI_Win_unlock(target, win);
}

#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            int r_;                                                        \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                            \
            fprintf(stderr, "rank %d: %s:%d: expected: ", r_, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            exit(3);                                                       \
        }                                                                  \
    } while (0)
