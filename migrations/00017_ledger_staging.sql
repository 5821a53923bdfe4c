-- Ledger throughput: durable staging split from sequencing
-- (the design of Trillian Tessera and CT logs).
--
-- Before this migration every append batch ran audit_sequence (00012) under
-- the one ledger lock, held through its commit's WAL flush: the commits of
-- all writers in the cluster were serial. Now a request's events are
-- inserted into audit_staging, with no global lock: concurrent commits
-- share WAL flushes (PostgreSQL's group commit), and an event is
-- acknowledged once its staging commit is durable. One integrator per
-- database (the holder of the session advisory lock audit/postgres takes,
-- any node, taken over when its connection ends) calls audit_integrate,
-- which in one transaction deletes up to p_max staged rows (oldest id
-- first) and sequences them with audit_sequence: chain, Merkle tree and
-- every trigger of 00001 and 00005 as before. A crash before the commit
-- leaves the rows staged; after it they are sequenced and gone from
-- staging: integration is idempotent, and no row is lost or doubled.
--
-- A staged row is under no hash until it is integrated: the store
-- integrates within Config.IntegrationBound (1 s), and Verify reports a row
-- staged longer than that as a failure (the window in which an owner could
-- delete it unseen is bounded and watched). The runtime role may only
-- INSERT into audit_staging (staged_at is set by the database, not the
-- writer) and SELECT it; the rows leave only through audit_integrate
-- (SECURITY DEFINER), whose DELETE the trigger admits.

-- +goose Up
CREATE TABLE audit_staging (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    staged_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    occurred_at timestamptz NOT NULL,
    kind        text        NOT NULL,
    tenant      text,
    actor       text        NOT NULL,
    payload     bytea       NOT NULL
);

-- Which staged ids each integration placed, in seq order from first_seq:
-- how a writer waiting for its event's position finds it (one row per
-- batch, not per event; by id, which only grows, so that a ledger
-- truncated behind the triggers, whose first_seqs repeat, still resolves).
-- Append-only; not under a hash (the events are).
CREATE TABLE audit_integrations (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    first_seq     bigint      NOT NULL CHECK (first_seq >= 1),
    staged_ids    bigint[]    NOT NULL,
    integrated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TRIGGER audit_integrations_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_integrations
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE audit_integrations ENABLE ALWAYS TRIGGER audit_integrations_append_only;

-- +goose StatementBegin
CREATE FUNCTION audit_staging_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('cloison.integrating', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'CL001',
        MESSAGE = format('%s is append-only: staged rows leave only through audit_integrate', TG_TABLE_NAME);
END $$;
-- +goose StatementEnd
CREATE TRIGGER audit_staging_guard BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_staging
    FOR EACH STATEMENT EXECUTE FUNCTION audit_staging_guard();
ALTER TABLE audit_staging ENABLE ALWAYS TRIGGER audit_staging_guard;

-- audit_integrate sequences up to p_max staged rows, oldest id first, in
-- the caller's transaction (commit it to make the move durable) and
-- returns the first seq it placed, how many (0: nothing staged) and the
-- last event's hash (the new head). It
-- checks for staged rows before taking the ledger lock, so an idle
-- integrator does not contend with the register's writers.
-- +goose StatementBegin
CREATE FUNCTION audit_integrate(p_max integer, OUT first_seq bigint, OUT n integer, OUT last_hash bytea)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    ids      bigint[];
    occurred timestamptz[];
    kinds    text[];
    tenants  text[];
    actors   text[];
    payloads bytea[];
BEGIN
    n := 0;
    IF NOT EXISTS (SELECT 1 FROM audit_staging) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(-3458794010727121273); -- audit_head()'s lock
    PERFORM set_config('cloison.integrating', 'on', true);
    WITH d AS (
        DELETE FROM audit_staging WHERE id IN (SELECT s.id FROM audit_staging s ORDER BY s.id LIMIT p_max)
        RETURNING id, occurred_at, kind, tenant, actor, payload
    )
    SELECT array_agg(d.id ORDER BY d.id), array_agg(d.occurred_at ORDER BY d.id), array_agg(d.kind ORDER BY d.id),
           array_agg(d.tenant ORDER BY d.id), array_agg(d.actor ORDER BY d.id), array_agg(d.payload ORDER BY d.id)
        INTO ids, occurred, kinds, tenants, actors, payloads FROM d;
    PERFORM set_config('cloison.integrating', 'off', true);
    IF ids IS NULL THEN
        RETURN;
    END IF;
    SELECT q.first_seq, q.last_hash INTO first_seq, last_hash FROM audit_sequence(occurred, kinds, tenants, actors, payloads) q;
    INSERT INTO audit_integrations (first_seq, staged_ids) VALUES (first_seq, ids);
    n := cardinality(ids);
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION audit_integrate(integer) FROM PUBLIC;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT (occurred_at, kind, tenant, actor, payload) ON audit_staging TO %I', rt);
    EXECUTE format('GRANT SELECT ON audit_integrations TO %I', rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_integrate(integer) TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION audit_integrate(integer);
DROP TABLE audit_integrations;
DROP TABLE audit_staging;
DROP FUNCTION audit_staging_guard();
