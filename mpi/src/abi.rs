//! MPICH's ABI: the values of `mpi.h` (`abi_table.rs`, generated from the system's header by
//! `mpi/abi/gen.c` and checked against it by `abi_table_is_mpi_h`), and the maps from its
//! handles to core's datatypes and ops.

use onesided_core::{Datatype, Op};

/// What a basic datatype's elements are, as `gen.c` classifies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Signed,
    Unsigned,
    Float,
    Byte,
    Bool,
    /// No core datatype holds it (`MPI_LONG_DOUBLE_INT`).
    Unsupported,
}

// the table is compared byte for byte with gen.c's output: rustfmt must leave it alone
#[rustfmt::skip]
#[path = "abi_table.rs"]
mod table;
pub use table::*;

/// A basic datatype handle's name, kind and size.
pub fn basic(handle: i32) -> Option<(&'static str, Kind, usize)> {
    DATATYPES
        .iter()
        .find(|(h, ..)| *h == handle)
        .map(|&(_, name, kind, size)| (name, kind, size))
}

/// Core's datatype for a basic datatype handle, or `None` (unknown or unsupported).
pub fn datatype(handle: i32) -> Option<Datatype> {
    let (_, kind, size) = basic(handle)?;
    Some(match (kind, size) {
        (Kind::Signed, 1) => Datatype::I8,
        (Kind::Signed, 2) => Datatype::I16,
        (Kind::Signed, 4) => Datatype::I32,
        (Kind::Signed, 8) => Datatype::I64,
        (Kind::Unsigned, 1) => Datatype::U8,
        (Kind::Unsigned, 2) => Datatype::U16,
        (Kind::Unsigned, 4) => Datatype::U32,
        (Kind::Unsigned, 8) => Datatype::U64,
        (Kind::Float, 4) => Datatype::F32,
        (Kind::Float, 8) => Datatype::F64,
        // x86-64's `long double` is the x87 extended float in 16 bytes (elsewhere a 16-byte
        // `long double` is another format, which no core datatype holds)
        (Kind::Float, 16) if cfg!(target_arch = "x86_64") => Datatype::F80,
        (Kind::Byte, 1) => Datatype::Byte,
        (Kind::Bool, 1) => Datatype::Bool,
        _ => return None,
    })
}

/// A pair datatype of `MPI_MAXLOC`/`MPI_MINLOC`: core's pair type (packed: the value, then the
/// int), the value's size, the int's offset in the C struct and the struct's size — or `None`
/// (not a pair type, or `MPI_LONG_DOUBLE_INT`, which no core datatype holds).
pub fn pair(handle: i32) -> Option<(Datatype, usize, usize, usize)> {
    let &(_, _, kind, value, index, extent) = PAIR_DATATYPES.iter().find(|p| p.0 == handle)?;
    let dtype = match (kind, value) {
        (Kind::Float, 4) => Datatype::PairF32I32,
        (Kind::Float, 8) => Datatype::PairF64I32,
        (Kind::Signed, 8) => Datatype::PairI64I32,
        (Kind::Signed, 4) => Datatype::PairI32I32,
        (Kind::Signed, 2) => Datatype::PairI16I32,
        _ => return None,
    };
    Some((dtype, value, index, extent))
}

/// Core's op for a predefined op handle.
pub fn op(handle: i32) -> Option<Op> {
    Some(match handle {
        MPI_MAX => Op::Max,
        MPI_MIN => Op::Min,
        MPI_SUM => Op::Sum,
        MPI_PROD => Op::Prod,
        MPI_LAND => Op::Land,
        MPI_BAND => Op::Band,
        MPI_LOR => Op::Lor,
        MPI_BOR => Op::Bor,
        MPI_LXOR => Op::Lxor,
        MPI_BXOR => Op::Bxor,
        MPI_MAXLOC => Op::MaxLoc,
        MPI_MINLOC => Op::MinLoc,
        MPI_REPLACE => Op::Replace,
        MPI_NO_OP => Op::NoOp,
        _ => return None,
    })
}

/// The table of error classes, each row `(class, its name, its description)`: the name is the
/// constant's own, written once.
macro_rules! classes {
    ($($class:ident: $text:literal,)*) => {
        &[$(($class, stringify!($class), $text)),*]
    };
}

/// The error classes by MPI name, for `MPI_Error_string` and fatal messages.
pub const CLASSES: &[(i32, &str, &str)] = classes! {
    MPI_SUCCESS: "no error",
    MPI_ERR_BUFFER: "invalid buffer pointer",
    MPI_ERR_COUNT: "invalid count argument",
    MPI_ERR_TYPE: "invalid datatype",
    MPI_ERR_TAG: "invalid tag",
    MPI_ERR_COMM: "invalid communicator",
    MPI_ERR_RANK: "invalid rank",
    MPI_ERR_ROOT: "invalid root",
    MPI_ERR_TRUNCATE: "message truncated",
    MPI_ERR_GROUP: "invalid group",
    MPI_ERR_OP: "invalid reduce operation",
    MPI_ERR_REQUEST: "invalid request",
    MPI_ERR_TOPOLOGY: "invalid topology",
    MPI_ERR_DIMS: "invalid dimension argument",
    MPI_ERR_ARG: "invalid argument",
    MPI_ERR_OTHER: "other error",
    MPI_ERR_UNKNOWN: "unknown error",
    MPI_ERR_INTERN: "internal error",
    MPI_ERR_IN_STATUS: "error code is in status",
    MPI_ERR_PENDING: "pending request",
    MPI_ERR_IO: "input/output error",
    MPI_ERR_INFO: "invalid info object",
    MPI_ERR_INFO_KEY: "invalid info key",
    MPI_ERR_INFO_VALUE: "invalid info value",
    MPI_ERR_INFO_NOKEY: "no such info key",
    MPI_ERR_NO_MEM: "out of memory",
    MPI_ERR_UNSUPPORTED_OPERATION: "unsupported operation",
    MPI_ERR_WIN: "invalid window",
    MPI_ERR_BASE: "invalid base address",
    MPI_ERR_LOCKTYPE: "invalid lock type",
    MPI_ERR_KEYVAL: "invalid keyval",
    MPI_ERR_RMA_CONFLICT: "conflicting accesses to a window",
    MPI_ERR_RMA_SYNC: "wrong synchronization of RMA calls",
    MPI_ERR_SIZE: "invalid size",
    MPI_ERR_DISP: "invalid displacement unit",
    MPI_ERR_ASSERT: "invalid assert",
    MPI_ERR_RMA_RANGE: "target memory is not part of the window",
    MPI_ERR_RMA_ATTACH: "memory cannot be attached",
    MPI_ERR_RMA_SHARED: "memory cannot be shared",
    MPI_ERR_RMA_FLAVOR: "wrong window flavor",
    MPIX_ERR_PROC_FAILED: "process failed",
};

/// The class's MPI name and description; an unknown code is `MPI_ERR_UNKNOWN`'s.
pub fn class_text(class: i32) -> (&'static str, &'static str) {
    CLASSES
        .iter()
        .find(|(c, ..)| *c == class)
        .map(|&(_, name, text)| (name, text))
        .unwrap_or(("MPI_ERR_UNKNOWN", "unknown error"))
}

/// MPICH's class for core's error class (matched by name: core's `WIN` is `MPI_ERR_WIN`).
pub fn class_of(class: onesided_core::ErrorClass) -> i32 {
    if class == onesided_core::ErrorClass::ProcFailed {
        return MPIX_ERR_PROC_FAILED;
    }
    let name = format!("MPI_ERR_{}", class.name());
    CLASSES
        .iter()
        .find(|(_, n, _)| *n == name)
        .map(|&(c, ..)| c)
        .unwrap_or(MPI_ERR_OTHER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in table is exactly what `gen.c` prints from the system's `mpi.h`.
    #[test]
    fn abi_table_is_mpi_h() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = std::env::temp_dir().join(format!("onesided-abi-gen-{}", std::process::id()));
        let built = std::process::Command::new("mpicc")
            .arg(dir.join("abi/gen.c"))
            .arg("-o")
            .arg(&out)
            .status()
            .expect(
                "mpicc (MPICH's compiler wrapper) is needed: apt-get install mpich libmpich-dev",
            );
        assert!(built.success(), "mpicc failed on abi/gen.c");
        let printed = std::process::Command::new(&out).output().unwrap();
        let _ = std::fs::remove_file(&out);
        assert_printed(printed, "src/abi_table.rs", "abi/gen.c");
    }

    /// `abi/functions.txt`, the functions build.rs stubs when the crate does not define them,
    /// is exactly what `functions.sh` prints from the system's `mpi.h`.
    #[test]
    fn the_function_list_is_mpi_h() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let printed = std::process::Command::new("sh")
            .arg(dir.join("abi/functions.sh"))
            .output()
            .expect("sh");
        assert_printed(printed, "abi/functions.txt", "abi/functions.sh");
    }

    /// `generator` ran and `printed` exactly the checked-in `file` (relative to `mpi/`).
    fn assert_printed(printed: std::process::Output, file: &str, generator: &str) {
        assert!(
            printed.status.success(),
            "{generator} failed (it needs mpicc: apt-get install mpich libmpich-dev)"
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let checked_in = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(
            String::from_utf8(printed.stdout).unwrap(),
            checked_in,
            "mpi/{file} differs from the system's mpi.h: regenerate it ({generator})"
        );
    }

    #[test]
    fn every_core_class_has_an_mpich_class() {
        for class in onesided_core::ErrorClass::ALL {
            if class == onesided_core::ErrorClass::Other {
                continue;
            }
            assert_ne!(class_of(class), MPI_ERR_OTHER, "{class:?}");
        }
    }

    #[test]
    fn the_c_types_map_to_core_datatypes() {
        let handle = |name: &str| DATATYPES.iter().find(|d| d.1 == name).unwrap().0;
        assert_eq!(datatype(handle("MPI_INT")), Some(Datatype::I32));
        assert_eq!(datatype(handle("MPI_DOUBLE")), Some(Datatype::F64));
        assert_eq!(datatype(handle("MPI_LONG")), Some(Datatype::I64));
        assert_eq!(datatype(handle("MPI_LONG_DOUBLE")), Some(Datatype::F80));
        let pair_of = |name: &str| {
            let handle = PAIR_DATATYPES.iter().find(|d| d.1 == name).unwrap().0;
            pair(handle)
        };
        // packed, the value then the int; in C, the int after the value's padding
        assert_eq!(pair_of("MPI_2INT"), Some((Datatype::PairI32I32, 4, 4, 8)));
        assert_eq!(
            pair_of("MPI_DOUBLE_INT"),
            Some((Datatype::PairF64I32, 8, 8, 16))
        );
        assert_eq!(
            pair_of("MPI_SHORT_INT"),
            Some((Datatype::PairI16I32, 2, 4, 8))
        );
        assert_eq!(pair_of("MPI_LONG_DOUBLE_INT"), None);
        assert_eq!(op(MPI_SUM), Some(Op::Sum));
    }
}
