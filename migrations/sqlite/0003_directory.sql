-- The directory survives restarts: worlds with their rank tokens (SHA-256 only), window
-- shapes, and per-rank snapshots of public copies (the latest one; recovery replays the log
-- after it).
CREATE TABLE worlds (
    name TEXT PRIMARY KEY,
    nranks INTEGER NOT NULL
);

CREATE TABLE world_tokens (
    token_sha256 BLOB PRIMARY KEY,
    world TEXT NOT NULL REFERENCES worlds (name) ON DELETE CASCADE,
    rank INTEGER NOT NULL
);

CREATE TABLE window_specs (
    window_id INTEGER PRIMARY KEY,
    world TEXT NOT NULL,
    name TEXT NOT NULL,
    -- {"flavor": …, "sizes": […], "disp_units": […], "info": {key: value}}
    spec TEXT NOT NULL,
    freed INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE snapshots (
    window_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    -- the public copy after every event of the window with a sequence number up to this
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (window_id, rank)
);
