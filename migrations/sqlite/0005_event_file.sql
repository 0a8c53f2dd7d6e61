-- Large events are written once, outside the write-ahead log: an event whose protobuf bytes
-- reach the store's threshold is appended to the file beside the database (`audit.db-events`
-- for `audit.db`) and the row keeps where (`event_at`, byte offset) and how long
-- (`event_len`). In the log its bytes would be written twice: into the WAL, then by the
-- checkpoint into the database. The hash chain covers the event's bytes wherever they lie.
-- Exactly one of `body`, `event` and `event_len` is set. SQLite cannot change a CHECK in
-- place: the table is rebuilt with its rows.
CREATE TABLE audit_events_v5 (
    window_id INTEGER NOT NULL,
    -- gap-free per window, from 1
    seq INTEGER NOT NULL,
    -- monotonic nanoseconds since the recording server started
    at_ns INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    incarnation INTEGER NOT NULL,
    kind TEXT NOT NULL,
    -- the event as canonical JSON (rows written before schema version 4)
    body TEXT,
    -- the event as protobuf (onesided.audit.v1.Event; rows written since)
    event BLOB,
    prev_hash BLOB NOT NULL,
    hash BLOB NOT NULL,
    -- the event as protobuf in the events file: its offset and length (large events, since
    -- schema version 5)
    event_at INTEGER,
    event_len INTEGER,
    PRIMARY KEY (window_id, seq),
    CHECK ((body IS NOT NULL) + (event IS NOT NULL) + (event_len IS NOT NULL) = 1),
    CHECK ((event_at IS NULL) = (event_len IS NULL)),
    CHECK (event_at IS NULL OR (event_at >= 0 AND event_len >= 0))
);
INSERT INTO audit_events_v5
    (window_id, seq, at_ns, rank, incarnation, kind, body, event, prev_hash, hash)
    SELECT window_id, seq, at_ns, rank, incarnation, kind, body, event, prev_hash, hash
    FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_v5 RENAME TO audit_events;
-- where the events file ends, at start-up, without reading the table
CREATE INDEX audit_events_in_file ON audit_events (event_at) WHERE event_at IS NOT NULL;
