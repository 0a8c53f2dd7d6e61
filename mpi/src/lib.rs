//! `libmpich.so.12` on onesided: MPICH's ABI (handles, constants, `MPI_Status`, error classes
//! from the system's `mpi.h`, [`abi`]) over the Rust client library, so that a program built
//! by MPICH's `mpicc` runs on the service unchanged under `onesided mpiexec`.
//!
//! - [`error`]: the C boundary — every exported call runs in `guard`: no panic crosses it,
//!   failures go to the error handler of their communicator or window.
//! - [`state`]: the process's session, runtime and handle tables.
//! - [`sync`]: how the program's window memory and the client's private copy stay one.
//! - [`collective`]: bcast/reduce/allreduce over `MPI_COMM_WORLD`, from RMA on a window of the
//!   library's own.
//! - [`attributes`]: attributes on communicators, and the world's predefined ones.
//! - [`data`]: the data symbols of MPICH's ABI (sentinels programs take the address of).
//! - [`datatype`]: derived datatypes of one basic type, as byte runs.
//! - [`dynamic`]: dynamic windows at the program's own addresses, and the directories that
//!   turn them into the service's.
//! - [`intercomm`]: intercommunicators, made and merged.
//! - [`groups`]: group union, intersection, difference, ranges, translation, comparison.
//! - [`ops`]: user-defined reduction operations, in `MPI_Reduce` and `MPI_Allreduce`.
//! - [`p2p`]: point-to-point messages, carried and matched by the service.
//! - [`requests`]: the wait/test family over every kind of request.
//! - [`win_attributes`]: a window's attributes, keyvals, error handlers and hints.
//! - `env` and `rma`: the exported calls, each under `MPI_X` and `PMPI_X`; `unsupported`: the
//!   calls of later phases, failing with `MPI_ERR_UNSUPPORTED_OPERATION`.
//!
//! ARCHITECTURE.md ("`mpi/`") says what is there and what is not yet.
// The exported functions are C's: MPI's names, raw pointers whose validity is the C program's
// promise under the MPI standard (the "safety" documentation of every one of them).
#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

/// Exports each call under its `MPI_` name and its profiling `PMPI_` name, its body run in
/// [`error::guard`].
macro_rules! export {
    ($(
        $(#[$meta:meta])*
        fn $name:ident / $pname:ident ( $($arg:ident : $ty:ty),* $(,)? ) $body:block
    )*) => {$(
        $(#[$meta])*
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($arg: $ty),*) -> ::std::ffi::c_int {
            $crate::error::guard(stringify!($name), move || -> $crate::error::Res { $body })
        }
        #[doc = concat!("`", stringify!($name), "`: as `", stringify!($pname), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> ::std::ffi::c_int {
            $pname($($arg),*)
        }
    )*};
}

/// Exports each call and its request-based form (`MPI_Put` and `MPI_Rput`, `MPI_Send` and
/// `MPI_Isend`), which takes one argument more, a `*mut c_int` for the request: one body for
/// both, in which the name after the `;` is that argument, an `Option` (`None` in the first).
macro_rules! export_with_request_form {
    ($(
        $(#[$meta:meta])*
        fn $name:ident / $pname:ident, $rname:ident / $rpname:ident (
            $($arg:ident : $ty:ty),* $(,)? ; $request:ident
        ) $body:block
    )*) => {$(
        export! {
            $(#[$meta])*
            fn $name / $pname($($arg: $ty),*) {
                let $request: Option<*mut ::std::ffi::c_int> = None;
                $body
            }

            $(#[$meta])*
            fn $rname / $rpname($($arg: $ty,)* $request: *mut ::std::ffi::c_int) {
                let $request = Some($request);
                $body
            }
        }
    )*};
}

pub mod abi;
pub mod attributes;
pub mod collective;
pub mod data;
pub mod datatype;
pub mod dynamic;
pub mod env;
pub mod error;
pub mod groups;
pub mod intercomm;
pub mod ops;
pub mod p2p;
pub mod requests;
pub mod rma;
pub mod state;
pub mod sync;
pub mod unsupported;
pub mod win_attributes;
