//! The group rows of an SQLite store (`audit_groups`, schema version 7): one row per commit
//! and window holding that commit's events of the window, each in the existing binary
//! encoding, instead of one `audit_events` row per event.
//!
//! Owns: which of a commit's rows go into a group (`split`: a window's events of one commit
//! in a run of consecutive sequence numbers, one group per window and commit; an event kept in
//! the events file is an entry that says where its bytes lie, schema version 8), the group's
//! bytes (`Entries`, protobuf declared with prost's derives) and a group read back as the rows
//! it holds (`expand`), an unreadable group as unreadable rows, never dropped. Must not:
//! number, hash or encode events (the writer hands the rows ready; a group keeps each row's
//! encoded event and hash as they came), insert or select (`commit` and `log` do), read the
//! events file (`log` does, for the entries that point into it), or verify a chain (core
//! does).
//!
//! Why (issue 45, BENCHMARKS.md "One row per commit and window"): a `sync` commit of the hot
//! counter carried five rows per operation, and SQLite's cost per row (a B-tree insert, its
//! index entry, the row's binding and copy to SQLite's thread) bounded the commits, not the
//! disk. A group is one row whatever it holds.

use onesided_core::audit::{AuditRecord, Body, Event, StoredRow};

use super::NewRow;

/// The `entries` column: every event of a group, in sequence order (the first has the
/// group's `first_seq`, each next one the next number).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Entries {
    /// The events.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
}

/// One event of a group: what its `audit_events` row would hold but its window and sequence
/// number (the group's) and its previous hash (the group's `prev_hash` for the first, the
/// previous entry's `hash` for the others).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Entry {
    /// Monotonic nanoseconds since the recording server started.
    #[prost(uint64, tag = "1")]
    pub at_ns: u64,
    /// Where it happened.
    #[prost(uint32, tag = "2")]
    pub rank: u32,
    /// The session's incarnation (0 for target-side events).
    #[prost(uint64, tag = "3")]
    pub incarnation: u64,
    /// The event as protobuf (`onesided.audit.v1.Event`), the bytes its hash covers.
    #[prost(bytes = "vec", tag = "4")]
    pub event: Vec<u8>,
    /// Its hash (`chain_hash`).
    #[prost(bytes = "vec", tag = "5")]
    pub hash: Vec<u8>,
    /// Where the event's bytes lie in the events file when they lie there (`event` is empty
    /// then): an event of `FILE_EVENT_BYTES` or more, as an `audit_events` row's `event_at`
    /// and `event_len` say it (schema version 8).
    #[prost(message, optional, tag = "6")]
    pub in_file: Option<Span>,
}

/// A place in the events file.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Span {
    /// The byte offset.
    #[prost(uint64, tag = "1")]
    pub at: u64,
    /// The length in bytes.
    #[prost(uint64, tag = "2")]
    pub len: u64,
}

/// [`Entries`] with only what start-up needs of each entry (its rank and incarnation): the
/// events' bytes are skipped, not copied.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Heads {
    /// The events' heads.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Head>,
}

/// [`Entry`]'s rank and incarnation.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Head {
    /// Where it happened.
    #[prost(uint32, tag = "2")]
    pub rank: u32,
    /// The session's incarnation.
    #[prost(uint64, tag = "3")]
    pub incarnation: u64,
}

/// One row of `audit_groups`, ready to bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct GroupRow {
    pub window: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub last_at_ns: u64,
    /// Whether it holds a `region_attached` or `region_detached` event (the partial index
    /// recovery reads them by).
    pub regions: bool,
    pub prev_hash: [u8; 32],
    pub last_hash: [u8; 32],
    /// [`Entries`], encoded.
    pub entries: Vec<u8>,
    /// Where the last event it keeps in the events file ends there (`None`: it keeps none),
    /// so that the file's appender never writes over bytes a group points at.
    pub file_end: Option<i64>,
}

/// A row of a commit that stays a row of its own in `audit_events`, and where its event lies
/// in the events file (`None`: in the row).
pub(super) type Single<'a> = (&'a NewRow, Option<(i64, i64)>);

/// `rows` (one commit's, in the order the writer numbered them) as the rows of `audit_events`
/// and of `audit_groups` they are stored as: an event stored as JSON stays a row of its own;
/// every other one goes into its window's group, one group per run of consecutive sequence
/// numbers of one window (the writer numbers a window's events of one commit without a gap,
/// so one group per window). An event in the events file (`placed[i]`, `placed` empty when
/// none is) is an entry of the group that says where its bytes lie: before schema version 8
/// it stayed a row of its own and cut the group in two, so a bulk put's commit, its large
/// puts between small events, wrote a group per small event and a transaction around them
/// (issue 45: 0.84× the rows' `sync` bulk put).
pub(super) fn split<'a>(
    rows: &'a [NewRow],
    placed: &[Option<(i64, i64)>],
) -> (Vec<Single<'a>>, Vec<GroupRow>) {
    let mut singles = Vec::new();
    // per group: its rows, in order, each with where its event lies in the events file
    let mut runs: Vec<Vec<Single<'a>>> = Vec::new();
    // per window: the run its next row may extend
    let mut open: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for (index, row) in rows.iter().enumerate() {
        let in_file = placed.get(index).copied().flatten();
        let window = row.record.window;
        if !matches!(row.body, Body::Binary(_)) {
            singles.push((row, in_file));
            open.remove(&window);
            continue;
        }
        let extends = open.get(&window).copied().filter(|&run| {
            runs[run]
                .last()
                .is_some_and(|(last, _)| last.record.seq.checked_add(1) == Some(row.record.seq))
        });
        match extends {
            Some(run) => runs[run].push((row, in_file)),
            None => {
                open.insert(window, runs.len());
                runs.push(vec![(row, in_file)]);
            }
        }
    }
    let groups = runs.into_iter().filter_map(|run| group_of(&run)).collect();
    (singles, groups)
}

/// The group row of `run` (consecutive rows of one window, every body binary, each with
/// where its event lies in the events file, if it does).
fn group_of(run: &[Single<'_>]) -> Option<GroupRow> {
    let (first, last) = (run.first()?.0, run.last()?.0);
    let entries = Entries {
        entries: run
            .iter()
            .map(|(row, in_file)| Entry {
                at_ns: row.record.at_ns,
                rank: row.record.rank,
                incarnation: row.record.incarnation,
                event: match (&row.body, in_file) {
                    (_, Some(_)) => Vec::new(),
                    (Body::Binary(bytes), None) => bytes.clone(),
                    (Body::Json(text), None) => text.clone().into_bytes(),
                },
                hash: row.hash.to_vec(),
                in_file: in_file.map(|(at, len)| Span {
                    at: at as u64,
                    len: len as u64,
                }),
            })
            .collect(),
    };
    Some(GroupRow {
        window: first.record.window,
        first_seq: first.record.seq,
        last_seq: last.record.seq,
        last_at_ns: last.record.at_ns,
        regions: run.iter().any(|(row, _)| is_region(&row.record.event)),
        prev_hash: first.prev_hash,
        last_hash: last.hash,
        entries: prost::Message::encode_to_vec(&entries),
        file_end: run
            .iter()
            .filter_map(|(_, in_file)| in_file.map(|(at, len)| at + len))
            .max(),
    })
}

/// Whether `event` attaches or detaches a region of a dynamic window.
pub(super) fn is_region(event: &Event) -> bool {
    matches!(
        event,
        Event::RegionAttached { .. } | Event::RegionDetached { .. }
    )
}

/// A row of a group as [`expand`] reads it, and where its event lies in the events file when
/// it lies there: the row then has no event yet (what reads the file gives it one,
/// [`with_event`]).
pub(super) type Expanded = (StoredRow, Option<(i64, i64)>);

/// The rows a stored group of `window` holds, sequence numbers `first_seq..=last_seq`: each
/// as its own `audit_events` row would read, an event in the events file still to be read
/// (see [`Expanded`]). A group whose bytes cannot be read, or hold another count of events
/// than its range, reads as that many unreadable rows (verification fails at the first,
/// naming it), never as none.
pub(super) fn expand(
    window: u64,
    first_seq: u64,
    last_seq: u64,
    prev_hash: &[u8],
    entries: &[u8],
) -> Vec<Expanded> {
    let count = last_seq.saturating_sub(first_seq).saturating_add(1);
    let decoded = <Entries as prost::Message>::decode(entries)
        .map_err(|error| {
            format!("the group of events {first_seq}..={last_seq} cannot be read: {error}")
        })
        .and_then(|decoded| {
            if decoded.entries.len() as u64 == count {
                Ok(decoded.entries)
            } else {
                Err(format!(
                    "the group of events {first_seq}..={last_seq} holds {} events",
                    decoded.entries.len()
                ))
            }
        });
    let entries = match decoded {
        Ok(entries) => entries,
        Err(why) => {
            return (first_seq..=last_seq)
                .map(|seq| {
                    let row = StoredRow {
                        record: record(window, seq, 0, 0, 0, Event::Detach),
                        unreadable: Some(why.clone()),
                        body: Body::Binary(Vec::new()),
                        prev_hash: Vec::new(),
                        hash: Vec::new(),
                    };
                    (row, None)
                })
                .collect();
        }
    };
    let mut previous = prev_hash.to_vec();
    (first_seq..)
        .zip(entries)
        .map(|(seq, entry)| {
            let in_file = entry.in_file.map(|span| (span.at as i64, span.len as i64));
            let body = Body::Binary(entry.event);
            let (event, unreadable) = match (in_file, body.decode()) {
                (Some(_), _) => (Event::Detach, Some(NOT_READ.to_string())),
                (None, Ok(event)) => (event, None),
                (None, Err(error)) => (Event::Detach, Some(error.message)),
            };
            let prev_hash = std::mem::replace(&mut previous, entry.hash.clone());
            let row = StoredRow {
                record: record(
                    window,
                    seq,
                    entry.at_ns,
                    entry.rank,
                    entry.incarnation,
                    event,
                ),
                unreadable,
                body,
                prev_hash,
                hash: entry.hash,
            };
            (row, in_file)
        })
        .collect()
}

/// What a row of a group whose event lies in the events file says until it is read.
const NOT_READ: &str = "the event in the events file was not read";

/// `row`, whose event lies in the events file, with its bytes as read from there (or why they
/// cannot be: no bytes then, and its hash fails, as a row's whose file fails).
pub(super) fn with_event(mut row: StoredRow, read: Result<Vec<u8>, String>) -> StoredRow {
    match read {
        Ok(bytes) => {
            row.body = Body::Binary(bytes);
            (row.record.event, row.unreadable) = match row.body.decode() {
                Ok(event) => (event, None),
                Err(error) => (Event::Detach, Some(error.message)),
            };
        }
        Err(why) => {
            row.body = Body::Binary(Vec::new());
            row.record.event = Event::Detach;
            row.unreadable = Some(why);
        }
    }
    row
}

fn record(
    window: u64,
    seq: u64,
    at_ns: u64,
    rank: u32,
    incarnation: u64,
    event: Event,
) -> AuditRecord {
    AuditRecord {
        window,
        seq,
        at_ns,
        rank,
        incarnation,
        cseq: None,
        event,
    }
}

/// The `(rank, incarnation)` of every event of a stored group (`None` when its bytes cannot
/// be read).
pub(super) fn heads(entries: &[u8]) -> Option<Vec<(u32, u64)>> {
    let heads = <Heads as prost::Message>::decode(entries).ok()?;
    Some(
        heads
            .entries
            .into_iter()
            .map(|head| (head.rank, head.incarnation))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use onesided_core::audit::{verify, GENESIS};

    use super::super::tests::{chained, chained_events};
    use super::super::AuditStore;

    /// The rows [`expand`] reads when no event lies in the events file.
    fn read_back(
        window: u64,
        first_seq: u64,
        last_seq: u64,
        prev_hash: &[u8],
        entries: &[u8],
    ) -> Vec<StoredRow> {
        expand(window, first_seq, last_seq, prev_hash, entries)
            .into_iter()
            .map(|(row, in_file)| {
                assert_eq!(in_file, None);
                row
            })
            .collect()
    }

    /// A commit's rows of two windows, interleaved, become one group per window, and each group
    /// reads back as exactly the rows it was made of, hashes and all.
    #[test]
    fn interleaved_windows_split_into_one_group_each_and_read_back_row_for_row() {
        let one = chained(1, 1..=5, GENESIS);
        let two = chained(2, 7..=9, [3; 32]);
        let mut rows = Vec::new();
        for (index, row) in one.iter().enumerate() {
            rows.push(row.clone());
            if let Some(row) = two.get(index) {
                rows.push(row.clone());
            }
        }
        let (singles, groups) = split(&rows, &[]);
        assert!(singles.is_empty());
        assert_eq!(groups.len(), 2);
        for (group, expected) in groups.iter().zip([&one, &two]) {
            let back = read_back(
                group.window,
                group.first_seq,
                group.last_seq,
                &group.prev_hash,
                &group.entries,
            );
            assert_eq!(back.len(), expected.len());
            for (read, row) in back.iter().zip(expected.iter()) {
                assert_eq!(read.record, row.record);
                assert_eq!(read.body, row.body);
                assert_eq!(read.prev_hash, row.prev_hash);
                assert_eq!(read.hash, row.hash);
                assert_eq!(read.unreadable, None);
            }
            assert_eq!(group.last_hash, expected.last().unwrap().hash);
        }
        let first = read_back(1, 1, 5, &groups[0].prev_hash, &groups[0].entries);
        assert_eq!(verify(&first), Ok(()));
    }

    /// An event kept in the events file is an entry of its window's one group that says where
    /// its bytes lie (no row of its own, no second group): read back, it is that place, and
    /// once its bytes are given it reads as its row did, hash and all; the group knows where
    /// the last of its events in the file ends.
    #[test]
    fn an_event_in_the_events_file_is_an_entry_of_the_one_group_that_points_at_it() {
        let rows = chained(1, 1..=5, GENESIS);
        let placed = vec![None, Some((4096, 7)), None, Some((0, 10)), None];
        let (singles, groups) = split(&rows, &placed);
        assert!(singles.is_empty());
        let ranges: Vec<(u64, u64)> = groups.iter().map(|g| (g.first_seq, g.last_seq)).collect();
        assert_eq!(ranges, vec![(1, 5)]);
        assert_eq!(groups[0].file_end, Some(4103));
        let back = expand(1, 1, 5, &groups[0].prev_hash, &groups[0].entries);
        let spans: Vec<Option<(i64, i64)>> = back.iter().map(|(_, span)| *span).collect();
        assert_eq!(spans, placed);
        let rows_back: Vec<StoredRow> = back
            .into_iter()
            .zip(&rows)
            .map(|((row, span), written)| match span {
                // the bytes the file holds for it
                Some(_) => {
                    let Body::Binary(bytes) = &written.body else {
                        unreachable!("new rows are binary")
                    };
                    assert!(row.unreadable.is_some(), "read before its bytes were");
                    with_event(row, Ok(bytes.clone()))
                }
                None => row,
            })
            .collect();
        for (read, written) in rows_back.iter().zip(&rows) {
            assert_eq!(read.record, written.record);
            assert_eq!(read.body, written.body);
            assert_eq!(read.unreadable, None);
        }
        assert_eq!(verify(&rows_back), Ok(()));
        // bytes the file cannot give: unreadable at that row, verification fails there
        let mut lost = rows_back.clone();
        lost[3] = with_event(lost[3].clone(), Err("gone".into()));
        assert_eq!(lost[3].unreadable.as_deref(), Some("gone"));
        assert_eq!(verify(&lost), Err(4));
        let (_, none_in_file) = split(&rows, &[]);
        assert_eq!(none_in_file[0].file_end, None);
    }

    /// A group whose bytes were cut, or that holds fewer events than its range says, reads as
    /// unreadable rows over its whole range: none dropped, verification fails at the first.
    #[test]
    fn a_damaged_group_reads_as_unreadable_rows_over_its_range() {
        let rows = chained(1, 1..=4, GENESIS);
        let (_, groups) = split(&rows, &[]);
        let group = &groups[0];
        let cut = &group.entries[..group.entries.len() - 3];
        for entries in [cut, group.entries.as_slice()] {
            // the intact bytes under a range one longer: a count that does not match
            let last = if entries.len() == group.entries.len() {
                5
            } else {
                4
            };
            let back = read_back(1, 1, last, &group.prev_hash, entries);
            assert_eq!(back.len() as u64, last);
            assert!(back.iter().all(|row| row.unreadable.is_some()));
            assert!(verify(&back).is_err());
        }
    }

    /// A changed event in a group fails verification at its own sequence number, as a changed
    /// row does.
    #[test]
    fn a_changed_event_in_a_group_fails_verification_at_its_row() {
        let rows = chained_events(1, 1, (0..4).map(|origin| Event::Flush { origin }), GENESIS);
        let (_, groups) = split(&rows, &[]);
        let mut entries: Entries = prost::Message::decode(groups[0].entries.as_slice()).unwrap();
        entries.entries[2].rank += 1;
        let changed = prost::Message::encode_to_vec(&entries);
        let back = read_back(1, 1, 4, &groups[0].prev_hash, &changed);
        assert_eq!(verify(&back), Err(3));
    }

    /// A varied log of three windows (one created, one dynamic with regions attached and
    /// detached, large events for the events file, one in a commit with a region's detach, so
    /// that region reads pass over it), in commits of every size, after `per_event` commits
    /// written one row per event and the rest as `rows` says.
    fn varied_commits() -> Vec<Vec<Event>> {
        let created = Event::WindowCreated {
            world: "w".into(),
            name: "x".into(),
            sizes: vec![8, 8],
            disp_units: vec![1, 1],
            info: Default::default(),
            unified: false,
        };
        let region = |base| Event::RegionAttached { base, size: 8 };
        let detached = |base| Event::RegionDetached { base, size: 8 };
        let large = Event::Published {
            offset: 0,
            data: vec![7; super::super::FILE_EVENT_BYTES + 1],
        };
        let flush = |origin| Event::Flush { origin };
        vec![
            vec![created],
            vec![flush(0)],
            vec![flush(1), region(64), flush(2)],
            (0..40).map(flush).collect(),
            vec![flush(3), large.clone(), flush(4), flush(5)],
            vec![detached(64), large, flush(6)],
            (0..7).map(flush).collect(),
        ]
    }

    /// Commits [`varied_commits`] into a new SQLite store in `dir`: each commit's events go
    /// to windows 1, 2 and 3 in turn (one window per commit, and every third commit to all
    /// three), the first `per_event` commits one row per event, the rest as `rows` says.
    async fn written(
        dir: &std::path::Path,
        per_event: usize,
        rows: super::super::Rows,
    ) -> AuditStore {
        use super::super::{Committer, Rows};
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let mut tails: std::collections::HashMap<u64, (u64, [u8; 32])> = Default::default();
        let mut store = AuditStore::open(None, dir).await.unwrap();
        for (index, events) in varied_commits().into_iter().enumerate() {
            let shape = if index < per_event {
                Rows::PerEvent
            } else {
                rows
            };
            store = store.writing(shape);
            let windows: Vec<u64> = if index % 3 == 0 {
                vec![1, 2, 3]
            } else {
                vec![index as u64 % 3 + 1]
            };
            let mut batch = Vec::new();
            for (at, event) in events.iter().enumerate() {
                for &window in &windows {
                    let (seq, previous) = tails.get(&window).copied().unwrap_or((0, GENESIS));
                    let mut row =
                        chained_events(window, seq + 1, [event.clone()], previous).remove(0);
                    row.record.at_ns = (index * 100 + at) as u64;
                    row.record.incarnation = (index % 4) as u64;
                    row.hash = onesided_core::audit::chain_hash(&previous, &row.record, &row.body);
                    tails.insert(window, (seq + 1, row.hash));
                    batch.push(row);
                }
            }
            Committer::new(store.clone())
                .insert(&batch, &[])
                .await
                .unwrap();
        }
        store
    }

    /// Everything the log's readers ask of the store about windows 1 to 3.
    async fn read(store: &AuditStore) -> String {
        let mut read = format!(
            "{:?} {:?} {:?} {:?}",
            store.windows().await.unwrap(),
            store.incarnations().await.unwrap(),
            store.last_at_ns().await.unwrap(),
            store.max_window_id().await.unwrap(),
        );
        for window in 1..=3 {
            let all = store.rows(window, 1).await.unwrap();
            assert_eq!(verify(&all), Ok(()), "window {window}");
            read.push_str(&format!(
                "{:?} {all:?}",
                store.tail_at(window).await.unwrap()
            ));
            for seq in [0, 2, 5, 30, 60, 61, 200] {
                read.push_str(&format!(
                    "{:?} {:?}",
                    store.rows(window, seq).await.unwrap(),
                    store.region_rows(window, seq).await.unwrap()
                ));
            }
        }
        read
    }

    /// The same commits read the same from a store written one row per event, one written in
    /// groups, and one written per event first and in groups after (a store of the previous
    /// release written on): every read of the log, row for row, hashes and all.
    #[tokio::test]
    async fn a_log_reads_the_same_written_per_event_in_groups_or_both() {
        use super::super::Rows;
        let base = std::env::temp_dir().join(format!("onesided-shapes-{}", std::process::id()));
        let per_event = written(&base.join("rows"), usize::MAX, Rows::PerEvent).await;
        let expected = read(&per_event).await;
        assert!(expected.contains("RegionAttached") && expected.contains("RegionDetached"));
        for (name, first) in [("groups", 0), ("both", 3)] {
            let store = written(&base.join(name), first, Rows::Groups).await;
            let (groups, singles, in_file): (i64, i64, i64) = store
                .sqlite_row(
                    "SELECT (SELECT COUNT(*) FROM audit_groups), \
                     (SELECT COUNT(*) FROM audit_events), \
                     (SELECT COUNT(*) FROM audit_groups WHERE file_end IS NOT NULL)",
                )
                .await;
            // written in groups only, the large events too (by where they lie in the events
            // file); written both ways, in both tables, so that the comparison cannot pass with
            // everything in one table
            if first == 0 {
                assert!(
                    groups > 0 && singles == 0 && in_file > 0,
                    "{name}: {groups} groups ({in_file} pointing into the events file), \
                     {singles} rows"
                );
            } else {
                assert!(
                    groups > 0 && singles > 0,
                    "{name}: {groups} groups, {singles} rows"
                );
            }
            assert_eq!(read(&store).await, expected, "{name}");
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The heads of a group are its events' ranks and incarnations, in order.
    #[test]
    fn heads_are_each_events_rank_and_incarnation() {
        let rows = chained(4, 1..=3, GENESIS);
        let (_, groups) = split(&rows, &[]);
        let expected: Vec<(u32, u64)> = rows
            .iter()
            .map(|row| (row.record.rank, row.record.incarnation))
            .collect();
        assert_eq!(heads(&groups[0].entries), Some(expected));
    }
}
