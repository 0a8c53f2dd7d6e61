/* What the test programs share: CHECK ends the job with a message naming the line; finish
 * ends a program that passed (MPI_Finalize, then rank 0 prints "NAME: ok"); class_of is the
 * error class of an error code. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            int r_;                                                        \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                            \
            fprintf(stderr, "rank %d: %s:%d: check failed: ", r_, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            exit(3);                                                       \
        }                                                                  \
    } while (0)

static inline int finish(int rank, const char *name) {
    MPI_Finalize();
    if (rank == 0)
        printf("%s: ok\n", name);
    return 0;
}

static inline int class_of(int err) {
    int class;
    MPI_Error_class(err, &class);
    return class;
}
