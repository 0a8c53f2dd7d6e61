#!/bin/sh
# Prints the MPI functions the system's mpi.h declares (MPICH's mpi.h and mpi_proto.h, through
# mpicc's preprocessor), one name per line, sorted: mpi/abi/functions.txt, checked in. build.rs
# exports every one of them that the crate does not implement as a stub failing with
# MPI_ERR_UNSUPPORTED_OPERATION, and the test `every_function_of_mpi_h_is_exported` compares the
# two. Regenerate with
#   sh mpi/abi/functions.sh > mpi/abi/functions.txt
set -eu
echo '#include <mpi.h>' | mpicc -E -x c - \
  | grep -oE '^[A-Za-z_][A-Za-z0-9_ *]* [*]?MPI_[A-Za-z0-9_]+[(]' \
  | grep -oE 'MPI_[A-Za-z0-9_]+[(]$' \
  | tr -d '(' \
  | LC_ALL=C sort -u
