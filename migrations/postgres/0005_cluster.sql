-- Cluster mode: several onesided-server nodes over this one database, which alone says who
-- serves what. Ownership changes only inside transactions here; no consensus of our own.

-- Every node that joined, with its lease (by the database's clock, so nodes' clocks may differ).
CREATE TABLE cluster_nodes (
    node_id TEXT PRIMARY KEY,
    -- the address clients and other nodes reach it at
    advertise TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_until TIMESTAMPTZ NOT NULL
);

-- Which node serves each world. `epoch` grows on every change of owner; the owner's audit
-- commits check it (SELECT … FOR SHARE) in the same transaction, so a node that lost the lease
-- commits nothing more for the world. Epoch 0: placed on `node_id`, not yet taken up.
-- `moving_to`: the node an admin's move hands the world to, while its owner drains it.
CREATE TABLE world_owners (
    world TEXT PRIMARY KEY REFERENCES worlds (name) ON DELETE CASCADE,
    node_id TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    lease_until TIMESTAMPTZ NOT NULL,
    moving_to TEXT
);
CREATE INDEX world_owners_node ON world_owners (node_id);

-- Window ids, unique across nodes (a single server counts them in memory; a node joining moves
-- the sequence past every id stored, so a database a single server used before works too).
CREATE SEQUENCE window_ids;
