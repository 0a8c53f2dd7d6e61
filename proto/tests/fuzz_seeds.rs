//! The seed inputs of the `client_message` fuzz target (fuzz/seeds/client_message): encoded
//! `ClientMessage`s that a session accepts, so that the fuzzer starts from calls that get past
//! every check and mutates from there. This test keeps them current with the schema:
//! `UPDATE_FUZZ_SEEDS=1 cargo test -p onesided-proto --test fuzz_seeds` rewrites them.

use std::path::PathBuf;

use onesided_core::audit::Event;
use onesided_core::{Datatype, Op};
use onesided_proto::v1::{self, client_message::Call, layout, ClientMessage};
use prost::Message;

fn call(id: u64, call: Call) -> ClientMessage {
    ClientMessage {
        id,
        call: Some(call),
    }
}

fn batch(id: u64, calls: Vec<Call>) -> ClientMessage {
    let calls = calls
        .into_iter()
        .enumerate()
        .map(|(index, inner)| call(id + 1 + index as u64, inner))
        .collect();
    call(id, Call::Batch(v1::Batch { calls }))
}

fn contiguous(count: u64) -> Option<v1::Layout> {
    Some(v1::Layout {
        kind: Some(layout::Kind::Contiguous(v1::Contiguous { count })),
    })
}

fn op(target: u32, kind: v1::OpKind, dtype: Datatype, disp: u64, count: u64) -> Call {
    let size = dtype.size() as u64;
    let carries = !matches!(kind, v1::OpKind::Get);
    Call::Op(v1::RmaOp {
        window: 1,
        target,
        kind: kind as i32,
        datatype: dtype.code(),
        op: Op::Sum.code(),
        disp,
        layout: contiguous(count),
        data: if carries {
            vec![3u8; (count * size) as usize].into()
        } else {
            Default::default()
        },
        compare: if kind == v1::OpKind::CompareAndSwap {
            vec![0u8; size as usize].into()
        } else {
            Default::default()
        },
        request_based: false,
        token: 0,
    })
}

fn segment(offset: u64, data: &[u8]) -> v1::Segment {
    v1::Segment {
        offset,
        data: data.to_vec().into(),
    }
}

/// Named seeds; the fuzz target's window is ranks of 64, 24, 0 and 96 bytes with disp_units 1,
/// 8, 4 and 3, and the session is rank 1.
fn seeds() -> Vec<(&'static str, ClientMessage)> {
    use v1::OpKind::*;
    let vector = Call::Op(v1::RmaOp {
        window: 1,
        target: 3,
        kind: Put as i32,
        datatype: Datatype::I16.code(),
        disp: 2,
        layout: Some(v1::Layout {
            kind: Some(layout::Kind::Vector(v1::Vector {
                count: 3,
                blocklen: 2,
                stride: 5,
            })),
        }),
        data: vec![1u8; 12].into(),
        ..Default::default()
    });
    let indexed = Call::Op(v1::RmaOp {
        window: 1,
        target: 0,
        kind: GetAccumulate as i32,
        datatype: Datatype::U32.code(),
        op: Op::Max.code(),
        disp: 4,
        layout: Some(v1::Layout {
            kind: Some(layout::Kind::Indexed(v1::Indexed {
                blocks: vec![v1::Block { disp: 3, len: 2 }, v1::Block { disp: 0, len: 1 }],
            })),
        }),
        data: vec![9u8; 12].into(),
        ..Default::default()
    });
    let resized = Call::Op(v1::RmaOp {
        window: 1,
        target: 0,
        kind: Put as i32,
        datatype: Datatype::I32.code(),
        disp: 4,
        layout: Some(v1::Layout {
            kind: Some(layout::Kind::Resized(Box::new(v1::Resized {
                inner: contiguous(1).map(Box::new),
                lb: -4,
                extent: 16,
                count: 3,
            }))),
        }),
        data: vec![5u8; 12].into(),
        ..Default::default()
    });
    let record = |kind: v1::OpKind, second: Datatype| {
        Call::Op(v1::RmaOp {
            window: 1,
            target: 0,
            kind: kind as i32,
            datatype: Datatype::I64.code(),
            op: Op::Sum.code(),
            layout: Some(v1::Layout {
                kind: Some(layout::Kind::Struct(v1::Struct {
                    blocks: vec![
                        v1::StructBlock {
                            offset: 8,
                            datatype: Datatype::I64.code(),
                            len: 1,
                        },
                        v1::StructBlock {
                            offset: 24,
                            datatype: second.code(),
                            len: 1,
                        },
                    ],
                })),
            }),
            data: vec![7u8; 8 + second.size()].into(),
            ..Default::default()
        })
    };
    vec![
        (
            "resized_and_struct_layouts",
            batch(
                20,
                vec![
                    Call::LockAll(v1::LockAll {
                        window: 1,
                        assert: 0,
                    }),
                    resized,
                    record(Put, Datatype::F32),
                    record(Accumulate, Datatype::I64),
                    record(Accumulate, Datatype::F64),
                    Call::UnlockAll(v1::UnlockAll {
                        window: 1,
                        push: Vec::new(),
                    }),
                ],
            ),
        ),
        (
            "lock_all_epoch",
            batch(
                10,
                vec![
                    Call::LockAll(v1::LockAll {
                        window: 1,
                        assert: 0,
                    }),
                    op(0, Put, Datatype::Byte, 5, 4),
                    op(3, Get, Datatype::I32, 1, 3),
                    op(1, Accumulate, Datatype::I64, 1, 2),
                    op(0, FetchAndOp, Datatype::U16, 3, 1),
                    op(3, CompareAndSwap, Datatype::I32, 7, 1),
                    vector,
                    indexed,
                    Call::Flush(v1::Flush {
                        window: 1,
                        target: 3,
                        local: false,
                    }),
                    Call::FlushAll(v1::FlushAll {
                        window: 1,
                        local: true,
                    }),
                    Call::UnlockAll(v1::UnlockAll {
                        window: 1,
                        push: vec![segment(8, &[1, 2, 3])],
                    }),
                ],
            ),
        ),
        (
            "fence_epoch",
            batch(
                30,
                vec![
                    Call::Fence(v1::Fence {
                        window: 1,
                        assert: 0,
                        push: vec![segment(0, &[5; 8])],
                    }),
                    op(3, Put, Datatype::F64, 2, 3),
                    op(0, GetAccumulate, Datatype::F32, 1, 2),
                    Call::Fence(v1::Fence {
                        window: 1,
                        assert: 0,
                        push: Vec::new(),
                    }),
                ],
            ),
        ),
        (
            "pscw_epoch",
            batch(
                50,
                vec![
                    Call::Post(v1::Post {
                        window: 1,
                        group: vec![0, 3],
                        assert: 0,
                        push: Vec::new(),
                    }),
                    Call::Start(v1::Start {
                        window: 1,
                        group: vec![0, 2],
                        assert: 0,
                    }),
                    op(0, Put, Datatype::I8, 0, 16),
                    Call::Complete(v1::Complete { window: 1 }),
                    Call::Test(v1::Test { window: 1 }),
                    Call::Wait(v1::Wait { window: 1 }),
                ],
            ),
        ),
        (
            "lock_epoch",
            batch(
                70,
                vec![
                    Call::Lock(v1::Lock {
                        window: 1,
                        lock_type: v1::LockType::Exclusive as i32,
                        target: 1,
                        assert: 0,
                    }),
                    op(1, Put, Datatype::PairI32I32, 1, 2),
                    Call::Sync(v1::Sync {
                        window: 1,
                        push: vec![segment(20, &[7; 4])],
                    }),
                    Call::Unlock(v1::Unlock {
                        window: 1,
                        target: 1,
                        push: Vec::new(),
                    }),
                    Call::WinFree(v1::WinFree { window: 1 }),
                ],
            ),
        ),
        (
            "record",
            call(
                90,
                Call::Record(v1::Record {
                    window: 1,
                    events: vec![
                        Event::Store {
                            ranges: vec![(0, 8)],
                        }
                        .to_json(),
                        Event::FlushLocal { target: Some(2) }.to_json(),
                    ],
                    rows: None,
                }),
            ),
        ),
        (
            // a client that persists its own rows ships their markers; heartbeats keep its
            // lease
            "client_rows",
            batch(
                110,
                vec![
                    Call::Heartbeat(v1::Heartbeat {}),
                    Call::Record(v1::Record {
                        window: 1,
                        events: Vec::new(),
                        rows: Some(v1::ClientRows {
                            from: 1,
                            to: 3,
                            hash: vec![0xab; 32].into(),
                        }),
                    }),
                    Call::Record(v1::Record {
                        window: 1,
                        events: Vec::new(),
                        rows: Some(v1::ClientRows {
                            from: 4,
                            to: 4,
                            hash: vec![0xcd; 32].into(),
                        }),
                    }),
                ],
            ),
        ),
    ]
}

#[test]
fn the_fuzz_seeds_are_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/client_message");
    let update = std::env::var_os("UPDATE_FUZZ_SEEDS").is_some();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    for (name, message) in seeds() {
        let path = dir.join(name);
        let encoded = message.encode_to_vec();
        if update {
            std::fs::write(&path, &encoded).unwrap();
            continue;
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (UPDATE_FUZZ_SEEDS=1 writes the seeds)",
                path.display()
            )
        });
        assert_eq!(
            ClientMessage::decode(committed.as_slice()).unwrap(),
            message,
            "{name} is stale (UPDATE_FUZZ_SEEDS=1 rewrites the seeds)"
        );
    }
}
