/* Dynamic windows at the program's own addresses: regions on the stack and on the heap (far
 * apart), their contents public once attached, put/get/accumulate by the addresses other ranks
 * learn from MPI_Get_address, a region detached and attached again at the same address with
 * new contents (the next epoch reaches the new one), an address outside every region
 * (MPI_ERR_RMA_RANGE at the call), and MPICH's classes for bad attach and detach calls. */
#include "check.h"

#define N 16

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int *flavor, flag;
    MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_DYNAMIC, "flavor %d", *flavor);

    /* bad calls: MPICH's classes */
    int stack[N], *heap = malloc(N * sizeof(int));
    CHECK(class_of(MPI_Win_attach(win, stack, -1)) == MPI_ERR_SIZE, "negative size");
    CHECK(class_of(MPI_Win_attach(win, NULL, 4)) == MPI_ERR_ARG, "null base");
    CHECK(class_of(MPI_Win_detach(win, NULL)) == MPI_ERR_ARG, "detach of null");
    CHECK(class_of(MPI_Win_detach(win, stack)) == MPI_ERR_RMA_ATTACH, "detach of nothing");
    CHECK(MPI_Win_attach(win, stack, 0) == MPI_SUCCESS, "a region of no bytes");

    for (int i = 0; i < N; i++) {
        stack[i] = 100 * rank + i;
        heap[i] = -100 * rank - i;
    }
    CHECK(MPI_Win_attach(win, stack, sizeof stack) == MPI_SUCCESS, "attach the stack");
    CHECK(MPI_Win_attach(win, heap, N * sizeof(int)) == MPI_SUCCESS, "attach the heap");
    CHECK(class_of(MPI_Win_attach(win, stack + 2, 8)) == MPI_ERR_RMA_ATTACH, "overlap");

    MPI_Win other;
    int *mem;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &other);
    MPI_Win_set_errhandler(other, MPI_ERRORS_RETURN);
    CHECK(class_of(MPI_Win_attach(other, stack, 4)) == MPI_ERR_RMA_FLAVOR, "attach, static");
    CHECK(class_of(MPI_Win_detach(other, stack)) == MPI_ERR_RMA_FLAVOR, "detach, static");
    MPI_Win_free(&other);

    MPI_Aint mine[2], addr[2 * 16];
    MPI_Get_address(stack, &mine[0]);
    MPI_Get_address(heap, &mine[1]);
    MPI_Allgather(mine, 2, MPI_AINT, addr, 2, MPI_AINT, MPI_COMM_WORLD);

    /* the right neighbour's contents as attached; a put into its stack region, an
     * accumulate into its heap region */
    int got[N], one = 1, seven = 7;
    MPI_Win_lock_all(0, win);
    MPI_Get(got, N, MPI_INT, right, addr[2 * right], N, MPI_INT, win);
    MPI_Win_flush(right, win);
    for (int i = 0; i < N; i++)
        CHECK(got[i] == 100 * right + i, "stack[%d] of %d: %d", i, right, got[i]);
    MPI_Get(got, 2, MPI_INT, right, addr[2 * right + 1] + 4 * sizeof(int), 2, MPI_INT, win);
    MPI_Win_flush(right, win);
    CHECK(got[0] == -100 * right - 4 && got[1] == -100 * right - 5, "heap of %d: %d %d", right,
          got[0], got[1]);
    MPI_Put(&seven, 1, MPI_INT, right, addr[2 * right] + 3 * sizeof(int), 1, MPI_INT, win);
    MPI_Accumulate(&one, 1, MPI_INT, right, addr[2 * right + 1], 1, MPI_INT, MPI_SUM, win);
    /* past the end of the stack region: in no region (the heap is far away) */
    int err = MPI_Get(got, 2, MPI_INT, right, addr[2 * right] + (N - 1) * sizeof(int), 2,
                      MPI_INT, win);
    CHECK(class_of(err) == MPI_ERR_RMA_RANGE, "a get across a region's end: class %d",
          class_of(err));
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    MPI_Win_unlock(rank, win);
    CHECK(stack[3] == 7, "the left neighbour's put: %d", stack[3]);
    CHECK(heap[0] == -100 * rank + 1, "the left neighbour's accumulate: %d", heap[0]);

    /* the heap region detached, new contents, attached again at the same address: the next
     * epoch of the left neighbour reads the new region */
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_detach(win, heap) == MPI_SUCCESS, "detach the heap");
    for (int i = 0; i < N; i++)
        heap[i] = 1000 + i;
    CHECK(MPI_Win_attach(win, heap, N * sizeof(int)) == MPI_SUCCESS, "attach it again");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Get(got, N, MPI_INT, right, addr[2 * right + 1], N, MPI_INT, win);
    MPI_Win_unlock(right, win);
    for (int i = 0; i < N; i++)
        CHECK(got[i] == 1000 + i, "heap[%d] of %d attached again: %d", i, right, got[i]);

    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_detach(win, heap) == MPI_SUCCESS, "detach the heap");
    CHECK(MPI_Win_detach(win, stack) == MPI_SUCCESS, "detach the stack");
    MPI_Win_free(&win);
    free(heap);
    return finish(rank, "dynamic");
}
