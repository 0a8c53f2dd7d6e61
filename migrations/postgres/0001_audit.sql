-- The audit log: every epoch event of every window, hash-chained per window.
CREATE TABLE audit_windows (
    window_id BIGINT PRIMARY KEY,
    world TEXT NOT NULL,
    name TEXT NOT NULL
);

CREATE TABLE audit_events (
    window_id BIGINT NOT NULL,
    -- gap-free per window, from 1
    seq BIGINT NOT NULL,
    -- monotonic nanoseconds since the recording server started
    at_ns BIGINT NOT NULL,
    rank INTEGER NOT NULL,
    incarnation BIGINT NOT NULL,
    kind TEXT NOT NULL,
    -- the event as canonical JSON (onesided_core::audit::Event)
    body TEXT NOT NULL,
    prev_hash BYTEA NOT NULL,
    hash BYTEA NOT NULL,
    PRIMARY KEY (window_id, seq)
);
