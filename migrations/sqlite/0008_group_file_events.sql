-- A group's events kept in the events file (issue 45): an event of the store's threshold or
-- more (FILE_EVENT_BYTES, 128 KiB) may be an entry of its commit's group that says where its
-- bytes lie in the events file (`Entry.in_file`, field 6, `message Span { uint64 at = 1;
-- uint64 len = 2; }`; `event` is empty then), instead of a row of its own in `audit_events`
-- that cut the group in two: a commit writes one group per window. A server of schema
-- version 7 would read such an entry as an empty event, so the version moves and it refuses
-- the store. `file_end` is where the last event the group keeps in the file ends there (NULL:
-- none), so that the file's appender, at start-up, never writes over bytes a group points at.
ALTER TABLE audit_groups ADD COLUMN file_end INTEGER CHECK (file_end IS NULL OR file_end >= 0);
-- where the events file ends, at start-up, without reading the table
CREATE INDEX audit_groups_in_file ON audit_groups (file_end) WHERE file_end IS NOT NULL;
