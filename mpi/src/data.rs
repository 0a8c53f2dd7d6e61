//! The data symbols of MPICH's ABI (`extern` objects of `mpi.h`): the sentinels whose addresses
//! programs pass (`MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY`, the Fortran `STATUS_IGNORE`s, the F08
//! status objects and `IN_PLACE`/`BOTTOM` markers, `MPI_T_PVAR_ALL_HANDLES`). Nothing here
//! interprets them: the calls that would (graph topologies, Fortran conversions, the tool
//! interface) are stubs; what matters is that a program, or mpi4py, that refers to them loads.
//!
//! Owns: their storage and addresses. Must not: be written by this library.

use std::ffi::c_int;

/// A pointer a C program reads from a global, never through it from here.
#[repr(transparent)]
#[derive(Debug)]
pub struct Sentinel(*const c_int);

// SAFETY: the pointers are addresses of the statics below, never written through by this library
unsafe impl Sync for Sentinel {}

/// MPICH's `MPI_F08_status`: five `MPI_Fint`s.
pub type F08Status = [c_int; 5];

static UNWEIGHTED: c_int = 0;
static WEIGHTS_EMPTY: c_int = 0;
static F_STATUS_IGNORE: c_int = 0;
static F_STATUSES_IGNORE: c_int = 0;
static PVAR_ALL_HANDLES: c_int = 0;

/// `MPI_UNWEIGHTED`.
#[no_mangle]
pub static MPI_UNWEIGHTED: Sentinel = Sentinel(&UNWEIGHTED);
/// `MPI_WEIGHTS_EMPTY`.
#[no_mangle]
pub static MPI_WEIGHTS_EMPTY: Sentinel = Sentinel(&WEIGHTS_EMPTY);
/// `MPI_F_STATUS_IGNORE`.
#[no_mangle]
pub static MPI_F_STATUS_IGNORE: Sentinel = Sentinel(&F_STATUS_IGNORE);
/// `MPI_F_STATUSES_IGNORE`.
#[no_mangle]
pub static MPI_F_STATUSES_IGNORE: Sentinel = Sentinel(&F_STATUSES_IGNORE);
/// `MPI_T_PVAR_ALL_HANDLES`.
#[no_mangle]
pub static MPI_T_PVAR_ALL_HANDLES: Sentinel = Sentinel(&PVAR_ALL_HANDLES);
/// `MPIR_F08_MPI_STATUS_IGNORE_OBJ`.
#[no_mangle]
pub static MPIR_F08_MPI_STATUS_IGNORE_OBJ: F08Status = [0; 5];
/// `MPIR_F08_MPI_STATUSES_IGNORE_OBJ` (an array of one).
#[no_mangle]
pub static MPIR_F08_MPI_STATUSES_IGNORE_OBJ: [F08Status; 1] = [[0; 5]];
/// `MPIR_F08_MPI_IN_PLACE`.
#[no_mangle]
pub static MPIR_F08_MPI_IN_PLACE: c_int = 0;
/// `MPIR_F08_MPI_BOTTOM`.
#[no_mangle]
pub static MPIR_F08_MPI_BOTTOM: c_int = 0;
/// `MPI_F08_STATUS_IGNORE`.
#[no_mangle]
pub static MPI_F08_STATUS_IGNORE: Sentinel =
    Sentinel(std::ptr::addr_of!(MPIR_F08_MPI_STATUS_IGNORE_OBJ).cast());
/// `MPI_F08_STATUSES_IGNORE`.
#[no_mangle]
pub static MPI_F08_STATUSES_IGNORE: Sentinel =
    Sentinel(std::ptr::addr_of!(MPIR_F08_MPI_STATUSES_IGNORE_OBJ).cast());
