/* What the examples share: EXPECT ends the job with a message naming the line; rank A is 0,
 * rank B (the owner of X) is 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define A 0
#define B 1

/* The info that asks for a window of the separate memory model, whose outcomes these examples
 * show (onesided's windows are unified unless asked, as MPICH's are: there, public and private
 * copy are one memory and no value is left obsolete). */
static inline MPI_Info separate_model(void)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_memory_model", "separate");
    return info;
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
