-- Events are stored as protobuf bytes (onesided.audit.v1.Event, payloads as bytes) in the new
-- column `event`; rows written before keep their canonical JSON in `body`, which the hash chain
-- covers as it was written. Exactly one of the two is set. SQLite cannot drop a NOT NULL
-- constraint in place: both tables are rebuilt with their rows.
CREATE TABLE audit_events_v4 (
    window_id INTEGER NOT NULL,
    -- gap-free per window, from 1
    seq INTEGER NOT NULL,
    -- monotonic nanoseconds since the recording server started
    at_ns INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    incarnation INTEGER NOT NULL,
    kind TEXT NOT NULL,
    -- the event as canonical JSON (rows written before this migration)
    body TEXT,
    -- the event as protobuf (onesided.audit.v1.Event; rows written since)
    event BLOB,
    prev_hash BLOB NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (window_id, seq),
    CHECK ((body IS NULL) <> (event IS NULL))
);
INSERT INTO audit_events_v4
    (window_id, seq, at_ns, rank, incarnation, kind, body, event, prev_hash, hash)
    SELECT window_id, seq, at_ns, rank, incarnation, kind, body, NULL, prev_hash, hash
    FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_v4 RENAME TO audit_events;

CREATE TABLE client_events_v4 (
    window_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    incarnation INTEGER NOT NULL,
    cseq INTEGER NOT NULL,
    -- monotonic nanoseconds since the client's session attached (the client's clock)
    at_ns INTEGER NOT NULL,
    kind TEXT NOT NULL,
    -- the event as canonical JSON (rows written before this migration)
    body TEXT,
    -- the event as protobuf (onesided.audit.v1.Event; rows written since)
    event BLOB,
    prev_hash BLOB NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (window_id, rank, incarnation, cseq),
    CHECK ((body IS NULL) <> (event IS NULL))
);
INSERT INTO client_events_v4
    (window_id, rank, incarnation, cseq, at_ns, kind, body, event, prev_hash, hash)
    SELECT window_id, rank, incarnation, cseq, at_ns, kind, body, NULL, prev_hash, hash
    FROM client_events;
DROP TABLE client_events;
ALTER TABLE client_events_v4 RENAME TO client_events;
