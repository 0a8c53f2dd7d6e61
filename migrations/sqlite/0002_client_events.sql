-- Events a client persisted itself (local loads and stores, returns of blocking calls,
-- flush_local) instead of shipping them over its session. Each (window, rank, incarnation) is
-- one hash chain from the zero hash, cseq gap-free from 1; a `client_events` marker in the
-- window's chain (audit_events) names each range and the hash of its last row.
CREATE TABLE client_events (
    window_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    incarnation INTEGER NOT NULL,
    cseq INTEGER NOT NULL,
    -- monotonic nanoseconds since the client's session attached (the client's clock)
    at_ns INTEGER NOT NULL,
    kind TEXT NOT NULL,
    -- the event as canonical JSON (onesided_core::audit::Event)
    body TEXT NOT NULL,
    prev_hash BLOB NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (window_id, rank, incarnation, cseq)
);
