-- The columns SQLite stores use for events kept in a file beside the database (`event_at`,
-- `event_len`; migrations/sqlite/0005_event_file.sql). A PostgreSQL store is shared by the
-- nodes of a cluster and keeps every event in its rows: they stay NULL here, and the
-- constraint `audit_events_one_body` keeps requiring `body` or `event`. Added so that the
-- readers' SQL is the same for both stores.
ALTER TABLE audit_events
    ADD COLUMN event_at BIGINT,
    ADD COLUMN event_len BIGINT;
