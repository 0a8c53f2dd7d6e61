//! onesided-proto: the `onesided.v1` gRPC definitions and the one mapping between them and
//! core's types.
//!
//! Owns: prost/tonic codegen (the only crate that knows it), the table from MPI error class to
//! gRPC code, the error details of a refusal (`google.rpc.Status` with `ErrorInfo` and the
//! `MpiError`, [`status_with_code`]) and reading them back, conversions of layouts, datatypes
//! and ops, the Audit service's answers ([`audit_wire`]), the Admin service's answers without a
//! core type, as plain types of their own ([`admin_wire`]), and a session's window calls as
//! core's origin engine takes them ([`call_wire`]; whether one is legal is core's).
//! Must not: do I/O or touch a runtime.

#![allow(missing_docs, clippy::large_enum_variant)]

/// Generated code of package `onesided.audit.v1`: how the audit store holds an event
/// (`proto/onesided/audit/v1/event.proto`). Core encodes and decodes it without codegen
/// (`onesided_core::audit::Body`); this is what another reader would generate.
pub mod audit {
    /// Version 1.
    #[allow(clippy::all, missing_debug_implementations, rust_2018_idioms)]
    pub mod v1 {
        tonic::include_proto!("onesided.audit.v1");
    }
}

pub mod admin_wire;
pub mod audit_wire;
pub mod call_wire;
pub mod codec;

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
            .field("owner", &self.owner)
            .finish()
    }
}

/// The encoded file descriptor set, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("onesided_descriptor");

use onesided_core::layout::{Block, ByteBlock, Order, Resized, StructBlock, Subarray};
use onesided_core::window::{OpKind, TargetOp};
use onesided_core::{Datatype, ErrorClass, Layout, Op, RmaError};
use prost::Message;
use tonic::{Code, Status};

/// The paths (`/package.Service/Method`) of the methods of an encoded file descriptor set that
/// take exactly one request message: unary and server-streaming ones. gRPC calls a second
/// request message on them a cardinality violation.
///
/// # Errors
/// When the bytes are not a file descriptor set.
pub fn single_request_methods(descriptor_set: &[u8]) -> Result<Vec<String>, prost::DecodeError> {
    let set = prost_types::FileDescriptorSet::decode(descriptor_set)?;
    let mut paths = Vec::new();
    for file in &set.file {
        let package = file.package();
        for service in &file.service {
            let service_name = match package {
                "" => service.name().to_string(),
                package => format!("{package}.{}", service.name()),
            };
            for method in &service.method {
                if !method.client_streaming() {
                    paths.push(format!("/{service_name}/{}", method.name()));
                }
            }
        }
    }
    Ok(paths)
}

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
        | ErrorClass::Info
        | ErrorClass::Request => Code::InvalidArgument,
        ErrorClass::RmaAttach | ErrorClass::RmaShared | ErrorClass::NoMem => {
            Code::ResourceExhausted
        }
        ErrorClass::ProcFailed | ErrorClass::Io => Code::Unavailable,
        ErrorClass::Intern | ErrorClass::Other => Code::Internal,
    }
}

/// The most bytes of an error's message a status or failure carries. Echoed input is already
/// cut short where it is quoted (`onesided_core::error::quoted`); this bounds every message
/// whatever builds it, so an answer's headers stay small.
pub const MAX_MESSAGE_BYTES: usize = 400;

/// `message`, cut at a character boundary to at most [`MAX_MESSAGE_BYTES`] (and a `…`).
pub fn bounded_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

/// The `domain` of the `google.rpc.ErrorInfo` of every refused call (its `reason` is the MPI
/// name of the class, `MPI_ERR_RANK`).
pub const ERROR_DOMAIN: &str = "onesided";

/// The type URL of an [`v1::MpiError`] packed in a `google.protobuf.Any`.
pub const MPI_ERROR_TYPE_URL: &str = "type.googleapis.com/onesided.v1.MpiError";

/// The key of `ErrorInfo.metadata` that holds the class's wire value.
pub const ERROR_INFO_CLASS_KEY: &str = "class";

/// A status for a refused call: the gRPC code of its class, and [`status_with_code`]'s message
/// and details.
pub fn status_from_rma(error: &RmaError) -> Status {
    status_with_code(grpc_code(error.class), error)
}

/// A status for a refused call with a gRPC code of the caller's choice (ALREADY_EXISTS for a
/// name taken): the message `MPI_ERR_…: why` (bounded by [`bounded_message`]) and, as gRPC's
/// richer error model has it, an encoded `google.rpc.Status` in the details holding a
/// `google.rpc.ErrorInfo` (reason = the class's MPI name, domain [`ERROR_DOMAIN`], metadata
/// `class` = its wire value) and the [`v1::MpiError`] as an `Any` ([`MPI_ERROR_TYPE_URL`]).
pub fn status_with_code(code: Code, error: &RmaError) -> Status {
    let message = bounded_message(&error.message);
    let text = format!("{}: {message}", error.class);
    let info = tonic_types::pb::ErrorInfo {
        reason: error.class.mpi_name(),
        domain: ERROR_DOMAIN.to_string(),
        metadata: [(
            ERROR_INFO_CLASS_KEY.to_string(),
            error.class.code().to_string(),
        )]
        .into(),
    };
    let detail = v1::MpiError {
        class: error.class.code(),
        message,
        unchanged: error.unchanged,
    };
    let details = tonic_types::pb::Status {
        code: code as i32,
        message: text.clone(),
        details: vec![
            prost_types::Any {
                type_url: tonic_types::ErrorInfo::TYPE_URL.to_string(),
                value: info.encode_to_vec(),
            },
            prost_types::Any {
                type_url: MPI_ERROR_TYPE_URL.to_string(),
                value: detail.encode_to_vec(),
            },
        ],
    };
    Status::with_details(code, text, bytes::Bytes::from(details.encode_to_vec()))
}

/// The MPI error of a status, when its details carry one: the [`v1::MpiError`] beside the
/// `ErrorInfo`, else the class the `ErrorInfo` of [`ERROR_DOMAIN`] names (with the status
/// message); from a 0.1.0 server, whose details were a bare `MpiError`, that.
pub fn rma_from_status(status: &Status) -> Option<RmaError> {
    let rich = tonic_types::pb::Status::decode(status.details()).ok()?;
    if rich.details.is_empty() {
        // a bare MpiError reads as a google.rpc.Status without details: fields 1 and 2 are
        // varint and string in both
        let detail = v1::MpiError::decode(status.details()).ok()?;
        let class = ErrorClass::from_code(detail.class)?;
        return Some(RmaError::new(class, detail.message));
    }
    let packed = rich
        .details
        .iter()
        .find(|any| any.type_url == MPI_ERROR_TYPE_URL)
        .and_then(|any| v1::MpiError::decode(any.value.as_slice()).ok())
        .and_then(|detail| {
            let class = ErrorClass::from_code(detail.class)?;
            Some(RmaError {
                unchanged: detail.unchanged,
                ..RmaError::new(class, detail.message)
            })
        });
    if packed.is_some() {
        return packed;
    }
    let info = rich
        .details
        .iter()
        .filter(|any| any.type_url == tonic_types::ErrorInfo::TYPE_URL)
        .filter_map(|any| tonic_types::pb::ErrorInfo::decode(any.value.as_slice()).ok())
        .find(|info| info.domain == ERROR_DOMAIN)?;
    let class = ErrorClass::parse(&info.reason)?;
    let prefix = format!("{class}: ");
    let message = status.message();
    let message = message.strip_prefix(&prefix).unwrap_or(message);
    Some(RmaError::new(class, message))
}

/// A session failure for a refused call (its message bounded by [`bounded_message`]).
pub fn failure_from_rma(error: &RmaError) -> v1::MpiFailure {
    v1::MpiFailure {
        code: grpc_code(error.class) as i32,
        error: Some(v1::MpiError {
            class: error.class.code(),
            message: bounded_message(&error.message),
            unchanged: error.unchanged,
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

/// The core operation kind of a wire op's `kind` and `op` fields.
///
/// # Errors
/// `MPI_ERR_ARG` for an unknown or unspecified kind, `MPI_ERR_OP` for an unknown op of a kind
/// that takes one.
pub fn op_kind_from_wire(kind: i32, op: i32) -> Result<OpKind, RmaError> {
    let kind = v1::OpKind::try_from(kind)
        .map_err(|_| RmaError::new(ErrorClass::Arg, format!("unknown operation kind {kind}")))?;
    Ok(match kind {
        v1::OpKind::Put => OpKind::Put,
        v1::OpKind::Get => OpKind::Get,
        v1::OpKind::Accumulate => OpKind::Accumulate(op_from_wire(op)?),
        v1::OpKind::GetAccumulate => OpKind::GetAccumulate(op_from_wire(op)?),
        v1::OpKind::FetchAndOp => OpKind::FetchAndOp(op_from_wire(op)?),
        v1::OpKind::CompareAndSwap => OpKind::CompareAndSwap,
        v1::OpKind::Unspecified => {
            return Err(RmaError::new(
                ErrorClass::Arg,
                "operation kind is unspecified",
            ))
        }
    })
}

/// The wire kind and op code of an operation kind: the inverse of [`op_kind_from_wire`], the
/// one mapping the client encodes with.
pub fn op_kind_to_wire(kind: OpKind) -> (i32, i32) {
    let (kind, op) = match kind {
        OpKind::Put => (v1::OpKind::Put, 0),
        OpKind::Get => (v1::OpKind::Get, 0),
        OpKind::Accumulate(op) => (v1::OpKind::Accumulate, op.code()),
        OpKind::GetAccumulate(op) => (v1::OpKind::GetAccumulate, op.code()),
        OpKind::FetchAndOp(op) => (v1::OpKind::FetchAndOp, op.code()),
        OpKind::CompareAndSwap => (v1::OpKind::CompareAndSwap, 0),
    };
    (kind as i32, op)
}

/// The operation a wire op asks of its target, not yet checked against the target's window
/// (that is [`TargetOp::validate`]). The data is shared, not copied.
///
/// # Errors
/// As [`op_kind_from_wire`], [`datatype_from_wire`] and [`layout_from_wire`], in that order.
pub fn target_op_from_wire(op: &v1::RmaOp) -> Result<TargetOp<bytes::Bytes>, RmaError> {
    Ok(TargetOp {
        kind: op_kind_from_wire(op.kind, op.op)?,
        dtype: datatype_from_wire(op.datatype)?,
        disp: op.disp,
        layout: layout_from_wire(op.layout.as_ref())?,
        data: op.data.clone(),
        compare: op.compare.clone(),
    })
}

/// A window's flavor on the wire.
pub fn flavor_to_wire(flavor: onesided_core::window::Flavor) -> i32 {
    use onesided_core::window::Flavor;
    let flavor = match flavor {
        Flavor::Create => v1::Flavor::Create,
        Flavor::Allocate => v1::Flavor::Allocate,
        Flavor::Dynamic => v1::Flavor::Dynamic,
    };
    flavor as i32
}

/// The one flavor rule, in both directions: `CREATE` is create, `ALLOCATE` and an unset flavor
/// are allocate, `DYNAMIC` is dynamic.
///
/// # Errors
/// `MPI_ERR_ARG` for a value `onesided.v1` does not define.
pub fn flavor_from_wire(code: i32) -> Result<onesided_core::window::Flavor, RmaError> {
    use onesided_core::window::Flavor;
    match v1::Flavor::try_from(code) {
        Ok(v1::Flavor::Create) => Ok(Flavor::Create),
        Ok(v1::Flavor::Allocate) | Ok(v1::Flavor::Unspecified) => Ok(Flavor::Allocate),
        Ok(v1::Flavor::Dynamic) => Ok(Flavor::Dynamic),
        Err(_) => Err(RmaError::new(
            ErrorClass::Arg,
            format!("unknown window flavor {code}"),
        )),
    }
}

/// A memory model on the wire.
pub fn model_to_wire(model: onesided_core::window::MemoryModel) -> i32 {
    use onesided_core::window::MemoryModel;
    let model = match model {
        MemoryModel::Separate => v1::MemoryModel::Separate,
        MemoryModel::Unified => v1::MemoryModel::Unified,
    };
    model as i32
}

/// The memory model: separate or unified; unset means separate.
///
/// # Errors
/// `MPI_ERR_ARG` for any other value.
pub fn model_from_wire(code: i32) -> Result<onesided_core::window::MemoryModel, RmaError> {
    match v1::MemoryModel::try_from(code) {
        Ok(v1::MemoryModel::Separate) | Ok(v1::MemoryModel::Unspecified) => {
            Ok(onesided_core::window::MemoryModel::Separate)
        }
        Ok(v1::MemoryModel::Unified) => Ok(onesided_core::window::MemoryModel::Unified),
        Err(_) => Err(RmaError::new(
            ErrorClass::Arg,
            format!("unknown memory model {code}: separate (1) or unified (2)"),
        )),
    }
}

/// The wire description of a window.
pub fn desc_to_wire(desc: &onesided_core::window::WindowDesc) -> v1::WindowDescription {
    v1::WindowDescription {
        id: desc.id,
        world: desc.world.clone(),
        name: desc.name.clone(),
        flavor: flavor_to_wire(desc.flavor),
        model: model_to_wire(desc.model),
        sizes: desc.sizes.clone(),
        disp_units: desc.disp_units.clone(),
        info: desc
            .info
            .to_pairs()
            .into_iter()
            .map(|(key, value)| v1::InfoEntry { key, value })
            .collect(),
        group: desc.group.clone(),
        // only OpenWindow's answer names the caller's regions (the session adds them)
        attached: Vec::new(),
        public_copy: Vec::new(),
    }
}

/// A window description from the wire (what the client reads back).
///
/// # Errors
/// As [`flavor_from_wire`] and [`model_from_wire`]; `MPI_ERR_INFO` for info keys core does not
/// accept; `MPI_ERR_ARG` when sizes and disp_units differ in length.
pub fn desc_from_wire(
    desc: v1::WindowDescription,
) -> Result<onesided_core::window::WindowDesc, RmaError> {
    let info = onesided_core::window::WindowInfo::parse(
        desc.info
            .iter()
            .map(|entry| (entry.key.as_str(), entry.value.as_str())),
    )?;
    if desc.sizes.len() != desc.disp_units.len() {
        return Err(RmaError::new(
            ErrorClass::Arg,
            "window description with mismatched sizes and disp_units",
        ));
    }
    let group = if desc.group.is_empty() {
        onesided_core::window::WindowDesc::whole_world(desc.sizes.len() as u32)
    } else if desc.group.len() == desc.sizes.len() {
        desc.group
    } else {
        return Err(RmaError::new(
            ErrorClass::Arg,
            "window description whose group and sizes differ in length",
        ));
    };
    Ok(onesided_core::window::WindowDesc {
        id: desc.id,
        name: desc.name,
        world: desc.world,
        flavor: flavor_from_wire(desc.flavor)?,
        model: model_from_wire(desc.model)?,
        sizes: desc.sizes,
        disp_units: desc.disp_units,
        info,
        group,
    })
}

/// Pushed bytes as the target engine takes them (moved, not copied).
pub fn segments_from_wire(segments: Vec<v1::Segment>) -> Vec<onesided_core::target::Segment> {
    segments
        .into_iter()
        .map(|segment| onesided_core::target::Segment {
            offset: segment.offset,
            data: segment.data,
        })
        .collect()
}

/// Bytes of a copy as the wire carries them (moved, not copied).
pub fn segments_to_wire(segments: Vec<onesided_core::target::Segment>) -> Vec<v1::Segment> {
    segments
        .into_iter()
        .map(|segment| v1::Segment {
            offset: segment.offset,
            data: segment.data,
        })
        .collect()
}

/// The target engine's answer as the wire carries it: the one mapping from
/// [`onesided_core::target::Outcome`] to a reply.
pub fn reply_from_outcome(outcome: onesided_core::target::Outcome) -> v1::server_message::Reply {
    use onesided_core::target::Outcome;
    use v1::server_message::Reply;
    match outcome {
        Outcome::Done => Reply::Done(v1::Done {}),
        Outcome::Data(data) => Reply::Result(v1::OpResult {
            data: bytes::Bytes::from(data),
        }),
        Outcome::Synced { pull, flag, token } => Reply::Synced(v1::Synced {
            pull: segments_to_wire(pull),
            flag,
            token,
        }),
        Outcome::Attached { base } => Reply::Region(v1::Region { base }),
    }
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
        Layout::Hvector {
            count,
            blocklen,
            stride_bytes,
        } => Kind::Hvector(v1::Hvector {
            count: *count,
            blocklen: *blocklen,
            stride_bytes: *stride_bytes,
        }),
        Layout::Hindexed { blocks } => Kind::Hindexed(v1::Hindexed {
            blocks: blocks
                .iter()
                .map(|block| v1::ByteBlock {
                    offset: block.offset,
                    len: block.len,
                })
                .collect(),
        }),
        Layout::Subarray(subarray) => Kind::Subarray(v1::Subarray {
            sizes: subarray.sizes.clone(),
            subsizes: subarray.subsizes.clone(),
            starts: subarray.starts.clone(),
            order: match subarray.order {
                Order::C => v1::ArrayOrder::C,
                Order::Fortran => v1::ArrayOrder::Fortran,
            } as i32,
        }),
        Layout::Resized(resized) => Kind::Resized(Box::new(v1::Resized {
            inner: Some(Box::new(layout_to_wire(&resized.inner))),
            lb: resized.lb,
            extent: resized.extent,
            count: resized.count,
        })),
        Layout::Struct { blocks } => Kind::Struct(v1::Struct {
            blocks: blocks
                .iter()
                .map(|block| v1::StructBlock {
                    offset: block.offset,
                    datatype: block.dtype.code(),
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
        Kind::Hvector(v) => Layout::Hvector {
            count: v.count,
            blocklen: v.blocklen,
            stride_bytes: v.stride_bytes,
        },
        Kind::Hindexed(hindexed) => {
            too_many_blocks("hindexed", hindexed.blocks.len())?;
            Layout::Hindexed {
                blocks: hindexed
                    .blocks
                    .iter()
                    .map(|block| ByteBlock {
                        offset: block.offset,
                        len: block.len,
                    })
                    .collect(),
            }
        }
        Kind::Subarray(subarray) => {
            let dims = subarray
                .sizes
                .len()
                .max(subarray.subsizes.len())
                .max(subarray.starts.len());
            if dims > onesided_core::layout::MAX_DIMS {
                return Err(RmaError::new(
                    ErrorClass::Arg,
                    format!(
                        "subarray of {dims} dimensions exceeds the limit of {}",
                        onesided_core::layout::MAX_DIMS
                    ),
                ));
            }
            let order = match v1::ArrayOrder::try_from(subarray.order) {
                Ok(v1::ArrayOrder::Unspecified | v1::ArrayOrder::C) => Order::C,
                Ok(v1::ArrayOrder::Fortran) => Order::Fortran,
                Err(_) => {
                    return Err(RmaError::new(
                        ErrorClass::Arg,
                        format!("unknown subarray order {}", subarray.order),
                    ))
                }
            };
            Layout::Subarray(Box::new(Subarray {
                sizes: subarray.sizes.clone(),
                subsizes: subarray.subsizes.clone(),
                starts: subarray.starts.clone(),
                order,
            }))
        }
        Kind::Resized(resized) => Layout::Resized(Box::new(Resized {
            inner: layout_from_wire(resized.inner.as_deref()).map_err(|err| {
                RmaError::new(err.class, format!("resized layout: {}", err.message))
            })?,
            lb: resized.lb,
            extent: resized.extent,
            count: resized.count,
        })),
        Kind::Struct(structure) => {
            too_many_blocks("struct", structure.blocks.len())?;
            Layout::Struct {
                blocks: structure
                    .blocks
                    .iter()
                    .map(|block| {
                        Ok(StructBlock {
                            offset: block.offset,
                            dtype: datatype_from_wire(block.datatype)?,
                            len: block.len,
                        })
                    })
                    .collect::<Result<_, RmaError>>()?,
            }
        }
        Kind::Indexed(indexed) => {
            too_many_blocks("indexed", indexed.blocks.len())?;
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

/// `MPI_ERR_COUNT` for a wire layout with more blocks than [`MAX_BLOCKS`] (checked before
/// they are copied).
///
/// [`MAX_BLOCKS`]: onesided_core::layout::MAX_BLOCKS
fn too_many_blocks(kind: &str, blocks: usize) -> Result<(), RmaError> {
    if blocks > onesided_core::layout::MAX_BLOCKS {
        return Err(RmaError::new(
            ErrorClass::Count,
            format!(
                "{kind} layout of {blocks} blocks exceeds the limit of {}",
                onesided_core::layout::MAX_BLOCKS
            ),
        ));
    }
    Ok(())
}

/// The metadata key that carries credentials.
pub const AUTHORIZATION: &str = "authorization";

/// Optional metadata of a session: the world it means to act in. A rank token of another world
/// is refused with PERMISSION_DENIED.
pub const CLAIM_WORLD: &str = "x-onesided-world";

/// Optional metadata of a session: the rank it means to act as (decimal). A token of another
/// rank is refused with PERMISSION_DENIED.
pub const CLAIM_RANK: &str = "x-onesided-rank";

/// Metadata of a refused session in a cluster: the address of the node that serves the
/// session's world (UNAVAILABLE). Clients attach there instead.
pub const OWNER: &str = "x-onesided-owner";

/// Optional metadata of a session: sent by a client that re-attaches by itself after its
/// session was lost (its node died, the world moved), naming the incarnation it lost
/// (decimal). Refused with ABORTED when the rank attached again since — a newer session of
/// the rank stays; accepted, the new incarnation is numbered above it.
pub const SUCCEEDS: &str = "x-onesided-succeeds";

/// Metadata of an admin call one node forwards to the node that serves the call's world: the
/// receiving node answers it itself or fails it, and never forwards it again.
pub const FORWARDED: &str = "x-onesided-forwarded";

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

    /// What a gRPC client in any language reads: google.rpc.Status details whose code is the
    /// status's, holding an ErrorInfo with the MPI name and the onesided domain.
    #[test]
    fn statuses_carry_error_info_in_google_rpc_status_details() {
        use tonic_types::StatusExt;
        for class in ErrorClass::ALL {
            let status = status_from_rma(&RmaError::new(class, "why"));
            let rich = tonic_types::pb::Status::decode(status.details()).unwrap();
            assert_eq!(rich.code, status.code() as i32, "{class}");
            assert_eq!(rich.message, status.message());
            let info = status.get_details_error_info().unwrap();
            assert_eq!(info.reason, class.mpi_name());
            assert_eq!(info.domain, "onesided");
            assert_eq!(info.metadata["class"], class.code().to_string());
        }
        let taken = status_with_code(Code::AlreadyExists, &RmaError::new(ErrorClass::Arg, "x"));
        let rich = tonic_types::pb::Status::decode(taken.details()).unwrap();
        assert_eq!(rich.code, Code::AlreadyExists as i32);
        assert_eq!(rma_from_status(&taken).unwrap().class, ErrorClass::Arg);
    }

    /// A 0.1.0 server's details (a bare MpiError), and details with only the ErrorInfo (a
    /// server in another language), are read too.
    #[test]
    fn the_class_is_read_from_every_form_of_details() {
        let bare = v1::MpiError {
            class: ErrorClass::Rank.code(),
            message: "rank 9 is outside the world".to_string(),
            unchanged: false,
        };
        let old = Status::with_details(
            Code::InvalidArgument,
            "MPI_ERR_RANK: rank 9 is outside the world",
            bytes::Bytes::from(bare.encode_to_vec()),
        );
        let expected = RmaError::new(ErrorClass::Rank, "rank 9 is outside the world");
        assert_eq!(rma_from_status(&old), Some(expected.clone()));
        let info_only = <Status as tonic_types::StatusExt>::with_error_details(
            Code::InvalidArgument,
            "MPI_ERR_RANK: rank 9 is outside the world",
            tonic_types::ErrorDetails::with_error_info("MPI_ERR_RANK", "onesided", []),
        );
        assert_eq!(rma_from_status(&info_only), Some(expected));
        let foreign = <Status as tonic_types::StatusExt>::with_error_details(
            Code::InvalidArgument,
            "MPI_ERR_RANK: no",
            tonic_types::ErrorDetails::with_error_info("MPI_ERR_RANK", "elsewhere", []),
        );
        assert_eq!(rma_from_status(&foreign), None);
        assert_eq!(rma_from_status(&Status::unauthenticated("no token")), None);
    }

    /// Other languages read the meaning of these numbers from the enums of the .proto file:
    /// they must be core's, value for value, under core's names.
    #[test]
    fn the_proto_enums_carry_cores_wire_values() {
        for dtype in Datatype::ALL {
            let name = format!("DATATYPE_{}", dtype.name().to_ascii_uppercase());
            let value = v1::Datatype::from_str_name(&name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(value as i32, dtype.code(), "{name}");
        }
        for op in Op::ALL {
            let name = format!("OP_{}", op.name().to_ascii_uppercase());
            let value = v1::Op::from_str_name(&name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(value as i32, op.code(), "{name}");
        }
        for class in ErrorClass::ALL {
            let name = format!("ERROR_CLASS_{}", class.name());
            let value = v1::ErrorClass::from_str_name(&name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(value as i32, class.code(), "{name}");
        }
        for lock_type in [
            onesided_core::epoch::LockType::Shared,
            onesided_core::epoch::LockType::Exclusive,
        ] {
            let name = format!("LOCK_TYPE_{}", lock_type.name().to_ascii_uppercase());
            let value = v1::LockType::from_str_name(&name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(value as i32, lock_type.code(), "{name}");
        }
        // and no more: every nonzero value of the proto's enums means something to core
        for code in 1..64 {
            assert_eq!(
                v1::Datatype::try_from(code).is_ok(),
                Datatype::from_code(code).is_some()
            );
            assert_eq!(
                v1::Op::try_from(code).is_ok(),
                Op::from_code(code).is_some()
            );
            assert_eq!(
                v1::ErrorClass::try_from(code).is_ok(),
                ErrorClass::from_code(code).is_some()
            );
            assert_eq!(
                v1::LockType::try_from(code).is_ok(),
                onesided_core::epoch::LockType::from_code(code).is_ok()
            );
        }
    }

    /// The assertion bits: each named bit of the proto is core's bit of that name, and core
    /// accepts no bit the proto does not name.
    #[test]
    fn the_proto_names_every_assertion_bit_core_knows() {
        use onesided_core::assert::{Assert, SyncCall};
        let mut named = 0;
        for bit in (0..32).map(|shift| 1u32 << shift) {
            let Ok(value) = v1::Assert::try_from(bit as i32) else {
                continue;
            };
            let name = value.as_str_name().trim_start_matches("ASSERT_");
            assert_eq!(Assert::parse_bits(name).unwrap(), bit, "{name}");
            named |= bit;
        }
        assert_eq!(v1::Assert::None as i32, Assert::none().bits() as i32);
        let calls = [
            SyncCall::Fence,
            SyncCall::Post,
            SyncCall::Start,
            SyncCall::Lock,
            SyncCall::LockAll,
        ];
        for bit in (0..32).map(|shift| 1u32 << shift) {
            let accepted = calls
                .iter()
                .any(|call| Assert::for_call(*call, bit).is_ok());
            assert_eq!(accepted, named & bit != 0, "bit {bit:#x}");
        }
    }

    #[test]
    fn every_method_but_the_session_takes_one_request_message() {
        let single = single_request_methods(FILE_DESCRIPTOR_SET).unwrap();
        for path in [
            "/onesided.v1.Admin/CreateWorld",
            "/onesided.v1.Admin/FreeWindow",
            "/onesided.v1.Admin/ClusterStatus",
            "/onesided.v1.Admin/EndSession",
            "/onesided.v1.Audit/Events",
            "/onesided.v1.Audit/Export",
        ] {
            assert!(
                single.iter().any(|known| known == path),
                "{path}: {single:?}"
            );
        }
        assert!(
            !single.iter().any(|path| path.ends_with(".Rma/Session")),
            "{single:?}"
        );
        assert_eq!(single.len(), 17, "{single:?}");
    }

    #[test]
    fn status_and_failure_messages_are_bounded_at_a_character_boundary() {
        let error = RmaError::new(ErrorClass::Arg, "é".repeat(10_000));
        let status = status_from_rma(&error);
        let detail = rma_from_status(&status).unwrap();
        assert!(detail.message.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
        assert!(detail.message.starts_with("éé") && detail.message.ends_with('…'));
        assert_eq!(status.message(), format!("MPI_ERR_ARG: {}", detail.message));
        let failure = failure_from_rma(&error).error.unwrap();
        assert_eq!(failure.message, detail.message);
        let short = RmaError::new(ErrorClass::Arg, "x".repeat(MAX_MESSAGE_BYTES));
        assert_eq!(rma_from_status(&status_from_rma(&short)), Some(short));
    }

    #[test]
    fn a_created_worlds_tokens_are_not_in_its_debug_form() {
        let response = v1::CreateWorldResponse {
            name: "w".into(),
            tokens: vec!["secret-token-0".into(), "secret-token-1".into()],
            owner: String::new(),
        };
        let shown = format!("{response:?}");
        assert!(!shown.contains("secret-token"), "{shown}");
        assert!(shown.contains("<2 redacted>"), "{shown}");
    }

    #[test]
    fn op_kinds_from_the_wire() {
        assert_eq!(
            op_kind_from_wire(v1::OpKind::Accumulate as i32, Op::Max.code()),
            Ok(OpKind::Accumulate(Op::Max))
        );
        assert_eq!(
            op_kind_from_wire(v1::OpKind::Put as i32, 9999),
            Ok(OpKind::Put),
            "a put ignores the op field"
        );
        let class = |kind: i32, op: i32| op_kind_from_wire(kind, op).unwrap_err().class;
        assert_eq!(class(0, 0), ErrorClass::Arg);
        assert_eq!(class(77, 0), ErrorClass::Arg);
        assert_eq!(class(v1::OpKind::FetchAndOp as i32, 9999), ErrorClass::Op);
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
            Layout::Hvector {
                count: 2,
                blocklen: 3,
                stride_bytes: 7,
            },
            Layout::Hindexed {
                blocks: vec![ByteBlock { offset: 9, len: 1 }],
            },
            Layout::Subarray(Box::new(Subarray {
                sizes: vec![3, 4],
                subsizes: vec![2, 2],
                starts: vec![1, 0],
                order: Order::Fortran,
            })),
            Layout::Subarray(Box::new(Subarray {
                sizes: vec![3],
                subsizes: vec![1],
                starts: vec![2],
                order: Order::C,
            })),
        ];
        for layout in layouts {
            let wire = layout_to_wire(&layout);
            assert_eq!(layout_from_wire(Some(&wire)).unwrap(), layout);
        }
        assert_eq!(layout_from_wire(None).unwrap_err().class, ErrorClass::Type);
        // an unset order is C; an unknown one and too many dimensions are ARG
        let subarray = |order: i32, dims: usize| v1::Layout {
            kind: Some(v1::layout::Kind::Subarray(v1::Subarray {
                sizes: vec![2; dims],
                subsizes: vec![1; dims],
                starts: vec![0; dims],
                order,
            })),
        };
        assert!(matches!(
            layout_from_wire(Some(&subarray(0, 2))).unwrap(),
            Layout::Subarray(subarray) if subarray.order == Order::C
        ));
        let unknown = layout_from_wire(Some(&subarray(9, 2))).unwrap_err();
        assert_eq!(unknown.class, ErrorClass::Arg);
        let deep = layout_from_wire(Some(&subarray(1, onesided_core::layout::MAX_DIMS + 1)));
        assert_eq!(deep.unwrap_err().class, ErrorClass::Arg);
    }
}
