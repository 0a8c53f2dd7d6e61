//! onesided-proto: the `onesided.v1` gRPC definitions and the one mapping between them and
//! core's types.
//!
//! Owns: prost/tonic codegen (the only crate that knows it), the table from MPI error class to
//! gRPC code, and conversions of layouts, datatypes and ops. Must not: decide semantics.

#![allow(missing_docs, clippy::large_enum_variant)]

/// Generated code of package `onesided.v1`.
#[allow(clippy::all, missing_debug_implementations, rust_2018_idioms)]
pub mod v1 {
    tonic::include_proto!("onesided.v1");
}

impl std::fmt::Debug for v1::CreateWorldResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateWorldResponse")
            .field("name", &self.name)
            .field("tokens", &format_args!("<{} redacted>", self.tokens.len()))
            .finish()
    }
}

/// The encoded file descriptor set, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("onesided_descriptor");

use onesided_core::layout::Block;
use onesided_core::{Datatype, ErrorClass, Layout, Op, RmaError};
use prost::Message;
use tonic::{Code, Status};

/// The gRPC code for each MPI error class: the one table (STYLE.md, after quickwit).
pub fn grpc_code(class: ErrorClass) -> Code {
    match class {
        ErrorClass::Win => Code::NotFound,
        ErrorClass::RmaSync | ErrorClass::RmaConflict | ErrorClass::RmaFlavor => {
            Code::FailedPrecondition
        }
        ErrorClass::RmaRange => Code::OutOfRange,
        ErrorClass::Base
        | ErrorClass::Size
        | ErrorClass::Disp
        | ErrorClass::LockType
        | ErrorClass::Assert
        | ErrorClass::Rank
        | ErrorClass::Type
        | ErrorClass::Op
        | ErrorClass::Count
        | ErrorClass::Arg
        | ErrorClass::Group
        | ErrorClass::Info => Code::InvalidArgument,
        ErrorClass::RmaAttach | ErrorClass::RmaShared | ErrorClass::NoMem => {
            Code::ResourceExhausted
        }
        ErrorClass::ProcFailed | ErrorClass::Io => Code::Unavailable,
        ErrorClass::Intern | ErrorClass::Other => Code::Internal,
    }
}

/// A status for a refused call: the gRPC code of its class and an encoded [`v1::MpiError`] in
/// the details.
pub fn status_from_rma(error: &RmaError) -> Status {
    let details = v1::MpiError {
        class: error.class.code(),
        message: error.message.clone(),
    }
    .encode_to_vec();
    Status::with_details(
        grpc_code(error.class),
        error.to_string(),
        bytes::Bytes::from(details),
    )
}

/// The MPI error of a status, when its details carry one.
pub fn rma_from_status(status: &Status) -> Option<RmaError> {
    let detail = v1::MpiError::decode(status.details()).ok()?;
    let class = ErrorClass::from_code(detail.class)?;
    Some(RmaError::new(class, detail.message))
}

/// A session failure for a refused call.
pub fn failure_from_rma(error: &RmaError) -> v1::MpiFailure {
    v1::MpiFailure {
        code: grpc_code(error.class) as i32,
        error: Some(v1::MpiError {
            class: error.class.code(),
            message: error.message.clone(),
        }),
    }
}

/// The core datatype of a wire value.
///
/// # Errors
/// `MPI_ERR_TYPE` for an unknown value.
pub fn datatype_from_wire(code: i32) -> Result<Datatype, RmaError> {
    Datatype::from_code(code)
        .ok_or_else(|| RmaError::new(ErrorClass::Type, format!("unknown datatype {code}")))
}

/// The core op of a wire value.
///
/// # Errors
/// `MPI_ERR_OP` for an unknown value.
pub fn op_from_wire(code: i32) -> Result<Op, RmaError> {
    Op::from_code(code).ok_or_else(|| RmaError::new(ErrorClass::Op, format!("unknown op {code}")))
}

/// The wire form of a layout.
pub fn layout_to_wire(layout: &Layout) -> v1::Layout {
    use v1::layout::Kind;
    let kind = match layout {
        Layout::Contiguous { count } => Kind::Contiguous(v1::Contiguous { count: *count }),
        Layout::Vector {
            count,
            blocklen,
            stride,
        } => Kind::Vector(v1::Vector {
            count: *count,
            blocklen: *blocklen,
            stride: *stride,
        }),
        Layout::Indexed { blocks } => Kind::Indexed(v1::Indexed {
            blocks: blocks
                .iter()
                .map(|block| v1::Block {
                    disp: block.disp,
                    len: block.len,
                })
                .collect(),
        }),
    };
    v1::Layout { kind: Some(kind) }
}

/// The core layout of a wire layout.
///
/// # Errors
/// `MPI_ERR_TYPE` for a missing layout, `MPI_ERR_COUNT` for one with too many blocks.
pub fn layout_from_wire(layout: Option<&v1::Layout>) -> Result<Layout, RmaError> {
    use v1::layout::Kind;
    let kind = layout
        .and_then(|layout| layout.kind.as_ref())
        .ok_or_else(|| RmaError::new(ErrorClass::Type, "operation without a target layout"))?;
    Ok(match kind {
        Kind::Contiguous(c) => Layout::Contiguous { count: c.count },
        Kind::Vector(v) => Layout::Vector {
            count: v.count,
            blocklen: v.blocklen,
            stride: v.stride,
        },
        Kind::Indexed(indexed) => {
            if indexed.blocks.len() > onesided_core::layout::MAX_BLOCKS {
                return Err(RmaError::new(
                    ErrorClass::Count,
                    format!(
                        "indexed layout of {} blocks exceeds the limit of {}",
                        indexed.blocks.len(),
                        onesided_core::layout::MAX_BLOCKS
                    ),
                ));
            }
            Layout::Indexed {
                blocks: indexed
                    .blocks
                    .iter()
                    .map(|block| Block {
                        disp: block.disp,
                        len: block.len,
                    })
                    .collect(),
            }
        }
    })
}

/// The metadata key that carries credentials.
pub const AUTHORIZATION: &str = "authorization";

/// Optional metadata of a session: the world it means to act in. A rank token of another world
/// is refused with PERMISSION_DENIED.
pub const CLAIM_WORLD: &str = "x-onesided-world";

/// Optional metadata of a session: the rank it means to act as (decimal). A token of another
/// rank is refused with PERMISSION_DENIED.
pub const CLAIM_RANK: &str = "x-onesided-rank";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_details_round_trip_every_class() {
        for class in ErrorClass::ALL {
            let error = RmaError::new(class, "why");
            let status = status_from_rma(&error);
            assert_eq!(status.code(), grpc_code(class));
            assert_eq!(rma_from_status(&status), Some(error));
        }
    }

    #[test]
    fn a_created_worlds_tokens_are_not_in_its_debug_form() {
        let response = v1::CreateWorldResponse {
            name: "w".into(),
            tokens: vec!["secret-token-0".into(), "secret-token-1".into()],
        };
        let shown = format!("{response:?}");
        assert!(!shown.contains("secret-token"), "{shown}");
        assert!(shown.contains("<2 redacted>"), "{shown}");
    }

    #[test]
    fn layouts_round_trip() {
        let layouts = [
            Layout::Contiguous { count: 3 },
            Layout::Vector {
                count: 2,
                blocklen: 1,
                stride: 4,
            },
            Layout::Indexed {
                blocks: vec![Block { disp: 5, len: 2 }, Block { disp: 0, len: 1 }],
            },
        ];
        for layout in layouts {
            let wire = layout_to_wire(&layout);
            assert_eq!(layout_from_wire(Some(&wire)).unwrap(), layout);
        }
        assert_eq!(layout_from_wire(None).unwrap_err().class, ErrorClass::Type);
    }
}
