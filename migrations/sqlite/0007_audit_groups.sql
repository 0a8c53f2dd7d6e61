-- One row per commit and window instead of one per event (issue 45): a group holds the events
-- of one window that one commit wrote, sequence numbers first_seq..=last_seq without a gap, as
-- a protobuf message (`Entries` in server/src/audit/store/groups.rs):
--     message Entries { repeated Entry entries = 1; }
--     message Entry { uint64 at_ns = 1; uint32 rank = 2; uint64 incarnation = 3;
--                     bytes event = 4;  // onesided.audit.v1.Event, the bytes the hash covers
--                     bytes hash = 5; }
-- The first entry's previous hash is `prev_hash`, each next one's the entry before's `hash`:
-- the window's chain is the same whichever table holds its events. A window's events may lie
-- in both tables (rows written before, large events in the events file, which keep a row of
-- their own); readers merge them by sequence number. Written only when the server is told to
-- (--audit-sqlite-groups); `audit_events` is read as ever.
CREATE TABLE audit_groups (
    window_id INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    -- the last event's timestamp (a window's tail, the log's latest time)
    last_at_ns INTEGER NOT NULL,
    -- 1 when an event attaches or detaches a region (recovery reads those before a snapshot)
    regions INTEGER NOT NULL,
    prev_hash BLOB NOT NULL,
    -- the last event's hash: the window's tail when this is its last group
    last_hash BLOB NOT NULL,
    entries BLOB NOT NULL,
    PRIMARY KEY (window_id, last_seq),
    CHECK (first_seq >= 1 AND first_seq <= last_seq),
    CHECK (regions IN (0, 1))
);
-- the groups that attach or detach regions, without reading the rest of a long log
CREATE INDEX audit_groups_regions ON audit_groups (window_id, last_seq) WHERE regions = 1;
-- no sequence number in two groups (the primary key keeps each in one row of audit_events)
CREATE TRIGGER audit_groups_disjoint BEFORE INSERT ON audit_groups
WHEN EXISTS (
    SELECT 1 FROM audit_groups
    WHERE window_id = NEW.window_id AND last_seq >= NEW.first_seq AND first_seq <= NEW.last_seq
) OR EXISTS (
    SELECT 1 FROM audit_events
    WHERE window_id = NEW.window_id AND seq >= NEW.first_seq AND seq <= NEW.last_seq
)
BEGIN
    SELECT RAISE(ABORT, 'audit_groups: a sequence number is stored already');
END;
