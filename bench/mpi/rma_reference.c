/*
 * rma_reference: the RMA patterns of onesided-bench (bench/src/measure.rs), timed with MPI
 * between rank 0 and rank 1, as the MPICH reference of BENCHMARKS.md.
 *
 * Usage: mpiexec -n 2 rma_reference ITERATIONS BULK_BYTES
 *
 * Same definitions as the Rust bench: every pattern runs ITERATIONS + max(ITERATIONS / 10, 1)
 * times, the first 10 % unmeasured; each iteration is timed at rank 0 with MPI_Wtime and the
 * figure is the median of the measured ones, in microseconds. The bulk figure is one put of
 * BULK_BYTES inside lock(EXCLUSIVE)/unlock, median of 5 after one warm-up, in MiB/s (skipped
 * when BULK_BYTES is 0). Rank 0 prints one JSON object on stdout; errors go to stderr and abort.
 * After each pattern rank 1 checks what arrived in its memory, so a figure is never of RMA
 * calls that went astray.
 *
 * Windows are MPI_Alloc_mem + MPI_Win_create, not MPI_Win_allocate: in MPICH 4.0.2's ch4:ucx
 * with UCX >= 1.13 (Debian 12's packages), RMA on an MPI_Win_allocate window lands in the
 * origin's own memory (pmodels/mpich#6110, fixed after 4.0.2 by pmodels/mpich#6140).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

static void check(int code, const char *what)
{
    if (code != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        MPI_Error_string(code, text, &length);
        fprintf(stderr, "rma_reference: rank %d: %s failed: %s\n", rank, what, text);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static int warm_up(int iterations)
{
    return iterations / 10 > 1 ? iterations / 10 : 1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n samples in seconds, returned in microseconds (as measure::median). */
static double median_us(double *samples, int n)
{
    qsort(samples, (size_t)n, sizeof *samples, by_value);
    double middle = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
    return middle * 1e6;
}

enum pattern {
    LOCK_PUT_UNLOCK,
    FENCE_PUT,
    LOCK_ACC_UNLOCK,
    LOCK_GET_UNLOCK,
    FOP_FLUSH,
    CAS_FLUSH,
    PSCW_PUT,
    PATTERNS
};

/* Same names and order as LATENCY_KEYS in bench/src/lib.rs. */
static const char *const keys[PATTERNS] = {
    "lock_put_unlock_us", "fence_put_us", "lock_acc_unlock_us", "lock_get_unlock_us",
    "fop_flush_us",       "cas_flush_us", "pscw_put_us",
};

/*
 * One pattern on a fresh window of one int64 per rank. Rank 1 is the target; in passive-target
 * patterns it sits in MPI_Barrier (which drives MPICH's progress) until rank 0 is done.
 * Returns rank 0's median in µs (0 on rank 1).
 */
static double latency(enum pattern pattern, int iterations, double *samples)
{
    int64_t *base = NULL;
    MPI_Win win;
    check(MPI_Alloc_mem(sizeof(int64_t), MPI_INFO_NULL, &base), "MPI_Alloc_mem");
    *base = 0;
    check(MPI_Win_create(base, sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
                         &win),
          "MPI_Win_create");
    MPI_Group world_group, peer_group;
    int peer = 1 - rank;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, 1, &peer, &peer_group);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

    int skip = warm_up(iterations), total = iterations + skip;
    int64_t one = 1, got = 0, old = 0;
    if (pattern == FENCE_PUT) {
        /* both ranks: an opening fence, then one put to the other rank + fence per epoch */
        check(MPI_Win_fence(0, win), "MPI_Win_fence");
        for (int i = 0; i < total; i++) {
            int64_t value = i;
            double started = MPI_Wtime();
            check(MPI_Put(&value, 1, MPI_INT64_T, peer, 0, 1, MPI_INT64_T, win), "MPI_Put");
            check(MPI_Win_fence(0, win), "MPI_Win_fence");
            if (i >= skip)
                samples[i - skip] = MPI_Wtime() - started;
        }
    } else if (pattern == PSCW_PUT && rank == 1) {
        for (int i = 0; i < total; i++) {
            check(MPI_Win_post(peer_group, 0, win), "MPI_Win_post");
            check(MPI_Win_wait(win), "MPI_Win_wait");
        }
    } else if (rank == 0) {
        if (pattern == FOP_FLUSH || pattern == CAS_FLUSH)
            check(MPI_Win_lock_all(0, win), "MPI_Win_lock_all");
        for (int i = 0; i < total; i++) {
            int64_t value = i, next = (int64_t)i + 1;
            double started = MPI_Wtime();
            switch (pattern) {
            case LOCK_PUT_UNLOCK:
                check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win), "MPI_Win_lock");
                check(MPI_Put(&value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win), "MPI_Put");
                check(MPI_Win_unlock(1, win), "MPI_Win_unlock");
                break;
            case LOCK_ACC_UNLOCK:
                check(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win), "MPI_Win_lock");
                check(MPI_Accumulate(&one, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, MPI_SUM, win),
                      "MPI_Accumulate");
                check(MPI_Win_unlock(1, win), "MPI_Win_unlock");
                break;
            case LOCK_GET_UNLOCK:
                check(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win), "MPI_Win_lock");
                check(MPI_Get(&got, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win), "MPI_Get");
                check(MPI_Win_unlock(1, win), "MPI_Win_unlock");
                break;
            case FOP_FLUSH:
                check(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 1, 0, MPI_SUM, win),
                      "MPI_Fetch_and_op");
                check(MPI_Win_flush(1, win), "MPI_Win_flush");
                break;
            case CAS_FLUSH:
                check(MPI_Compare_and_swap(&next, &value, &old, MPI_INT64_T, 1, 0, win),
                      "MPI_Compare_and_swap");
                check(MPI_Win_flush(1, win), "MPI_Win_flush");
                break;
            case PSCW_PUT:
                check(MPI_Win_start(peer_group, 0, win), "MPI_Win_start");
                check(MPI_Put(&value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win), "MPI_Put");
                check(MPI_Win_complete(win), "MPI_Win_complete");
                break;
            default:
                break;
            }
            if (i >= skip)
                samples[i - skip] = MPI_Wtime() - started;
        }
        if (pattern == FOP_FLUSH || pattern == CAS_FLUSH)
            check(MPI_Win_unlock_all(win), "MPI_Win_unlock_all");
    }
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

    /* what rank 0 did must be in rank 1's memory: the last put, or a sum per iteration */
    if (rank == 1) {
        int64_t expected = -1;
        if (pattern == LOCK_PUT_UNLOCK || pattern == FENCE_PUT || pattern == PSCW_PUT)
            expected = total - 1;
        else if (pattern == LOCK_ACC_UNLOCK || pattern == FOP_FLUSH || pattern == CAS_FLUSH)
            expected = total;
        else if (pattern == LOCK_GET_UNLOCK)
            expected = 0;
        check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win), "MPI_Win_lock");
        int64_t value = *base;
        check(MPI_Win_unlock(1, win), "MPI_Win_unlock");
        if (value != expected) {
            fprintf(stderr, "rma_reference: %s left %lld at rank 1, not %lld\n", keys[pattern],
                    (long long)value, (long long)expected);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Group_free(&peer_group);
    MPI_Group_free(&world_group);
    check(MPI_Win_free(&win), "MPI_Win_free");
    MPI_Free_mem(base);
    return rank == 0 ? median_us(samples, iterations) : 0.0;
}

/* One put of `bytes` inside lock(EXCLUSIVE)/unlock from rank 0 to rank 1: MiB/s of the median
 * of 5 after one unmeasured warm-up (as the Rust bench's sample(5, …)). */
static double bulk_put(int bytes)
{
    enum { REPEATS = 5 };
    unsigned char *base = NULL, *data = malloc((size_t)bytes);
    if (data == NULL) {
        fprintf(stderr, "rma_reference: cannot allocate %d bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < bytes; i++)
        data[i] = (unsigned char)(i % 251);
    MPI_Win win;
    check(MPI_Alloc_mem(bytes, MPI_INFO_NULL, &base), "MPI_Alloc_mem");
    check(MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win), "MPI_Win_create");
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double samples[REPEATS];
    int skip = warm_up(REPEATS);
    if (rank == 0) {
        for (int i = 0; i < REPEATS + skip; i++) {
            double started = MPI_Wtime();
            check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win), "MPI_Win_lock");
            check(MPI_Put(data, bytes, MPI_BYTE, 1, 0, bytes, MPI_BYTE, win), "MPI_Put");
            check(MPI_Win_unlock(1, win), "MPI_Win_unlock");
            if (i >= skip)
                samples[i - skip] = MPI_Wtime() - started;
        }
    }
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    if (rank == 1) {
        check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win), "MPI_Win_lock");
        int same = memcmp(base, data, (size_t)bytes) == 0;
        check(MPI_Win_unlock(1, win), "MPI_Win_unlock");
        if (!same) {
            fprintf(stderr, "rma_reference: the bulk put did not arrive intact\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    check(MPI_Win_free(&win), "MPI_Win_free");
    MPI_Free_mem(base);
    free(data);
    if (rank != 0)
        return 0.0;
    double seconds = median_us(samples, REPEATS) / 1e6;
    return (double)bytes / (1024.0 * 1024.0) / seconds;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iterations = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    long bulk_bytes = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
    if (size != 2 || iterations < 1 || iterations > 10000000 || bulk_bytes < 0 ||
        bulk_bytes > (1L << 30)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 rma_reference ITERATIONS BULK_BYTES "
                            "(2 ranks, 1 ≤ ITERATIONS, 0 ≤ BULK_BYTES ≤ 1 GiB)\n");
        MPI_Finalize();
        return 1;
    }
    /* errors are checked and reported by check(), not fatal inside MPI */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    double *samples = malloc((size_t)iterations * sizeof *samples);
    double medians[PATTERNS];
    for (int p = 0; p < PATTERNS; p++)
        medians[p] = latency((enum pattern)p, (int)iterations, samples);
    double bulk = bulk_bytes > 0 ? bulk_put((int)bulk_bytes) : 0.0;
    free(samples);

    if (rank == 0) {
        char library[MPI_MAX_LIBRARY_VERSION_STRING];
        int length = 0;
        MPI_Get_library_version(library, &length);
        /* the first line, without characters that would need escaping in JSON */
        size_t end = strcspn(library, "\r\n");
        library[end] = '\0';
        for (size_t i = 0; i < end; i++)
            if (library[i] == '"' || library[i] == '\\' || (unsigned char)library[i] < 0x20)
                library[i] = ' ';
        printf("{\"library\": \"%s\", \"iterations\": %ld", library, iterations);
        for (int p = 0; p < PATTERNS; p++)
            printf(", \"%s\": %.3f", keys[p], medians[p]);
        if (bulk_bytes > 0)
            printf(", \"bulk_put_mib_per_s\": %.1f, \"bulk_put_bytes\": %ld", bulk, bulk_bytes);
        printf("}\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
