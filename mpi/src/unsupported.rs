//! Calls of MPI that this phase does not implement yet, exported so that a program calling one
//! gets MPI's answer — `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler of
//! `MPI_COMM_WORLD` (by default: the class and message printed, the job ended) — instead of
//! the loader's `undefined symbol`. They take no parameters here: the C caller's arguments are
//! never read (the x86-64 C calling convention leaves them to the caller).

use crate::abi::MPI_ERR_UNSUPPORTED_OPERATION;
use crate::error::fail;

macro_rules! unsupported {
    ($($name:ident / $pname:ident: $what:literal,)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: not supported yet (", $what, ").")]
        #[no_mangle]
        pub extern "C" fn $pname() -> ::std::ffi::c_int {
            $crate::error::guard(stringify!($name), || {
                Err(fail(
                    MPI_ERR_UNSUPPORTED_OPERATION,
                    concat!(stringify!($name), " is not supported yet: ", $what),
                ))
            })
        }
        #[doc = concat!("`", stringify!($name), "`: as `", stringify!($pname), "`.")]
        #[no_mangle]
        pub extern "C" fn $name() -> ::std::ffi::c_int {
            $pname()
        }
    )*};
}

unsupported! {
    MPI_Op_create / PMPI_Op_create: "user ops",
    MPI_Op_free / PMPI_Op_free: "user ops",
    MPI_Intercomm_create / PMPI_Intercomm_create: "intercommunicators",
    MPI_Intercomm_merge / PMPI_Intercomm_merge: "intercommunicators",
    MPI_Comm_remote_size / PMPI_Comm_remote_size: "intercommunicators",
    MPI_Comm_remote_group / PMPI_Comm_remote_group: "intercommunicators",
    MPI_Comm_create_group / PMPI_Comm_create_group: "communicators made by a group alone",
    MPI_Comm_split_type / PMPI_Comm_split_type: "MPI_Comm_split_type",
    MPI_Comm_create_keyval / PMPI_Comm_create_keyval: "attributes on communicators",
    MPI_Comm_free_keyval / PMPI_Comm_free_keyval: "attributes on communicators",
    MPI_Comm_set_attr / PMPI_Comm_set_attr: "attributes on communicators",
    MPI_Comm_get_attr / PMPI_Comm_get_attr: "attributes on communicators",
    MPI_Comm_delete_attr / PMPI_Comm_delete_attr: "attributes on communicators",
    MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler: "user error handlers on communicators",
    MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler: "user error handlers on communicators",
    MPI_Win_create_dynamic / PMPI_Win_create_dynamic: "dynamic windows",
    MPI_Win_attach / PMPI_Win_attach: "dynamic windows",
    MPI_Win_detach / PMPI_Win_detach: "dynamic windows",
    MPI_Win_allocate_shared / PMPI_Win_allocate_shared: "shared-memory windows",
    MPI_Win_shared_query / PMPI_Win_shared_query: "shared-memory windows",
    MPI_Win_set_info / PMPI_Win_set_info: "window info after creation",
    MPI_Win_get_info / PMPI_Win_get_info: "window info after creation",
    MPI_Type_get_envelope / PMPI_Type_get_envelope: "datatype decoding",
    MPI_Type_get_contents / PMPI_Type_get_contents: "datatype decoding",
}
