-- The audit log: every epoch event of every window, hash-chained per window.
CREATE TABLE audit_windows (
    window_id INTEGER PRIMARY KEY,
    world TEXT NOT NULL,
    name TEXT NOT NULL
);

CREATE TABLE audit_events (
    window_id INTEGER NOT NULL,
    -- gap-free per window, from 1
    seq INTEGER NOT NULL,
    -- monotonic nanoseconds since the recording server started
    at_ns INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    incarnation INTEGER NOT NULL,
    kind TEXT NOT NULL,
    -- the event as canonical JSON (onesided_core::audit::Event)
    body TEXT NOT NULL,
    prev_hash BLOB NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (window_id, seq)
);
