//! MPI error classes and the one error type every core check returns.
//!
//! Owns: the vocabulary of failure (MPI-3.1 §11.6.2 plus the general classes RMA calls
//! return). Must not: know about gRPC; the proto crate maps classes to status codes.

use std::fmt;

/// An MPI error class. The numeric values are stable: they travel on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorClass {
    /// Invalid window (unknown, freed).
    Win = 1,
    /// Invalid base.
    Base = 2,
    /// Invalid size.
    Size = 3,
    /// Invalid displacement or disp_unit.
    Disp = 4,
    /// Invalid lock type.
    LockType = 5,
    /// Invalid assertion bits for the call.
    Assert = 6,
    /// Conflicting epochs.
    RmaConflict = 7,
    /// Invalid synchronization of RMA calls.
    RmaSync = 8,
    /// Target memory not in the window.
    RmaRange = 9,
    /// Memory cannot be attached.
    RmaAttach = 10,
    /// Memory cannot be shared.
    RmaShared = 11,
    /// Wrong window flavor for the call.
    RmaFlavor = 12,
    /// Rank outside the group.
    Rank = 13,
    /// Invalid datatype, or datatypes that do not match.
    Type = 14,
    /// Invalid operation for the call or the datatype.
    Op = 15,
    /// Invalid count.
    Count = 16,
    /// Invalid argument of another kind.
    Arg = 17,
    /// Invalid group.
    Group = 18,
    /// Invalid info key or value.
    Info = 19,
    /// A process this call needs has failed (ULFM's MPI_ERR_PROC_FAILED).
    ProcFailed = 20,
    /// Resources exhausted.
    NoMem = 21,
    /// Internal error of the implementation.
    Intern = 22,
    /// Other error.
    Other = 23,
    /// The audit store cannot be written (MPI_ERR_IO): in `sync` durability nothing is
    /// acknowledged that is not stored, so the call is refused (UNAVAILABLE) until it is back.
    Io = 24,
    /// Invalid request (MPI_ERR_REQUEST): one that was already completed and waited for,
    /// tested complete, or freed.
    Request = 25,
}

impl ErrorClass {
    /// Every class, in wire order.
    pub const ALL: [ErrorClass; 25] = [
        ErrorClass::Win,
        ErrorClass::Base,
        ErrorClass::Size,
        ErrorClass::Disp,
        ErrorClass::LockType,
        ErrorClass::Assert,
        ErrorClass::RmaConflict,
        ErrorClass::RmaSync,
        ErrorClass::RmaRange,
        ErrorClass::RmaAttach,
        ErrorClass::RmaShared,
        ErrorClass::RmaFlavor,
        ErrorClass::Rank,
        ErrorClass::Type,
        ErrorClass::Op,
        ErrorClass::Count,
        ErrorClass::Arg,
        ErrorClass::Group,
        ErrorClass::Info,
        ErrorClass::ProcFailed,
        ErrorClass::NoMem,
        ErrorClass::Intern,
        ErrorClass::Other,
        ErrorClass::Io,
        ErrorClass::Request,
    ];

    /// The short name used in scenarios and CLI output (`RMA_SYNC`, `TYPE`, …).
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Win => "WIN",
            ErrorClass::Base => "BASE",
            ErrorClass::Size => "SIZE",
            ErrorClass::Disp => "DISP",
            ErrorClass::LockType => "LOCKTYPE",
            ErrorClass::Assert => "ASSERT",
            ErrorClass::RmaConflict => "RMA_CONFLICT",
            ErrorClass::RmaSync => "RMA_SYNC",
            ErrorClass::RmaRange => "RMA_RANGE",
            ErrorClass::RmaAttach => "RMA_ATTACH",
            ErrorClass::RmaShared => "RMA_SHARED",
            ErrorClass::RmaFlavor => "RMA_FLAVOR",
            ErrorClass::Rank => "RANK",
            ErrorClass::Type => "TYPE",
            ErrorClass::Op => "OP",
            ErrorClass::Count => "COUNT",
            ErrorClass::Arg => "ARG",
            ErrorClass::Group => "GROUP",
            ErrorClass::Info => "INFO",
            ErrorClass::ProcFailed => "PROC_FAILED",
            ErrorClass::NoMem => "NO_MEM",
            ErrorClass::Intern => "INTERN",
            ErrorClass::Other => "OTHER",
            ErrorClass::Io => "IO",
            ErrorClass::Request => "REQUEST",
        }
    }

    /// The MPI constant's name (`MPI_ERR_RMA_SYNC`, …).
    pub fn mpi_name(self) -> String {
        format!("MPI_ERR_{}", self.name())
    }

    /// Parses a short name (`RMA_SYNC`) or an MPI constant name (`MPI_ERR_RMA_SYNC`).
    pub fn parse(text: &str) -> Option<Self> {
        let short = text.strip_prefix("MPI_ERR_").unwrap_or(text);
        Self::ALL
            .into_iter()
            .find(|class| class.name().eq_ignore_ascii_case(short))
    }

    /// The wire value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The class for a wire value.
    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.code() == code)
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.mpi_name())
    }
}

/// A refused call: the MPI error class and a lowercase message saying why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{class}: {message}")]
pub struct RmaError {
    /// The MPI error class.
    pub class: ErrorClass,
    /// What was wrong, for a person.
    pub message: String,
    /// The call was refused before it changed anything anywhere (the audit store away, a node
    /// not yet sure it still serves the world): the same call may be made again as it was,
    /// and the caller's own state must be as if it had not been made.
    pub unchanged: bool,
}

impl RmaError {
    /// A new error of `class`.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        RmaError {
            class,
            message: message.into(),
            unchanged: false,
        }
    }

    /// A refusal that changed nothing: see [`RmaError::unchanged`](RmaError#structfield.unchanged).
    pub fn unchanged(class: ErrorClass, message: impl Into<String>) -> Self {
        RmaError {
            unchanged: true,
            ..RmaError::new(class, message)
        }
    }
}

/// How many characters of a client's input an error message shows whole (the longest world or
/// window name).
pub const ECHO_WHOLE: usize = 128;

/// How many characters of a longer input it shows.
pub const ECHO_CUT: usize = 64;

/// A client's input as an error message shows it: quoted and escaped, whole up to
/// [`ECHO_WHOLE`] characters, else its first [`ECHO_CUT`] and its length. Every value a message
/// echoes goes through here, so a refusal stays short whatever was sent (a 20 000-character
/// name once came back whole, and the client failed on the size of the response headers).
pub fn quoted(input: &str) -> String {
    if input.chars().count() <= ECHO_WHOLE {
        return format!("{input:?}");
    }
    let cut: String = input.chars().take(ECHO_CUT).collect();
    format!("{cut:?}…({} bytes)", input.len())
}

/// Shorthand for a core result.
pub type RmaResult<T> = Result<T, RmaError>;

/// Builds an [`RmaError`] with `format!` arguments.
#[macro_export]
macro_rules! rma_err {
    ($class:ident, $($arg:tt)*) => {
        $crate::error::RmaError::new($crate::error::ErrorClass::$class, format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for class in ErrorClass::ALL {
            assert_eq!(ErrorClass::parse(class.name()), Some(class));
            assert_eq!(ErrorClass::parse(&class.mpi_name()), Some(class));
            assert_eq!(ErrorClass::from_code(class.code()), Some(class));
        }
        assert_eq!(ErrorClass::parse("NOPE"), None);
    }

    #[test]
    fn quoted_input_is_whole_up_to_its_bound_and_cut_after_it() {
        let whole = "é".repeat(ECHO_WHOLE);
        assert_eq!(quoted(&whole), format!("\"{whole}\""));
        assert_eq!(quoted("a\"b\n"), "\"a\\\"b\\n\"");
        let long = "é".repeat(20_000);
        let shown = quoted(&long);
        assert_eq!(shown, format!("\"{}\"…(40000 bytes)", "é".repeat(ECHO_CUT)));
    }
}
