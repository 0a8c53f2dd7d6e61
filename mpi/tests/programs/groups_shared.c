/* Group algebra (union, intersection, difference, range_incl/excl, translate_ranks, compare),
 * MPI_Comm_create_group called by a group's members alone,
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) giving each process a communicator of its own, a
 * shared-memory window over it with MPI_Win_shared_query, and one over the world refused with
 * MPI_ERR_RMA_SHARED. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, result;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 4, "needs 4 ranks");

    MPI_Group world, evens, low, both, either, only_evens, back, ranged;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int even_ranges[1][3] = {{0, size - 1, 2}};
    MPI_Group_range_incl(world, 1, even_ranges, &evens);
    int low_ranks[2] = {0, 1};
    MPI_Group_incl(world, 2, low_ranks, &low);
    MPI_Group_intersection(evens, low, &both);
    MPI_Group_union(low, evens, &either);
    MPI_Group_difference(evens, low, &only_evens);
    int n;
    MPI_Group_size(both, &n);
    CHECK(n == 1, "evens and {0,1} share %d", n);
    MPI_Group_size(either, &n);
    CHECK(n == 2 + (size + 1) / 2 - 1, "union of %d", n);
    MPI_Group_size(only_evens, &n);
    CHECK(n == (size + 1) / 2 - 1, "difference of %d", n);

    /* translate: the union lists 0, 1 then the other evens; rank 2 of the world is member 2 */
    int from[3] = {0, 1, 2}, to[3];
    MPI_Group_translate_ranks(either, 3, from, world, to);
    CHECK(to[0] == 0 && to[1] == 1 && to[2] == 2, "translated to %d %d %d", to[0], to[1], to[2]);
    int odd = 1, where;
    MPI_Group_translate_ranks(world, 1, &odd, evens, &where);
    CHECK(where == MPI_UNDEFINED, "an odd rank among the evens: %d", where);

    /* compare: the same members in another order are similar */
    int excl_ranges[1][3] = {{1, size - 1, 2}};
    MPI_Group_range_excl(world, 1, excl_ranges, &back);
    MPI_Group_compare(back, evens, &result);
    CHECK(result == MPI_IDENT, "evens by two routes: %d", result);
    int reversed_ranges[1][3] = {{size - 1, 0, -1}};
    MPI_Group_range_incl(world, 1, reversed_ranges, &ranged);
    MPI_Group_compare(ranged, world, &result);
    CHECK(result == MPI_SIMILAR, "the world reversed: %d", result);
    MPI_Group_compare(evens, world, &result);
    CHECK(result == MPI_UNEQUAL, "evens and the world: %d", result);

    /* a communicator made by the even ranks alone (the odd ones do not call) */
    if (rank % 2 == 0) {
        MPI_Comm even_comm;
        int even_size, sum = 0;
        MPI_Comm_create_group(MPI_COMM_WORLD, evens, 7, &even_comm);
        MPI_Comm_size(even_comm, &even_size);
        CHECK(even_size == (size + 1) / 2, "the evens' communicator has %d", even_size);
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, even_comm);
        CHECK(sum == (even_size - 1) * even_size, "the evens' ranks sum to %d", sum);
        MPI_Comm_free(&even_comm);
    }

    /* a shared-memory communicator is each process alone, and its window is shared memory */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &n);
    CHECK(n == 1, "a shared communicator of %d", n);
    int *mine, *queried, unit, flavor_flag, *flavor;
    MPI_Aint bytes;
    MPI_Win shared;
    MPI_Win_allocate_shared(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine, &shared);
    MPI_Win_shared_query(shared, 0, &bytes, &unit, &queried);
    CHECK(queried == mine && bytes == 4 * sizeof(int) && unit == sizeof(int), "shared query");
    MPI_Win_get_attr(shared, MPI_WIN_CREATE_FLAVOR, &flavor, &flavor_flag);
    CHECK(flavor_flag && *flavor == MPI_WIN_FLAVOR_SHARED, "flavor %d", *flavor);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, shared);
    mine[2] = 7 + rank;
    MPI_Win_unlock(0, shared);
    MPI_Win_free(&shared);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int *refused, class;
    MPI_Win none;
    int err = MPI_Win_allocate_shared(4, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &refused, &none);
    MPI_Error_class(err, &class);
    CHECK(class == MPI_ERR_RMA_SHARED, "a shared window over the world: class %d", class);

    MPI_Comm_free(&node);
    MPI_Group_free(&world);
    MPI_Group_free(&evens);
    MPI_Group_free(&low);
    MPI_Group_free(&both);
    MPI_Group_free(&either);
    MPI_Group_free(&only_evens);
    MPI_Group_free(&back);
    MPI_Group_free(&ranged);
    return finish(rank, "groups_shared");
}
