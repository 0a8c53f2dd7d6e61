-- A cluster owner's audit commit checks, at the moment it commits, that it still holds the
-- leases of the worlds its rows belong to (`world_owners`: node and epoch). The check must not
-- hold a lock on a lease row across a round trip to the node: a node paused (SIGSTOP) or cut
-- off between two statements of its commit would keep every other node's claim of the world
-- waiting on it. So the commit names its leases in a row of `commit_guards`, and a deferred
-- constraint trigger checks them inside COMMIT, in the database: the lease rows are locked
-- (FOR SHARE) only while the commit itself completes, so a claim (an UPDATE of the row that
-- bumps the epoch) either landed before — the commit is refused, nothing stored — or waits for
-- that instant and then reads every row the old owner committed.
--
-- The rows are deleted by the same trigger: the table is empty outside running commits.
CREATE UNLOGGED TABLE commit_guards (
    tx xid8 NOT NULL DEFAULT pg_current_xact_id(),
    node_id TEXT NOT NULL,
    worlds TEXT[] NOT NULL,
    epochs BIGINT[] NOT NULL
);
CREATE INDEX commit_guards_tx ON commit_guards (tx);

CREATE FUNCTION check_commit_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    fenced TEXT[];
BEGIN
    -- the leases still this node's: held until the commit ends (a moment from now)
    PERFORM 1 FROM world_owners
        WHERE node_id = NEW.node_id AND world = ANY (NEW.worlds)
        FOR SHARE;
    -- a new statement: it sees every claim committed before those locks were taken
    SELECT array_agg(DISTINCT h.world ORDER BY h.world) INTO fenced
        FROM unnest(NEW.worlds, NEW.epochs) AS h (world, epoch)
        WHERE NOT EXISTS (
            SELECT 1 FROM world_owners o
            WHERE o.world = h.world AND o.epoch = h.epoch AND o.node_id = NEW.node_id
        );
    IF fenced IS NOT NULL THEN
        -- 'OSFEN': read by the server as "fenced" (audit/store.rs); DETAIL: the worlds, JSON
        RAISE EXCEPTION 'this node no longer holds the lease of %', fenced
            USING ERRCODE = 'OSFEN', DETAIL = array_to_json(fenced)::text;
    END IF;
    DELETE FROM commit_guards WHERE tx = NEW.tx;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER commit_guard AFTER INSERT ON commit_guards
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION check_commit_guard();
