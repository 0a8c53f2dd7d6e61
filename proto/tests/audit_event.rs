//! The audit store's binary events are what `proto/onesided/audit/v1/event.proto` says: core's
//! encoder (hand-declared prost messages) and code generated from the file agree byte for byte,
//! field by field.

use onesided_core::audit::{Body, Event, RecordedOp};
use onesided_proto::audit::v1 as pb;
use prost::Message;

fn binary(event: &Event) -> Vec<u8> {
    match Body::encode(event) {
        Body::Binary(bytes) => bytes,
        Body::Json(_) => panic!("new rows are binary"),
    }
}

fn put() -> Event {
    Event::Op {
        origin: 2,
        origin_incarnation: 7,
        op_id: 11,
        epoch: 3,
        token: 5,
        op: RecordedOp::FetchAndOp("sum".into()),
        datatype: "i64".into(),
        disp: 4,
        runs: vec![(32, 40)],
        data: 9i64.to_le_bytes().to_vec(),
        compare: Vec::new(),
        result: 1i64.to_le_bytes().to_vec(),
    }
}

#[test]
fn an_operation_reads_field_by_field_as_the_proto_file_says() {
    let decoded = pb::Event::decode(binary(&put()).as_slice()).unwrap();
    let Some(pb::event::Event::Op(op)) = decoded.event else {
        panic!("{decoded:?}")
    };
    assert_eq!((op.origin, op.origin_incarnation, op.op_id), (2, 7, 11));
    assert_eq!((op.epoch, op.token, op.disp), (3, 5, 4));
    assert_eq!(op.kind(), pb::OpKind::FetchAndOp);
    assert_eq!(
        (op.reduction.as_str(), op.datatype.as_str()),
        ("sum", "i64")
    );
    assert_eq!(op.runs.unwrap().bounds, [32, 40]);
    assert_eq!(op.data, 9i64.to_le_bytes());
    assert!(op.compare.is_empty());
    assert_eq!(op.result, 1i64.to_le_bytes());
}

#[test]
fn generated_code_writes_what_core_reads_and_the_reverse() {
    let events = [
        put(),
        Event::Op {
            origin: 0,
            origin_incarnation: 1,
            op_id: 2,
            epoch: 0,
            token: 9,
            op: RecordedOp::CompareAndSwap,
            datatype: "u64".into(),
            disp: 0,
            runs: vec![(0, 8)],
            data: vec![1; 8],
            compare: vec![2; 8],
            result: vec![3; 8],
        },
        Event::Op {
            origin: 1,
            origin_incarnation: 1,
            op_id: 3,
            epoch: 1,
            token: 0,
            op: RecordedOp::Get,
            datatype: "u8".into(),
            disp: 0,
            runs: vec![(0, 1 << 20)],
            data: Vec::new(),
            compare: Vec::new(),
            result: vec![7; 1 << 20],
        },
        Event::WindowCreated {
            unified: false,
            world: "w".into(),
            name: "x".into(),
            sizes: vec![8, 16],
            disp_units: vec![1, 8],
            info: [("accumulate_ordering".into(), "none".into())].into(),
        },
        Event::Returned {
            call: "unlock".into(),
            target: Some(0),
        },
        Event::FlushLocal { target: None },
        Event::Store {
            ranges: vec![(0, 8), (16, 24)],
        },
        Event::LockGrant {
            origin: 1,
            lock_type: "exclusive".into(),
            token: 4,
        },
        Event::Published {
            offset: 8,
            data: vec![1, 2, 3],
        },
        Event::WaitExit,
        Event::Sent {
            to: 3,
            tag: -2,
            message: 17,
        },
        Event::Received {
            from: 1,
            tag: 5,
            message: 17,
        },
        Event::Admin {
            action: "revoke_locks".into(),
            by: "admin from 127.0.0.1:4242".into(),
        },
        Event::LockRevoke {
            origin: 1,
            token: 4,
            reason: "revoked by an operator".into(),
        },
    ];
    for event in events {
        let bytes = binary(&event);
        let generated = pb::Event::decode(bytes.as_slice()).unwrap();
        // the same bytes back: no field core writes is unknown to the file, none differs
        assert_eq!(generated.encode_to_vec(), bytes, "{event:?}");
        assert_eq!(
            Body::Binary(generated.encode_to_vec()).decode().unwrap(),
            event
        );
    }
    // a message only generated code wrote
    let written = pb::Event {
        event: Some(pb::event::Event::FlushLocal(pb::FlushLocal {
            target: Some(3),
        })),
    };
    assert_eq!(
        Body::Binary(written.encode_to_vec()).decode().unwrap(),
        Event::FlushLocal { target: Some(3) }
    );
}
