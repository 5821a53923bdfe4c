-- The ledger as an RFC 6962 Merkle tree, so that truncation, rollback and
-- forks are provable to anyone holding a checkpoint: the stored hashes of
-- golang.org/x/mod/sumdb/tlog over the events (leaf n = the canonical
-- payload of seq n+1), and the signed tree heads (C2SP tlog-checkpoint
-- notes). Both tables are append-only like audit_events: the runtime role
-- may INSERT and SELECT, triggers enabled ALWAYS refuse UPDATE, DELETE and
-- TRUNCATE for everyone else. Hashes are computed in Go (audit/postgres);
-- the triggers below make a writer that skips the tree fail closed.

-- +goose Up
CREATE TABLE tlog_hashes (
    index bigint PRIMARY KEY CHECK (index >= 0), -- tlog.StoredHashIndex
    hash  bytea  NOT NULL CHECK (octet_length(hash) = 32)
);

CREATE TABLE tlog_checkpoints (
    size        bigint      PRIMARY KEY CHECK (size >= 1),
    root        bytea       NOT NULL CHECK (octet_length(root) = 32),
    signed_at   timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    note        text        NOT NULL -- the signed note, verbatim
);

CREATE TRIGGER tlog_hashes_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_hashes
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tlog_hashes ENABLE ALWAYS TRIGGER tlog_hashes_append_only;
CREATE TRIGGER tlog_checkpoints_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tlog_checkpoints ENABLE ALWAYS TRIGGER tlog_checkpoints_append_only;

-- Stored hashes are inserted densely: each batch starts right after the
-- committed ones and has no hole.
-- +goose StatementBegin
CREATE FUNCTION tlog_hashes_check_dense() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lo bigint;
    hi bigint;
    n  bigint;
BEGIN
    SELECT min(r.index), max(r.index), count(*) INTO lo, hi, n FROM new_rows r;
    IF lo IS NULL THEN
        RETURN NULL;
    END IF;
    IF hi - lo + 1 <> n OR (lo > 0 AND NOT EXISTS (SELECT 1 FROM tlog_hashes h WHERE h.index = lo - 1)) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003',
            MESSAGE = format('tlog: stored hashes %s..%s leave a hole', lo, hi);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER tlog_hashes_dense AFTER INSERT ON tlog_hashes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tlog_hashes_check_dense();
ALTER TABLE tlog_hashes ENABLE ALWAYS TRIGGER tlog_hashes_dense;

-- Every statement that inserts events must find the tree already holding
-- exactly the stored hashes of the new head: a tree of n leaves has
-- 2n - popcount(n) stored hashes (tlog.StoredHashCount). Writers insert the
-- hashes first, then the events, in one transaction. The trigger's name
-- sorts after audit_events_chain, so a batch that breaks the chain is
-- still reported as such (CL003 from the chain check) first.
-- +goose StatementBegin
CREATE FUNCTION audit_events_check_tlog() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n    bigint;
    want bigint;
BEGIN
    SELECT max(r.seq) INTO n FROM new_rows r;
    IF n IS NULL THEN
        RETURN NULL;
    END IF;
    want := 2 * n - bit_count(n::bit(64));
    IF NOT EXISTS (SELECT 1 FROM tlog_hashes h WHERE h.index = want - 1)
       OR EXISTS (SELECT 1 FROM tlog_hashes h WHERE h.index = want) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL006',
            MESSAGE = format('tlog: events up to seq %s are not exactly covered by the Merkle tree', n);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_tlog AFTER INSERT ON audit_events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audit_events_check_tlog();
ALTER TABLE audit_events ENABLE ALWAYS TRIGGER audit_events_tlog;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT ON tlog_hashes TO %I', rt);
    EXECUTE format('GRANT SELECT ON tlog_checkpoints TO %I', rt);
    EXECUTE format('GRANT INSERT (size, root, signed_at, note) ON tlog_checkpoints TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER audit_events_tlog ON audit_events;
DROP FUNCTION audit_events_check_tlog();
DROP TABLE tlog_checkpoints;
DROP TABLE tlog_hashes;
DROP FUNCTION tlog_hashes_check_dense();
