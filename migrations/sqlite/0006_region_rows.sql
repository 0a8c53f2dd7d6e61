-- Recovery reads a dynamic window's log from its ranks' oldest snapshot on, and before it only
-- the rows that attach or detach regions (a snapshot holds bytes, not regions): this partial
-- index finds those without reading the rest of a long log, and costs nothing on other rows.
CREATE INDEX audit_events_regions ON audit_events (window_id, seq)
    WHERE kind IN ('region_attached', 'region_detached');
