/* MPI_Win_set_info after creation (collective: every rank asks for the same hints) and
 * MPI_Win_get_info reporting the hints in use, defaults included. */
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    int rank, flag, *mem;
    char value[MPI_MAX_INFO_VAL + 1];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Win win;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    MPI_Info used, hints;
    MPI_Win_get_info(win, &used);
    MPI_Info_get(used, "accumulate_ops", MPI_MAX_INFO_VAL, value, &flag);
    CHECK(flag && strcmp(value, "same_op_no_op") == 0, "the default accumulate_ops: %s", value);
    MPI_Info_free(&used);

    MPI_Info_create(&hints);
    MPI_Info_set(hints, "accumulate_ops", "same_op");
    MPI_Win_set_info(win, hints);
    MPI_Info_free(&hints);
    MPI_Win_get_info(win, &used);
    MPI_Info_get(used, "accumulate_ops", MPI_MAX_INFO_VAL, value, &flag);
    CHECK(flag && strcmp(value, "same_op") == 0, "accumulate_ops after set_info: %s", value);
    MPI_Info_free(&used);

    MPI_Win_free(&win);
    return finish(rank, "win_info");
}
