//! The audit vocabulary: what is recorded about every epoch, the hash chain that makes the log
//! tamper-evident, and replay, which rebuilds every rank's public copy at any sequence number
//! with the same [`crate::window::apply`] that runs live.
//!
//! Owns: event meaning, canonical encoding for hashing, verification and replay. Must not:
//! store anything (the server's audit writer does).
//!
//! - `events`: the vocabulary ([`Event`], [`RecordedOp`], [`AuditRecord`]) and how a row holds
//!   an event ([`Body`]; `binary`: the protobuf form).
//! - `chain`: the hash chain ([`chain_hash`], [`GENESIS`]), stored rows, [`readable`] and
//!   [`verify`].
//! - `history`: the client chains: [`merge`] and [`verify_history`].
//! - `replay`: [`replay`] and [`apply_record`], through the live target's `apply`.

mod binary;
mod chain;
mod events;
mod history;
mod replay;

pub use chain::{all_readable, chain_hash, readable, verify, StoredRow, GENESIS};
pub use events::{place, AuditRecord, Body, Event, RecordedOp};
pub use history::{
    merge, verify_history, ClientBreak, ClientFault, ClientSpan, RecordedWindow, Verdict,
};
pub use replay::{apply_record, replay};

/// Events the tests of several modules of core build alike.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Event, RecordedOp};

    /// An operation as its target records it: `origin`'s (incarnation 1) `op_id`, under no
    /// fencing token, `op` of `data` as `datatype` at `disp`, covering `runs`; no compare or
    /// result bytes.
    pub(crate) fn op_event(
        origin: u32,
        op_id: u64,
        op: RecordedOp,
        datatype: &str,
        disp: u64,
        runs: Vec<(u64, u64)>,
        data: Vec<u8>,
    ) -> Event {
        Event::Op {
            origin,
            origin_incarnation: 1,
            op_id,
            epoch: 0,
            token: 0,
            op,
            datatype: datatype.into(),
            disp,
            runs,
            data,
            compare: Vec::new(),
            result: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::fixtures::op_event;

    use super::*;

    fn record(seq: u64, rank: u32, event: Event) -> AuditRecord {
        AuditRecord {
            window: 7,
            seq,
            at_ns: seq * 10,
            rank,
            incarnation: 1,
            cseq: None,
            event,
        }
    }

    fn history() -> Vec<AuditRecord> {
        vec![
            record(
                1,
                0,
                Event::WindowCreated {
                    unified: false,
                    world: "w".into(),
                    name: "x".into(),
                    sizes: vec![8, 8],
                    disp_units: vec![4, 4],
                    info: std::collections::BTreeMap::new(),
                },
            ),
            record(
                2,
                1,
                Event::Published {
                    offset: 0,
                    data: 5i32.to_le_bytes().to_vec(),
                },
            ),
            record(
                3,
                1,
                op_event(
                    0,
                    1,
                    RecordedOp::Accumulate("sum".into()),
                    "i32",
                    0,
                    vec![(0, 4)],
                    2i32.to_le_bytes().to_vec(),
                ),
            ),
            record(
                4,
                0,
                op_event(
                    1,
                    1,
                    RecordedOp::Put,
                    "i32",
                    1,
                    vec![(4, 4)],
                    9i32.to_le_bytes().to_vec(),
                ),
            ),
        ]
    }

    fn stored(records: &[AuditRecord]) -> Vec<StoredRow> {
        stored_as(records, |_| Body::encode)
    }

    /// The rows of `records` as stored, the body of row `index` encoded by `encoding(index)`.
    fn stored_as(
        records: &[AuditRecord],
        encoding: impl Fn(usize) -> fn(&Event) -> Body,
    ) -> Vec<StoredRow> {
        let mut previous = GENESIS;
        records
            .iter()
            .enumerate()
            .map(|(index, record)| {
                let body = encoding(index)(&record.event);
                let hash = chain_hash(&previous, record, &body);
                let row = StoredRow {
                    record: record.clone(),
                    unreadable: None,
                    body,
                    prev_hash: previous.to_vec(),
                    hash: hash.to_vec(),
                };
                previous = hash;
                row
            })
            .collect()
    }

    /// Changes a stored row's event as someone editing the store would: body and event, not
    /// the hashes.
    fn rewrite(row: &mut StoredRow, change: impl FnOnce(&mut Event)) {
        change(&mut row.record.event);
        row.body = Body::encode(&row.record.event);
    }

    /// Every kind of event, with payloads, optional fields set and unset.
    fn every_kind() -> Vec<Event> {
        let op = |op: RecordedOp| Event::Op {
            origin: 3,
            origin_incarnation: 9,
            op_id: u64::MAX,
            epoch: 2,
            token: 17,
            op,
            datatype: "f64".into(),
            disp: 1 << 40,
            runs: vec![(0, 8), (16, 24)],
            data: (0..=255).collect(),
            compare: vec![1, 2],
            result: vec![0; 3],
        };
        let mut events = vec![
            Event::WindowCreated {
                unified: false,
                world: "wörld".into(),
                name: "x".into(),
                sizes: vec![8, 0, u64::MAX],
                disp_units: vec![1, 4, 8],
                info: std::collections::BTreeMap::from([
                    ("accumulate_ops".into(), "same_op".into()),
                    ("ünknown".into(), String::new()),
                ]),
            },
            Event::WindowFreed,
            Event::InfoSet {
                info: std::collections::BTreeMap::from([
                    ("accumulate_ops".into(), "same_op_no_op".into()),
                    ("kept".into(), "as given".into()),
                ]),
            },
            Event::Attach,
            Event::Detach,
            Event::RegionAttached {
                base: 1 << 12,
                size: 24,
            },
            Event::RegionDetached {
                base: 1 << 40,
                size: u64::MAX,
            },
            Event::Published {
                offset: 12,
                data: vec![0, 255, 7],
            },
            Event::Pulled {
                ranges: vec![(0, 4), (8, 12)],
            },
            Event::FenceEnter {
                fence: 4,
                assert: 0x1000,
            },
            Event::FenceExit { fence: 4 },
            Event::Post {
                group: vec![0, 2],
                assert: 0,
            },
            Event::Start {
                group: vec![],
                assert: 8,
            },
            Event::Complete,
            Event::WaitEnter,
            Event::WaitExit,
            Event::TestFalse,
            Event::LockRequest {
                origin: 1,
                lock_type: "exclusive".into(),
                nocheck: true,
            },
            Event::LockGrant {
                origin: 1,
                lock_type: "shared".into(),
                token: 5,
            },
            Event::LockRelease {
                origin: 1,
                token: 5,
            },
            Event::LockRevoke {
                origin: 1,
                token: 5,
                reason: "lease lapsed".into(),
            },
            Event::PeerFailed {
                peer: 2,
                call: "fence".into(),
            },
            Event::Admin {
                action: "revoke_locks".into(),
                by: "admin from 127.0.0.1:5000 (web view)".into(),
            },
            Event::Departed {
                incarnation: 3,
                reason: "clean".into(),
            },
            Event::Flush { origin: 0 },
            Event::Sync,
            Event::BarrierEnter,
            Event::BarrierExit,
            Event::Sent {
                to: 2,
                tag: -0,
                message: 9,
            },
            Event::Received {
                from: 1,
                tag: 77,
                message: 9,
            },
            Event::Issued {
                call: "lock".into(),
                target: Some(0),
            },
            Event::Returned {
                call: "fence".into(),
                target: None,
            },
            Event::FlushLocal { target: None },
            Event::FlushLocal { target: Some(7) },
            Event::OpIssued {
                op_id: 1,
                target: 0,
                op: RecordedOp::GetAccumulate("no_op".into()),
                datatype: "i32".into(),
                runs: vec![(4, 8)],
            },
            Event::Store {
                ranges: vec![(0, 1)],
            },
            Event::Load { ranges: vec![] },
            Event::ClientEvents {
                from: 1,
                to: 3,
                hash: vec![7; 32],
            },
        ];
        for recorded in [
            RecordedOp::Put,
            RecordedOp::Get,
            RecordedOp::Accumulate("sum".into()),
            RecordedOp::GetAccumulate("replace".into()),
            RecordedOp::FetchAndOp("max".into()),
            RecordedOp::CompareAndSwap,
        ] {
            events.push(op(recorded));
        }
        events
    }

    #[test]
    fn every_event_round_trips_through_both_encodings() {
        let events = every_kind();
        let kinds: HashSet<&str> = events.iter().map(Event::kind).collect();
        assert_eq!(kinds.len(), 38, "one of each of the 38 kinds");
        for event in events {
            let binary = Body::encode(&event);
            assert!(matches!(binary, Body::Binary(_)));
            assert_eq!(binary.decode().unwrap(), event);
            assert_eq!(binary.to_json(), event.to_json());
            let json = Body::Json(event.to_json());
            assert_eq!(json.decode().unwrap(), event);
        }
    }

    #[test]
    fn a_binary_payload_is_stored_as_its_bytes() {
        let data = vec![0xab; 1 << 20];
        let event = Event::Op {
            origin: 0,
            origin_incarnation: 1,
            op_id: 1,
            epoch: 0,
            token: 3,
            op: RecordedOp::Put,
            datatype: "u8".into(),
            disp: 0,
            runs: vec![(0, data.len() as u64)],
            data: data.clone(),
            compare: Vec::new(),
            result: Vec::new(),
        };
        let binary = Body::encode(&event).len();
        assert!(binary < data.len() + 64, "{binary} bytes for 1 MiB");
        assert!(Body::Json(event.to_json()).len() > 2 * data.len());
    }

    #[test]
    fn unreadable_binary_bodies_are_errors_not_panics() {
        for bytes in [&[0xff][..], &[0x0a, 0x05, 0x01], &[], &[0xfa, 0x01, 0x05]] {
            let body = Body::Binary(bytes.to_vec());
            assert_eq!(
                body.decode().map_err(|error| error.class),
                Err(crate::ErrorClass::Other),
                "{bytes:?}"
            );
            assert!(body.to_json().contains("unreadable"), "{}", body.to_json());
        }
    }

    #[test]
    fn a_chain_of_json_rows_continued_in_binary_verifies() {
        // a store written before schema version 4 holds JSON rows; new rows follow in binary
        let records = history();
        let json: fn(&Event) -> Body = |event| Body::Json(event.to_json());
        let rows = stored_as(
            &records,
            |index| if index < 2 { json } else { Body::encode },
        );
        assert_eq!(verify(&rows), Ok(()));
        // the same event in the other encoding is another row: the hash says so
        let mut switched = rows.clone();
        switched[2].body = Body::Json(switched[2].record.event.to_json());
        assert_eq!(verify(&switched), Err(3));
        let mut switched = rows;
        switched[0].body = Body::encode(&switched[0].record.event);
        assert_eq!(verify(&switched), Err(1));
    }

    #[test]
    fn replay_rebuilds_copies_at_any_point() {
        let records = history();
        let end = replay(&records, None).unwrap();
        assert_eq!(end[1][..4], 7i32.to_le_bytes());
        assert_eq!(end[0][4..], 9i32.to_le_bytes());
        let early = replay(&records, Some(2)).unwrap();
        assert_eq!(early[1][..4], 5i32.to_le_bytes());
        assert_eq!(early[0], vec![0; 8]);
    }

    #[test]
    fn events_round_trip_through_json() {
        for record in history() {
            let body = record.event.to_json();
            assert_eq!(Event::from_json(&body).unwrap(), record.event, "{body}");
        }
    }

    /// A client chain of rank 1, incarnation 1 on window 7: its rows as stored, and the
    /// marker of each range.
    fn client_chain(events: &[Event]) -> Vec<StoredRow> {
        let records: Vec<AuditRecord> = events
            .iter()
            .enumerate()
            .map(|(index, event)| AuditRecord {
                window: 7,
                seq: index as u64 + 1,
                at_ns: 5 + index as u64,
                rank: 1,
                incarnation: 1,
                cseq: None,
                event: event.clone(),
            })
            .collect();
        stored(&records)
    }

    fn marker(client: &[StoredRow], from: u64, to: u64) -> Event {
        Event::ClientEvents {
            from,
            to,
            hash: client[to as usize - 1].hash.clone(),
        }
    }

    /// Window rows: creation, marker of client rows 1..=2, a put at rank 1, marker of 3..=3.
    fn with_markers() -> (Vec<StoredRow>, Vec<StoredRow>) {
        let client = client_chain(&[
            Event::Store {
                ranges: vec![(0, 8)],
            },
            Event::Returned {
                call: "lock".into(),
                target: Some(1),
            },
            Event::Load {
                ranges: vec![(0, 4)],
            },
        ]);
        let mut records = history();
        records.truncate(2);
        let mut push = |rank: u32, event: Event| {
            let seq = records.len() as u64 + 1;
            records.push(record(seq, rank, event));
        };
        push(1, marker(&client, 1, 2));
        push(1, Event::Sync);
        push(1, marker(&client, 3, 3));
        (stored(&records), client)
    }

    #[test]
    fn merge_puts_client_rows_where_their_marker_is() {
        let (window, client) = with_markers();
        let records: Vec<AuditRecord> = window.iter().map(|row| row.record.clone()).collect();
        let merged = merge(records, &client);
        let places: Vec<(String, &str)> = merged
            .iter()
            .map(|record| (record.place(), record.event.kind()))
            .collect();
        assert_eq!(
            places,
            [
                ("1".to_string(), "window_created"),
                ("2".to_string(), "published"),
                ("3:1".to_string(), "store"),
                ("3:2".to_string(), "returned"),
                ("4".to_string(), "sync"),
                ("5:3".to_string(), "load"),
            ]
        );
        // the marker's clock, so the timeline has one clock
        assert_eq!(merged[2].at_ns, 30);
        assert_eq!(merged[2].rank, 1);
    }

    #[test]
    fn merge_leaves_out_rows_a_client_may_not_record() {
        let client = client_chain(&[Event::WindowFreed]);
        let mut records = history();
        records.truncate(1);
        records.push(record(2, 1, marker(&client, 1, 1)));
        let merged = merge(records, &client);
        assert_eq!(merged.len(), 1);
        assert_eq!(
            verify_history(&stored(&history()[..1]), &client).first_bad,
            None,
            "without a marker nothing names it"
        );
    }

    #[test]
    fn verify_history_checks_every_marked_client_row() {
        let (window, client) = with_markers();
        let intact = verify_history(&window, &client);
        assert_eq!(
            intact,
            Verdict {
                events: window.len() as u64,
                first_bad: None,
                client_break: None,
                client_events: 3,
                pending: Vec::new(),
                unmarked: Vec::new(),
            }
        );
        let broken_at = |client: &[StoredRow]| {
            let verdict = verify_history(&window, client);
            let at = verdict.client_break.expect("a client break");
            assert_eq!(verdict.first_bad, Some(at.marker));
            assert_eq!((at.rank, at.incarnation), (1, 1));
            (at.marker, at.cseq, at.fault)
        };
        let mut changed = client.clone();
        rewrite(&mut changed[1], |event| {
            let Event::Returned { call, .. } = event else {
                panic!("{event:?}")
            };
            *call = "unlock".into();
        });
        assert_eq!(broken_at(&changed), (3, 2, ClientFault::Altered));
        let mut deleted = client.clone();
        deleted.remove(2);
        assert_eq!(broken_at(&deleted), (5, 3, ClientFault::Missing));
        let mut reordered = client.clone();
        reordered[0].record.seq = 2;
        reordered[1].record.seq = 1;
        assert_eq!(broken_at(&reordered), (3, 1, ClientFault::Altered));
        // a consistent re-chaining of changed rows still differs from what the window names
        let rechained = client_chain(&[
            Event::Store {
                ranges: vec![(0, 16)],
            },
            client[1].record.event.clone(),
            client[2].record.event.clone(),
        ]);
        assert_eq!(broken_at(&rechained), (3, 2, ClientFault::Unnamed));
        let forbidden = client_chain(&[
            Event::Store {
                ranges: vec![(0, 8)],
            },
            Event::Sync,
            client[2].record.event.clone(),
        ]);
        let (forbidden_window, _) = {
            let mut records: Vec<AuditRecord> =
                window.iter().map(|row| row.record.clone()).collect();
            records[2].event = marker(&forbidden, 1, 2);
            records[4].event = marker(&forbidden, 3, 3);
            (stored(&records), ())
        };
        let verdict = verify_history(&forbidden_window, &forbidden);
        assert_eq!(
            verdict.client_break.map(|at| (at.cseq, at.fault)),
            Some((2, ClientFault::NotClientSide))
        );
    }

    #[test]
    fn rows_a_live_client_has_not_stored_yet_are_pending() {
        let (window, client) = with_markers();
        // the client's session attached after the creation; detached at the end or not
        let history = |detached: bool| {
            let mut records: Vec<AuditRecord> =
                window.iter().map(|row| row.record.clone()).collect();
            records.insert(1, record(0, 1, Event::Attach));
            if detached {
                records.push(record(0, 1, Event::Detach));
            }
            for (index, record) in records.iter_mut().enumerate() {
                record.seq = index as u64 + 1;
            }
            stored(&records)
        };
        let live = history(false);
        let verdict = verify_history(&live, &client[..2]);
        assert_eq!(verdict.first_bad, None);
        let span = |from, to| ClientSpan {
            rank: 1,
            incarnation: 1,
            from,
            to,
        };
        assert_eq!(verdict.pending, [span(3, 3)]);
        assert_eq!(verdict.client_events, 2);
        let verdict = verify_history(&live, &client[..1]);
        assert_eq!(
            (verdict.first_bad, verdict.pending),
            (None, vec![span(2, 3)])
        );
        // a hole is no client still writing
        let holed = [client[0].clone(), client[2].clone()];
        let verdict = verify_history(&live, &holed);
        assert_eq!(
            verdict.client_break.map(|at| (at.cseq, at.fault)),
            Some((2, ClientFault::Missing))
        );
        // once the session detached, what its markers name must be there
        let verdict = verify_history(&history(true), &client[..2]);
        assert_eq!(
            verdict
                .client_break
                .map(|at| (at.marker, at.cseq, at.fault)),
            Some((6, 3, ClientFault::Missing))
        );
        assert_eq!(verdict.pending, []);
    }

    #[test]
    fn verify_history_reports_unmarked_rows_and_bad_ranges() {
        let (window, mut client) = with_markers();
        // rows written after the last marker (a client that crashed before shipping it)
        let more = client_chain(&[
            client[0].record.event.clone(),
            client[1].record.event.clone(),
            client[2].record.event.clone(),
            Event::FlushLocal { target: None },
            Event::Store {
                ranges: vec![(8, 16)],
            },
        ]);
        client.extend(more[3..].iter().cloned());
        let verdict = verify_history(&window, &client);
        assert_eq!(verdict.first_bad, None);
        assert_eq!(
            verdict.unmarked,
            [ClientSpan {
                rank: 1,
                incarnation: 1,
                from: 4,
                to: 5
            }]
        );
        // a marker that skips rows
        let mut records: Vec<AuditRecord> = window.iter().map(|row| row.record.clone()).collect();
        records[4].event = marker(&client, 4, 4);
        let verdict = verify_history(&stored(&records), &client);
        assert_eq!(
            verdict
                .client_break
                .map(|at| (at.marker, at.cseq, at.fault)),
            Some((5, 3, ClientFault::Range))
        );
        // a broken window row before any marker: the window's own break, no client detail
        let mut window = window;
        // the body says 6 where the row was written with 5
        window[1].body = Body::encode(&Event::Published {
            offset: 0,
            data: 6i32.to_le_bytes().to_vec(),
        });
        let verdict = verify_history(&window, &client);
        assert_eq!((verdict.first_bad, verdict.client_break), (Some(2), None));
    }

    #[test]
    fn verify_names_the_first_bad_row() {
        let rows = stored(&history());
        assert_eq!(verify(&rows), Ok(()));
        let mut changed = rows.clone();
        rewrite(&mut changed[2], |event| {
            let Event::Op { op, .. } = event else {
                panic!("{event:?}")
            };
            *op = RecordedOp::Accumulate("prod".into());
        });
        assert_eq!(verify(&changed), Err(3));
        let mut deleted = rows.clone();
        deleted.remove(1);
        assert_eq!(verify(&deleted), Err(2));
        let mut reordered = rows.clone();
        reordered.swap(1, 2);
        assert_eq!(verify(&reordered), Err(2));
        let mut rehashed_one = rows;
        rehashed_one[3].record.at_ns += 1;
        assert_eq!(verify(&rehashed_one), Err(4));
    }
}
