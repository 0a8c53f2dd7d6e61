//! The binary encoding of an [`Event`]: protobuf, as `proto/onesided/audit/v1/event.proto`
//! describes it for other languages (the proto crate's tests decode these bytes with code
//! generated from that file). Payloads are bytes, not hex inside JSON: a put of N bytes stores
//! N bytes and a few of framing.
//!
//! The messages are declared here with prost's derives rather than generated, so that core
//! (which the client library and the server share) needs no build step.
//!
//! Owns: the `onesided.audit.v1` messages and their field numbers (kept in step with
//! `event.proto`), and the two functions between an `Event` and its protobuf bytes; `decode`
//! refuses bytes that do not parse or hold no event kind this version knows. Must not: renumber
//! or reuse a field (stored rows hash these bytes, so a row must read the same forever), know
//! about the hash chain, the store or gRPC, or be reached except through `Body`.

use prost::Message;

use super::{Event, RecordedOp};
use crate::error::RmaResult;
use crate::rma_err;

/// `onesided.audit.v1.Event`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct EventMessage {
    #[prost(
        oneof = "Kind",
        tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, \
                23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38"
    )]
    kind: Option<Kind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Kind {
    #[prost(message, tag = "1")]
    WindowCreated(WindowCreated),
    #[prost(message, tag = "2")]
    WindowFreed(Empty),
    #[prost(message, tag = "3")]
    Attach(Empty),
    #[prost(message, tag = "4")]
    Detach(Empty),
    #[prost(message, tag = "5")]
    Published(Published),
    #[prost(message, tag = "6")]
    Pulled(Ranges),
    #[prost(message, tag = "7")]
    FenceEnter(FenceEnter),
    #[prost(message, tag = "8")]
    FenceExit(FenceExit),
    #[prost(message, tag = "9")]
    Post(Group),
    #[prost(message, tag = "10")]
    Start(Group),
    #[prost(message, tag = "11")]
    Complete(Empty),
    #[prost(message, tag = "12")]
    WaitEnter(Empty),
    #[prost(message, tag = "13")]
    WaitExit(Empty),
    #[prost(message, tag = "14")]
    TestFalse(Empty),
    #[prost(message, tag = "15")]
    LockRequest(LockRequest),
    #[prost(message, tag = "16")]
    LockGrant(LockGrant),
    #[prost(message, tag = "17")]
    LockRelease(LockRelease),
    #[prost(message, tag = "18")]
    LockRevoke(LockRevoke),
    #[prost(message, tag = "19")]
    PeerFailed(PeerFailed),
    #[prost(message, tag = "20")]
    Departed(Departed),
    #[prost(message, tag = "21")]
    Flush(Flush),
    #[prost(message, tag = "22")]
    Sync(Empty),
    #[prost(message, tag = "23")]
    BarrierEnter(Empty),
    #[prost(message, tag = "24")]
    BarrierExit(Empty),
    #[prost(message, tag = "25")]
    Issued(Call),
    #[prost(message, tag = "26")]
    Returned(Call),
    #[prost(message, tag = "27")]
    FlushLocal(FlushLocal),
    #[prost(message, tag = "28")]
    OpIssued(OpIssued),
    #[prost(message, tag = "29")]
    Store(Ranges),
    #[prost(message, tag = "30")]
    Load(Ranges),
    #[prost(message, tag = "31")]
    ClientEvents(ClientEvents),
    #[prost(message, tag = "32")]
    Op(Op),
    #[prost(message, tag = "33")]
    InfoSet(InfoSet),
    #[prost(message, tag = "34")]
    RegionAttached(Region),
    #[prost(message, tag = "35")]
    RegionDetached(Region),
    #[prost(message, tag = "36")]
    Sent(PointToPoint),
    #[prost(message, tag = "37")]
    Received(PointToPoint),
    #[prost(message, tag = "38")]
    Admin(Admin),
}

#[derive(Clone, PartialEq, Message)]
struct Region {
    #[prost(uint64, tag = "1")]
    base: u64,
    #[prost(uint64, tag = "2")]
    size: u64,
}

#[derive(Clone, PartialEq, Message)]
struct Empty {}

/// A point-to-point message: `peer` is the receiver of a send, the sender of a receive.
#[derive(Clone, PartialEq, Message)]
struct PointToPoint {
    #[prost(uint32, tag = "1")]
    peer: u32,
    #[prost(sint32, tag = "2")]
    tag: i32,
    #[prost(uint64, tag = "3")]
    message: u64,
}

#[derive(Clone, PartialEq, Message)]
struct WindowCreated {
    #[prost(string, tag = "1")]
    world: String,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(uint64, repeated, tag = "3")]
    sizes: Vec<u64>,
    #[prost(uint32, repeated, tag = "4")]
    disp_units: Vec<u32>,
    #[prost(message, repeated, tag = "5")]
    info: Vec<InfoEntry>,
    #[prost(bool, tag = "6")]
    unified: bool,
}

#[derive(Clone, PartialEq, Message)]
struct InfoSet {
    #[prost(message, repeated, tag = "1")]
    info: Vec<InfoEntry>,
}

#[derive(Clone, PartialEq, Message)]
struct InfoEntry {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, Message)]
struct Published {
    #[prost(uint64, tag = "1")]
    offset: u64,
    #[prost(bytes = "vec", tag = "2")]
    data: Vec<u8>,
}

/// Byte ranges `[start, end)` flattened: start, end, start, end, …
#[derive(Clone, PartialEq, Message)]
struct Ranges {
    #[prost(uint64, repeated, tag = "1")]
    bounds: Vec<u64>,
}

#[derive(Clone, PartialEq, Message)]
struct FenceEnter {
    #[prost(uint64, tag = "1")]
    fence: u64,
    #[prost(uint32, tag = "2")]
    assert: u32,
}

#[derive(Clone, PartialEq, Message)]
struct FenceExit {
    #[prost(uint64, tag = "1")]
    fence: u64,
}

#[derive(Clone, PartialEq, Message)]
struct Group {
    #[prost(uint32, repeated, tag = "1")]
    group: Vec<u32>,
    #[prost(uint32, tag = "2")]
    assert: u32,
}

#[derive(Clone, PartialEq, Message)]
struct LockRequest {
    #[prost(uint32, tag = "1")]
    origin: u32,
    #[prost(string, tag = "2")]
    lock_type: String,
    #[prost(bool, tag = "3")]
    nocheck: bool,
}

#[derive(Clone, PartialEq, Message)]
struct LockGrant {
    #[prost(uint32, tag = "1")]
    origin: u32,
    #[prost(string, tag = "2")]
    lock_type: String,
    #[prost(uint64, tag = "3")]
    token: u64,
}

#[derive(Clone, PartialEq, Message)]
struct LockRelease {
    #[prost(uint32, tag = "1")]
    origin: u32,
    #[prost(uint64, tag = "2")]
    token: u64,
}

#[derive(Clone, PartialEq, Message)]
struct LockRevoke {
    #[prost(uint32, tag = "1")]
    origin: u32,
    #[prost(uint64, tag = "2")]
    token: u64,
    #[prost(string, tag = "3")]
    reason: String,
}

#[derive(Clone, PartialEq, Message)]
struct Admin {
    #[prost(string, tag = "1")]
    action: String,
    #[prost(string, tag = "2")]
    by: String,
}

#[derive(Clone, PartialEq, Message)]
struct PeerFailed {
    #[prost(uint32, tag = "1")]
    peer: u32,
    #[prost(string, tag = "2")]
    call: String,
}

#[derive(Clone, PartialEq, Message)]
struct Departed {
    #[prost(uint64, tag = "1")]
    incarnation: u64,
    #[prost(string, tag = "2")]
    reason: String,
}

#[derive(Clone, PartialEq, Message)]
struct Flush {
    #[prost(uint32, tag = "1")]
    origin: u32,
}

#[derive(Clone, PartialEq, Message)]
struct Call {
    #[prost(string, tag = "1")]
    call: String,
    #[prost(uint32, optional, tag = "2")]
    target: Option<u32>,
}

#[derive(Clone, PartialEq, Message)]
struct FlushLocal {
    #[prost(uint32, optional, tag = "1")]
    target: Option<u32>,
}

/// `onesided.audit.v1.OpKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
enum OpKind {
    Unspecified = 0,
    Put = 1,
    Get = 2,
    Accumulate = 3,
    GetAccumulate = 4,
    FetchAndOp = 5,
    CompareAndSwap = 6,
}

#[derive(Clone, PartialEq, Message)]
struct OpIssued {
    #[prost(uint64, tag = "1")]
    op_id: u64,
    #[prost(uint32, tag = "2")]
    target: u32,
    #[prost(enumeration = "OpKind", tag = "3")]
    kind: i32,
    /// The reduction's name, for the accumulating kinds.
    #[prost(string, tag = "4")]
    reduction: String,
    #[prost(string, tag = "5")]
    datatype: String,
    #[prost(message, optional, tag = "6")]
    runs: Option<Ranges>,
}

#[derive(Clone, PartialEq, Message)]
struct ClientEvents {
    #[prost(uint64, tag = "1")]
    from: u64,
    #[prost(uint64, tag = "2")]
    to: u64,
    #[prost(bytes = "vec", tag = "3")]
    hash: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct Op {
    #[prost(uint32, tag = "1")]
    origin: u32,
    #[prost(uint64, tag = "2")]
    origin_incarnation: u64,
    #[prost(uint64, tag = "3")]
    op_id: u64,
    #[prost(uint64, tag = "4")]
    epoch: u64,
    #[prost(uint64, tag = "5")]
    token: u64,
    #[prost(enumeration = "OpKind", tag = "6")]
    kind: i32,
    #[prost(string, tag = "7")]
    reduction: String,
    #[prost(string, tag = "8")]
    datatype: String,
    #[prost(uint64, tag = "9")]
    disp: u64,
    #[prost(message, optional, tag = "10")]
    runs: Option<Ranges>,
    #[prost(bytes = "vec", tag = "11")]
    data: Vec<u8>,
    #[prost(bytes = "vec", tag = "12")]
    compare: Vec<u8>,
    #[prost(bytes = "vec", tag = "13")]
    result: Vec<u8>,
}

fn ranges(pairs: &[(u64, u64)]) -> Ranges {
    Ranges {
        bounds: pairs
            .iter()
            .flat_map(|&(start, end)| [start, end])
            .collect(),
    }
}

fn pairs(ranges: Option<Ranges>) -> RmaResult<Vec<(u64, u64)>> {
    let bounds = ranges.map(|ranges| ranges.bounds).unwrap_or_default();
    if !bounds.len().is_multiple_of(2) {
        return Err(rma_err!(
            Other,
            "unreadable audit event: an odd number of range bounds"
        ));
    }
    Ok(bounds
        .chunks_exact(2)
        .map(|pair| (pair[0], pair[1]))
        .collect())
}

fn op_kind(op: &RecordedOp) -> (OpKind, String) {
    match op {
        RecordedOp::Put => (OpKind::Put, String::new()),
        RecordedOp::Get => (OpKind::Get, String::new()),
        RecordedOp::Accumulate(name) => (OpKind::Accumulate, name.clone()),
        RecordedOp::GetAccumulate(name) => (OpKind::GetAccumulate, name.clone()),
        RecordedOp::FetchAndOp(name) => (OpKind::FetchAndOp, name.clone()),
        RecordedOp::CompareAndSwap => (OpKind::CompareAndSwap, String::new()),
    }
}

fn recorded_op(kind: i32, reduction: String) -> RmaResult<RecordedOp> {
    Ok(match OpKind::try_from(kind) {
        Ok(OpKind::Put) => RecordedOp::Put,
        Ok(OpKind::Get) => RecordedOp::Get,
        Ok(OpKind::Accumulate) => RecordedOp::Accumulate(reduction),
        Ok(OpKind::GetAccumulate) => RecordedOp::GetAccumulate(reduction),
        Ok(OpKind::FetchAndOp) => RecordedOp::FetchAndOp(reduction),
        Ok(OpKind::CompareAndSwap) => RecordedOp::CompareAndSwap,
        Ok(OpKind::Unspecified) | Err(_) => {
            return Err(rma_err!(
                Other,
                "unreadable audit event: operation kind {kind}"
            ))
        }
    })
}

/// The protobuf bytes of `event`. Payloads are copied once, from the event into the output:
/// the message is encoded without them ([`head`]) and they follow as its last fields. Their
/// tags are its highest, so these are the bytes of the whole message in canonical field order.
pub(super) fn encode(event: &Event) -> Vec<u8> {
    use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
    let head = head(event);
    let (tag, payloads): (u32, [(u32, &[u8]); 3]) = match event {
        Event::Published { data, .. } => (5, [(2, data), (0, &[]), (0, &[])]),
        Event::Op {
            data,
            compare,
            result,
            ..
        } => (32, [(11, data), (12, compare), (13, result)]),
        _ => return EventMessage { kind: Some(head) }.encode_to_vec(),
    };
    let payloads = payloads.into_iter().filter(|(_, bytes)| !bytes.is_empty());
    let head_len = match &head {
        Kind::Published(message) => message.encoded_len(),
        Kind::Op(message) => message.encoded_len(),
        _ => 0,
    };
    let inner = head_len
        + payloads
            .clone()
            .map(|(field, bytes)| {
                key_len(field) + encoded_len_varint(bytes.len() as u64) + bytes.len()
            })
            .sum::<usize>();
    let mut out = Vec::with_capacity(key_len(tag) + encoded_len_varint(inner as u64) + inner);
    encode_key(tag, WireType::LengthDelimited, &mut out);
    encode_varint(inner as u64, &mut out);
    match &head {
        Kind::Published(message) => message.encode_raw(&mut out),
        Kind::Op(message) => message.encode_raw(&mut out),
        _ => {}
    }
    for (field, bytes) in payloads {
        encode_key(field, WireType::LengthDelimited, &mut out);
        encode_varint(bytes.len() as u64, &mut out);
        out.extend_from_slice(bytes);
    }
    out
}

/// Info pairs as the message holds them.
fn entries_of(info: &std::collections::BTreeMap<String, String>) -> Vec<InfoEntry> {
    info.iter()
        .map(|(key, value)| InfoEntry {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

/// Info pairs from the message.
fn map_of(entries: Vec<InfoEntry>) -> std::collections::BTreeMap<String, String> {
    entries
        .into_iter()
        .map(|entry| (entry.key, entry.value))
        .collect()
}

/// The message of `event` with its payload fields (`data`, `compare`, `result`) left empty.
fn head(event: &Event) -> Kind {
    match event {
        Event::WindowCreated { .. }
        | Event::WindowFreed
        | Event::InfoSet { .. }
        | Event::Attach
        | Event::Detach
        | Event::RegionAttached { .. }
        | Event::RegionDetached { .. }
        | Event::Published { .. }
        | Event::Pulled { .. }
        | Event::Store { .. }
        | Event::Load { .. } => window_head(event),
        Event::FenceEnter { .. }
        | Event::FenceExit { .. }
        | Event::Post { .. }
        | Event::Start { .. }
        | Event::Complete
        | Event::WaitEnter
        | Event::WaitExit
        | Event::TestFalse
        | Event::Flush { .. }
        | Event::Sync
        | Event::BarrierEnter
        | Event::BarrierExit
        | Event::FlushLocal { .. } => epoch_head(event),
        Event::LockRequest { .. }
        | Event::LockGrant { .. }
        | Event::LockRelease { .. }
        | Event::LockRevoke { .. } => lock_head(event),
        Event::Admin { .. }
        | Event::PeerFailed { .. }
        | Event::Departed { .. }
        | Event::Sent { .. }
        | Event::Received { .. }
        | Event::Issued { .. }
        | Event::Returned { .. }
        | Event::OpIssued { .. }
        | Event::ClientEvents { .. }
        | Event::Op { .. } => process_head(event),
    }
}

/// [`head`] of the events of the window, its info, its regions and its public copy.
fn window_head(event: &Event) -> Kind {
    match event {
        Event::WindowCreated {
            world,
            name,
            sizes,
            disp_units,
            info,
            unified,
        } => Kind::WindowCreated(WindowCreated {
            world: world.clone(),
            name: name.clone(),
            sizes: sizes.clone(),
            disp_units: disp_units.clone(),
            info: entries_of(info),
            unified: *unified,
        }),
        Event::WindowFreed => Kind::WindowFreed(Empty {}),
        Event::InfoSet { info } => Kind::InfoSet(InfoSet {
            info: entries_of(info),
        }),
        Event::Attach => Kind::Attach(Empty {}),
        Event::Detach => Kind::Detach(Empty {}),
        Event::RegionAttached { base, size } => Kind::RegionAttached(Region {
            base: *base,
            size: *size,
        }),
        Event::RegionDetached { base, size } => Kind::RegionDetached(Region {
            base: *base,
            size: *size,
        }),
        Event::Published { offset, .. } => Kind::Published(Published {
            offset: *offset,
            data: Vec::new(),
        }),
        Event::Pulled { ranges: pulled } => Kind::Pulled(ranges(pulled)),
        Event::Store { ranges: stored } => Kind::Store(ranges(stored)),
        Event::Load { ranges: loaded } => Kind::Load(ranges(loaded)),
        _ => unreachable!("not an event of the window group"),
    }
}
/// [`head`] of the events of the epochs: fences, PSCW, flushes, sync and the barrier.
fn epoch_head(event: &Event) -> Kind {
    match event {
        Event::FenceEnter { fence, assert } => Kind::FenceEnter(FenceEnter {
            fence: *fence,
            assert: *assert,
        }),
        Event::FenceExit { fence } => Kind::FenceExit(FenceExit { fence: *fence }),
        Event::Post { group, assert } => Kind::Post(Group {
            group: group.clone(),
            assert: *assert,
        }),
        Event::Start { group, assert } => Kind::Start(Group {
            group: group.clone(),
            assert: *assert,
        }),
        Event::Complete => Kind::Complete(Empty {}),
        Event::WaitEnter => Kind::WaitEnter(Empty {}),
        Event::WaitExit => Kind::WaitExit(Empty {}),
        Event::TestFalse => Kind::TestFalse(Empty {}),
        Event::Flush { origin } => Kind::Flush(Flush { origin: *origin }),
        Event::Sync => Kind::Sync(Empty {}),
        Event::BarrierEnter => Kind::BarrierEnter(Empty {}),
        Event::BarrierExit => Kind::BarrierExit(Empty {}),
        Event::FlushLocal { target } => Kind::FlushLocal(FlushLocal { target: *target }),
        _ => unreachable!("not an event of the epoch group"),
    }
}
/// [`head`] of the events of the passive-target locks.
fn lock_head(event: &Event) -> Kind {
    match event {
        Event::LockRequest {
            origin,
            lock_type,
            nocheck,
        } => Kind::LockRequest(LockRequest {
            origin: *origin,
            lock_type: lock_type.clone(),
            nocheck: *nocheck,
        }),
        Event::LockGrant {
            origin,
            lock_type,
            token,
        } => Kind::LockGrant(LockGrant {
            origin: *origin,
            lock_type: lock_type.clone(),
            token: *token,
        }),
        Event::LockRelease { origin, token } => Kind::LockRelease(LockRelease {
            origin: *origin,
            token: *token,
        }),
        Event::LockRevoke {
            origin,
            token,
            reason,
        } => Kind::LockRevoke(LockRevoke {
            origin: *origin,
            token: *token,
            reason: reason.clone(),
        }),
        _ => unreachable!("not an event of the lock group"),
    }
}
/// [`head`] of the events of the processes, their messages, calls and operations.
fn process_head(event: &Event) -> Kind {
    match event {
        Event::Admin { action, by } => Kind::Admin(Admin {
            action: action.clone(),
            by: by.clone(),
        }),
        Event::PeerFailed { peer, call } => Kind::PeerFailed(PeerFailed {
            peer: *peer,
            call: call.clone(),
        }),
        Event::Departed {
            incarnation,
            reason,
        } => Kind::Departed(Departed {
            incarnation: *incarnation,
            reason: reason.clone(),
        }),
        Event::Sent { to, tag, message } => Kind::Sent(PointToPoint {
            peer: *to,
            tag: *tag,
            message: *message,
        }),
        Event::Received { from, tag, message } => Kind::Received(PointToPoint {
            peer: *from,
            tag: *tag,
            message: *message,
        }),
        Event::Issued { call, target } => Kind::Issued(Call {
            call: call.clone(),
            target: *target,
        }),
        Event::Returned { call, target } => Kind::Returned(Call {
            call: call.clone(),
            target: *target,
        }),
        Event::OpIssued {
            op_id,
            target,
            op,
            datatype,
            runs,
        } => {
            let (kind, reduction) = op_kind(op);
            Kind::OpIssued(OpIssued {
                op_id: *op_id,
                target: *target,
                kind: kind as i32,
                reduction,
                datatype: datatype.clone(),
                runs: Some(ranges(runs)),
            })
        }
        Event::ClientEvents { from, to, hash } => Kind::ClientEvents(ClientEvents {
            from: *from,
            to: *to,
            hash: hash.clone(),
        }),
        Event::Op {
            origin,
            origin_incarnation,
            op_id,
            epoch,
            token,
            op,
            datatype,
            disp,
            runs,
            ..
        } => {
            let (kind, reduction) = op_kind(op);
            Kind::Op(Op {
                origin: *origin,
                origin_incarnation: *origin_incarnation,
                op_id: *op_id,
                epoch: *epoch,
                token: *token,
                kind: kind as i32,
                reduction,
                datatype: datatype.clone(),
                disp: *disp,
                runs: Some(ranges(runs)),
                data: Vec::new(),
                compare: Vec::new(),
                result: Vec::new(),
            })
        }
        _ => unreachable!("not an event of the process group"),
    }
}

/// The event of protobuf bytes.
pub(super) fn decode(bytes: &[u8]) -> RmaResult<Event> {
    let message = EventMessage::decode(bytes)
        .map_err(|error| rma_err!(Other, "unreadable audit event: {error}"))?;
    let Some(kind) = message.kind else {
        return Err(rma_err!(
            Other,
            "unreadable audit event: no event of a kind this version knows"
        ));
    };
    Ok(match kind {
        Kind::WindowCreated(_)
        | Kind::WindowFreed(_)
        | Kind::InfoSet(_)
        | Kind::Attach(_)
        | Kind::Detach(_)
        | Kind::RegionAttached(_)
        | Kind::RegionDetached(_)
        | Kind::Published(_)
        | Kind::Pulled(_)
        | Kind::Store(_)
        | Kind::Load(_) => window_event(kind)?,
        Kind::FenceEnter(_)
        | Kind::FenceExit(_)
        | Kind::Post(_)
        | Kind::Start(_)
        | Kind::Complete(_)
        | Kind::WaitEnter(_)
        | Kind::WaitExit(_)
        | Kind::TestFalse(_)
        | Kind::Flush(_)
        | Kind::Sync(_)
        | Kind::BarrierEnter(_)
        | Kind::BarrierExit(_)
        | Kind::FlushLocal(_) => epoch_event(kind)?,
        Kind::LockRequest(_) | Kind::LockGrant(_) | Kind::LockRelease(_) | Kind::LockRevoke(_) => {
            lock_event(kind)?
        }
        Kind::Admin(_)
        | Kind::PeerFailed(_)
        | Kind::Departed(_)
        | Kind::Sent(_)
        | Kind::Received(_)
        | Kind::Issued(_)
        | Kind::Returned(_)
        | Kind::OpIssued(_)
        | Kind::ClientEvents(_)
        | Kind::Op(_) => process_event(kind)?,
    })
}

/// [`decode`] of the events of the window, its info, its regions and its public copy.
fn window_event(kind: Kind) -> RmaResult<Event> {
    Ok(match kind {
        Kind::WindowCreated(m) => Event::WindowCreated {
            world: m.world,
            name: m.name,
            sizes: m.sizes,
            disp_units: m.disp_units,
            info: map_of(m.info),
            unified: m.unified,
        },
        Kind::WindowFreed(_) => Event::WindowFreed,
        Kind::InfoSet(m) => Event::InfoSet {
            info: map_of(m.info),
        },
        Kind::Attach(_) => Event::Attach,
        Kind::Detach(_) => Event::Detach,
        Kind::RegionAttached(m) => Event::RegionAttached {
            base: m.base,
            size: m.size,
        },
        Kind::RegionDetached(m) => Event::RegionDetached {
            base: m.base,
            size: m.size,
        },
        Kind::Published(m) => Event::Published {
            offset: m.offset,
            data: m.data,
        },
        Kind::Pulled(m) => Event::Pulled {
            ranges: pairs(Some(m))?,
        },
        Kind::Store(m) => Event::Store {
            ranges: pairs(Some(m))?,
        },
        Kind::Load(m) => Event::Load {
            ranges: pairs(Some(m))?,
        },
        _ => unreachable!("not an event of the window group"),
    })
}
/// [`decode`] of the events of the epochs: fences, PSCW, flushes, sync and the barrier.
fn epoch_event(kind: Kind) -> RmaResult<Event> {
    Ok(match kind {
        Kind::FenceEnter(m) => Event::FenceEnter {
            fence: m.fence,
            assert: m.assert,
        },
        Kind::FenceExit(m) => Event::FenceExit { fence: m.fence },
        Kind::Post(m) => Event::Post {
            group: m.group,
            assert: m.assert,
        },
        Kind::Start(m) => Event::Start {
            group: m.group,
            assert: m.assert,
        },
        Kind::Complete(_) => Event::Complete,
        Kind::WaitEnter(_) => Event::WaitEnter,
        Kind::WaitExit(_) => Event::WaitExit,
        Kind::TestFalse(_) => Event::TestFalse,
        Kind::Flush(m) => Event::Flush { origin: m.origin },
        Kind::Sync(_) => Event::Sync,
        Kind::BarrierEnter(_) => Event::BarrierEnter,
        Kind::BarrierExit(_) => Event::BarrierExit,
        Kind::FlushLocal(m) => Event::FlushLocal { target: m.target },
        _ => unreachable!("not an event of the epoch group"),
    })
}
/// [`decode`] of the events of the passive-target locks.
fn lock_event(kind: Kind) -> RmaResult<Event> {
    Ok(match kind {
        Kind::LockRequest(m) => Event::LockRequest {
            origin: m.origin,
            lock_type: m.lock_type,
            nocheck: m.nocheck,
        },
        Kind::LockGrant(m) => Event::LockGrant {
            origin: m.origin,
            lock_type: m.lock_type,
            token: m.token,
        },
        Kind::LockRelease(m) => Event::LockRelease {
            origin: m.origin,
            token: m.token,
        },
        Kind::LockRevoke(m) => Event::LockRevoke {
            origin: m.origin,
            token: m.token,
            reason: m.reason,
        },
        _ => unreachable!("not an event of the lock group"),
    })
}
/// [`decode`] of the events of the processes, their messages, calls and operations.
fn process_event(kind: Kind) -> RmaResult<Event> {
    Ok(match kind {
        Kind::Admin(m) => Event::Admin {
            action: m.action,
            by: m.by,
        },
        Kind::PeerFailed(m) => Event::PeerFailed {
            peer: m.peer,
            call: m.call,
        },
        Kind::Departed(m) => Event::Departed {
            incarnation: m.incarnation,
            reason: m.reason,
        },
        Kind::Sent(m) => Event::Sent {
            to: m.peer,
            tag: m.tag,
            message: m.message,
        },
        Kind::Received(m) => Event::Received {
            from: m.peer,
            tag: m.tag,
            message: m.message,
        },
        Kind::Issued(m) => Event::Issued {
            call: m.call,
            target: m.target,
        },
        Kind::Returned(m) => Event::Returned {
            call: m.call,
            target: m.target,
        },
        Kind::OpIssued(m) => Event::OpIssued {
            op_id: m.op_id,
            target: m.target,
            op: recorded_op(m.kind, m.reduction)?,
            datatype: m.datatype,
            runs: pairs(m.runs)?,
        },
        Kind::ClientEvents(m) => Event::ClientEvents {
            from: m.from,
            to: m.to,
            hash: m.hash,
        },
        Kind::Op(m) => Event::Op {
            origin: m.origin,
            origin_incarnation: m.origin_incarnation,
            op_id: m.op_id,
            epoch: m.epoch,
            token: m.token,
            op: recorded_op(m.kind, m.reduction)?,
            datatype: m.datatype,
            disp: m.disp,
            runs: pairs(m.runs)?,
            data: m.data,
            compare: m.compare,
            result: m.result,
        },
        _ => unreachable!("not an event of the process group"),
    })
}
