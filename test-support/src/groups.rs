//! An SQLite store's group rows (`audit_groups`, one per commit and window, the default shape
//! since issue 45) as the tests read and tamper with them: the format as migrations 0007 and
//! 0008 of `migrations/sqlite` document it, declared here again rather than taken from the
//! server, so that a test that edits a group edits what the documented format says.

use sqlx::SqliteConnection;

/// The `entries` column: a group's events in sequence order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Entries {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
}

/// One event of a group.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Entry {
    #[prost(uint64, tag = "1")]
    pub at_ns: u64,
    #[prost(uint32, tag = "2")]
    pub rank: u32,
    #[prost(uint64, tag = "3")]
    pub incarnation: u64,
    /// The event as protobuf (empty when it lies in the events file).
    #[prost(bytes = "vec", tag = "4")]
    pub event: Vec<u8>,
    #[prost(bytes = "vec", tag = "5")]
    pub hash: Vec<u8>,
    /// Where the event lies in the events file, when it does.
    #[prost(message, optional, tag = "6")]
    pub in_file: Option<Span>,
}

/// A place in the events file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Span {
    #[prost(uint64, tag = "1")]
    pub at: u64,
    #[prost(uint64, tag = "2")]
    pub len: u64,
}

/// A stored group, decoded.
#[derive(Clone, Debug)]
pub struct Group {
    pub window: i64,
    pub first_seq: i64,
    pub last_seq: i64,
    /// The previous hash of its first event.
    pub prev_hash: Vec<u8>,
    pub entries: Entries,
}

impl Group {
    /// The entry of sequence number `seq` (panics when the group does not hold it).
    pub fn entry(&mut self, seq: i64) -> &mut Entry {
        let index = usize::try_from(seq - self.first_seq).expect("a number the group holds");
        &mut self.entries.entries[index]
    }

    /// The hash before event `seq`'s: the previous entry's, or the group's `prev_hash`.
    pub fn prev_hash_of(&self, seq: i64) -> Vec<u8> {
        match usize::try_from(seq - self.first_seq).expect("a number the group holds") {
            0 => self.prev_hash.clone(),
            index => self.entries.entries[index - 1].hash.clone(),
        }
    }
}

/// The group of `window` holding sequence number `seq`, if one does.
pub async fn group_holding(
    connection: &mut SqliteConnection,
    window: i64,
    seq: i64,
) -> Option<Group> {
    let row: Option<(i64, i64, Vec<u8>, Vec<u8>)> = sqlx::query_as(
        "SELECT first_seq, last_seq, prev_hash, entries FROM audit_groups \
         WHERE window_id = $1 AND first_seq <= $2 AND last_seq >= $2",
    )
    .bind(window)
    .bind(seq)
    .fetch_optional(&mut *connection)
    .await
    .unwrap();
    row.map(|(first_seq, last_seq, prev_hash, entries)| Group {
        window,
        first_seq,
        last_seq,
        prev_hash,
        entries: prost::Message::decode(entries.as_slice()).expect("a readable group"),
    })
}

/// Writes `group` over the stored group of its window whose `last_seq` was `was_last`: its
/// range, previous hash and entries (its `last_hash`, which only the window's tail reads, as
/// it was).
pub async fn store_group(connection: &mut SqliteConnection, was_last: i64, group: &Group) {
    let done = sqlx::query(
        "UPDATE audit_groups SET first_seq = $1, last_seq = $2, prev_hash = $3, entries = $4 \
         WHERE window_id = $5 AND last_seq = $6",
    )
    .bind(group.first_seq)
    .bind(group.last_seq)
    .bind(group.prev_hash.as_slice())
    .bind(prost::Message::encode_to_vec(&group.entries))
    .bind(group.window)
    .bind(was_last)
    .execute(connection)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1, "the group ending at {was_last}");
}

/// Rewrites the event of sequence number `seq` of `window` in an SQLite store, whichever table
/// holds it, as someone editing the store would: its `audit_events` row
/// ([`crate::rewrite_event_sqlite`]) or its entry in a group (decoded, changed by `change`,
/// encoded again), the hashes left as they were.
pub async fn rewrite_stored_event_sqlite(
    connection: &mut SqliteConnection,
    window: i64,
    seq: i64,
    change: impl FnOnce(&mut onesided_core::audit::Event),
) {
    use onesided_core::audit::Body;
    let Some(mut group) = group_holding(connection, window, seq).await else {
        return crate::rewrite_event_sqlite(
            connection,
            "audit_events",
            "window_id = $1 AND seq = $2",
            &[window, seq],
            change,
        )
        .await;
    };
    let entry = group.entry(seq);
    assert!(
        entry.in_file.is_none(),
        "event {seq} lies in the events file"
    );
    let mut event = Body::Binary(entry.event.clone()).decode().unwrap();
    change(&mut event);
    let Body::Binary(bytes) = Body::encode(&event) else {
        unreachable!("new bodies are binary")
    };
    entry.event = bytes;
    let last = group.last_seq;
    store_group(connection, last, &group).await;
}

/// Every event of `window` an SQLite store holds in its rows (`audit_events`) and its groups,
/// as `(seq, body)` in order of sequence number (panics at an event kept in the events file:
/// what reads this reads small events).
pub async fn stored_bodies(
    connection: &mut SqliteConnection,
    window: i64,
) -> Vec<(i64, onesided_core::audit::Body)> {
    use onesided_core::audit::Body;
    let rows: Vec<(i64, Option<String>, Option<Vec<u8>>)> =
        sqlx::query_as("SELECT seq, body, event FROM audit_events WHERE window_id = $1")
            .bind(window)
            .fetch_all(&mut *connection)
            .await
            .unwrap();
    let mut bodies: Vec<(i64, Body)> = rows
        .into_iter()
        .map(|(seq, json, binary)| match (binary, json) {
            (Some(bytes), _) => (seq, Body::Binary(bytes)),
            (None, text) => (seq, Body::Json(text.expect("an event in the events file"))),
        })
        .collect();
    let groups: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT first_seq, entries FROM audit_groups WHERE window_id = $1")
            .bind(window)
            .fetch_all(&mut *connection)
            .await
            .unwrap();
    for (first, entries) in groups {
        let entries: Entries =
            prost::Message::decode(entries.as_slice()).expect("a readable group");
        for (seq, entry) in (first..).zip(entries.entries) {
            assert!(
                entry.in_file.is_none(),
                "event {seq} lies in the events file"
            );
            bodies.push((seq, Body::Binary(entry.event)));
        }
    }
    bodies.sort_by_key(|(seq, _)| *seq);
    bodies
}
