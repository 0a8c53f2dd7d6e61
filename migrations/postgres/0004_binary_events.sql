-- Events are stored as protobuf bytes (onesided.audit.v1.Event, payloads as bytes) in the new
-- column `event`; rows written before keep their canonical JSON in `body`, which the hash chain
-- covers as it was written. Exactly one of the two is set.
ALTER TABLE audit_events
    ALTER COLUMN body DROP NOT NULL,
    ADD COLUMN event BYTEA,
    ADD CONSTRAINT audit_events_one_body CHECK ((body IS NULL) <> (event IS NULL));
-- payloads are incompressible more often than not; keep them out of pglz's way
ALTER TABLE audit_events ALTER COLUMN event SET STORAGE EXTERNAL;

ALTER TABLE client_events
    ALTER COLUMN body DROP NOT NULL,
    ADD COLUMN event BYTEA,
    ADD CONSTRAINT client_events_one_body CHECK ((body IS NULL) <> (event IS NULL));
