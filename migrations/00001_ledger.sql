-- The audit ledger: append-only, hash-chained events and signed checkpoints.
-- Objects are created by the owner role (migrations run with SET ROLE owner);
-- the runtime role, named by the session setting cloison.runtime_role, may
-- INSERT and SELECT, never UPDATE, DELETE or TRUNCATE.

-- +goose Up
CREATE TABLE audit_events (
    seq         bigint      PRIMARY KEY CHECK (seq >= 1),
    occurred_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind        text        NOT NULL,
    tenant      text,
    actor       text        NOT NULL,
    payload     bytea       NOT NULL, -- exact RFC 8785 canonical JSON bytes (bytea: jsonb would normalise them)
    prev_hash   bytea       NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash        bytea       NOT NULL UNIQUE CHECK (octet_length(hash) = 32)
);
CREATE INDEX audit_events_tenant_seq ON audit_events (tenant, seq) WHERE tenant IS NOT NULL;
CREATE INDEX audit_events_kind_seq ON audit_events (kind, seq);

CREATE TABLE audit_checkpoints (
    size       bigint      NOT NULL CHECK (size >= 0),
    key_id     text        NOT NULL,
    head       bytea       NOT NULL CHECK (octet_length(head) = 32),
    signed_at  timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    note       text        NOT NULL, -- the signed text, verbatim
    PRIMARY KEY (size, key_id)
);

-- Append-only: refuse UPDATE, DELETE and TRUNCATE at statement level (so
-- even statements touching no row fail). ENABLE ALWAYS keeps the triggers
-- active under session_replication_role = replica.
-- +goose StatementBegin
CREATE FUNCTION cloison_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'CL001',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END $$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE audit_events ENABLE ALWAYS TRIGGER audit_events_append_only;
CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_append_only;

-- Every inserted batch must extend the committed head: contiguous seqs, each
-- prev_hash the previous hash, each hash the formula of audit.HashEvent:
-- SHA-256('CLOISON-AUDIT-EVENT-V1' || seq as int8 big-endian || prev_hash || SHA-256(payload)).
-- One set-based check per statement, so group commit stays cheap.
-- +goose StatementBegin
CREATE FUNCTION audit_events_check_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    first_seq  bigint;
    first_prev bytea;
    prior      bytea;
    bad        bigint;
BEGIN
    SELECT n.seq, n.prev_hash INTO first_seq, first_prev FROM new_rows n ORDER BY n.seq LIMIT 1;
    IF first_seq IS NULL THEN
        RETURN NULL;
    END IF;
    IF first_seq = 1 THEN
        prior := decode(repeat('00', 32), 'hex');
    ELSE
        SELECT e.hash INTO prior FROM audit_events e WHERE e.seq = first_seq - 1;
    END IF;
    IF prior IS NULL OR prior <> first_prev THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003',
            MESSAGE = format('audit chain: seq %s does not extend the committed head', first_seq);
    END IF;
    SELECT r.seq INTO bad FROM (
        SELECT n.seq, n.prev_hash, n.hash, n.payload,
               lag(n.seq) OVER w AS pseq, lag(n.hash) OVER w AS phash
        FROM new_rows n WINDOW w AS (ORDER BY n.seq)
    ) r
    WHERE (r.pseq IS NOT NULL AND (r.seq <> r.pseq + 1 OR r.prev_hash <> r.phash))
       OR r.hash <> sha256('CLOISON-AUDIT-EVENT-V1'::bytea || int8send(r.seq) || r.prev_hash || sha256(r.payload))
    ORDER BY r.seq LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003',
            MESSAGE = format('audit chain: seq %s has a wrong prev_hash, seq or hash', bad);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_chain AFTER INSERT ON audit_events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audit_events_check_chain();
ALTER TABLE audit_events ENABLE ALWAYS TRIGGER audit_events_chain;

-- audit_head takes the ledger's writer lock (a transaction-scoped advisory
-- lock; advisory locks are per database) and returns the committed head.
-- Every writer, in every process, calls it before computing hashes, so there
-- is one chain whatever the number of writers.
-- +goose StatementBegin
CREATE FUNCTION audit_head(OUT seq bigint, OUT hash bytea) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(-3458794010727121273); -- first 8 bytes of SHA-256('cloison-audit-ledger')
    SELECT e.seq, e.hash INTO seq, hash FROM audit_events e ORDER BY e.seq DESC LIMIT 1;
    IF seq IS NULL THEN
        seq := 0;
        hash := decode(repeat('00', 32), 'hex');
    END IF;
END $$;
-- +goose StatementEnd

-- audit_append inserts one batch (parallel arrays, one element per event).
-- +goose StatementBegin
CREATE FUNCTION audit_append(p_seq bigint[], p_occurred_at timestamptz[], p_kind text[], p_tenant text[],
                             p_actor text[], p_payload bytea[], p_prev_hash bytea[], p_hash bytea[])
RETURNS bigint LANGUAGE sql AS $$
    WITH ins AS (
        INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
        SELECT * FROM unnest(p_seq, p_occurred_at, p_kind, p_tenant, p_actor, p_payload, p_prev_hash, p_hash)
        RETURNING seq
    )
    SELECT max(seq) FROM ins;
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION audit_head() FROM PUBLIC;
REVOKE ALL ON FUNCTION audit_append(bigint[], timestamptz[], text[], text[], text[], bytea[], bytea[], bytea[]) FROM PUBLIC;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT ON audit_events, audit_checkpoints TO %I', rt);
    -- recorded_at is left out: it is always the database's clock_timestamp().
    EXECUTE format('GRANT INSERT (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash) ON audit_events TO %I', rt);
    EXECUTE format('GRANT INSERT (size, key_id, head, signed_at, note) ON audit_checkpoints TO %I', rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_head() TO %I', rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_append(bigint[], timestamptz[], text[], text[], text[], bytea[], bytea[], bytea[]) TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE audit_checkpoints;
DROP TABLE audit_events;
DROP FUNCTION audit_append(bigint[], timestamptz[], text[], text[], text[], bytea[], bytea[], bytea[]);
DROP FUNCTION audit_head();
DROP FUNCTION audit_events_check_chain();
DROP FUNCTION cloison_refuse_change();
