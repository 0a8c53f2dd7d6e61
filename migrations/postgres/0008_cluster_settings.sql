-- What every node of a cluster must agree on. `admin_token_sha256`: the SHA-256 of the admin
-- token (with a domain prefix, `crate::cluster`), set by the first node to join while no other
-- is live; a node started with another token refuses to start, so one token reads and changes
-- every world whichever node serves it.
CREATE TABLE cluster_settings (
    name TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
