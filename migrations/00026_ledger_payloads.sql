-- Payloads are what their columns say: audit_sequence and the staging
-- table refuse what is not a ledger envelope.
--
-- Before this migration the runtime role could call audit_sequence (or
-- stage a row that the integrator passes to it) with any bytes as a
-- payload: a non-JSON payload was chained, made every verification fail
-- at that row, and a kind, tenant or actor column could disagree with the
-- payload it copies (verification names that, but the columns are what
-- the register's and tenants' reads select on). Now:
--
--   - audit_payloads_refused(occurred_at[], kind[], tenant[], actor[],
--     payload[]) returns the first payload (1-based index and why) that is
--     not UTF-8 JSON, not an object of exactly the envelope's members (v,
--     kind, occurred_at, tenant when set, actor, data, sig when signed:
--     audit.Event.Canonical), not version 1, has whitespace around it, or
--     whose kind, tenant, actor or occurred_at (UTC, microseconds, as
--     audit.TimeFormat writes it) differs from its column; NULL when all
--     are envelopes. The parse of the whole batch is one subtransaction
--     (PostgreSQL 15 has no pg_input_is_valid); only a failing batch is
--     parsed again row by row, to name the row.
--   - audit_sequence, the runtime role's door, calls it before taking the
--     ledger lock and refuses the batch (CL020) otherwise; the chain and
--     tree work it did (00025) is now audit_place, which the runtime role
--     cannot call.
--   - An AFTER INSERT statement trigger on audit_staging does the same,
--     so a poisoned row is refused when it is staged: it never reaches
--     the integrator, whose every later batch it would otherwise block.
--     audit_integrate therefore calls audit_place directly: the check is
--     paid by the stagers, in parallel and outside the ledger lock, not
--     twice and not by the one integrator, which it halved (8,900-11,700
--     events/s on 00025 against 4,400-5,200 with the check in the
--     integration, BenchmarkIntegrate on 2 loaded vCPUs). A row staged
--     before this migration is integrated unchecked; Verify names it if
--     it is not an envelope.
--
-- What SQL cannot check: RFC 8785 canonical form in full (member order
-- by UTF-16 code units, number and string forms) and the event
-- signature (no Ed25519 in PostgreSQL): Verify checks both, in Go, and
-- names a break at the entry; the signature is what a writer without the
-- log key cannot produce (audit/eventsig.go).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION audit_envelope_refusal(j jsonb, s text, t timestamptz, k text, tn text, a text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN jsonb_typeof(j) <> 'object' THEN 'is not a JSON object'
        WHEN left(s, 1) <> '{' OR right(s, 1) <> '}' THEN 'has whitespace around its object'
        WHEN (j - '{v,kind,occurred_at,tenant,actor,data,sig}'::text[]) <> '{}'::jsonb THEN 'has a member no envelope has'
        WHEN j->'v' IS DISTINCT FROM '1'::jsonb THEN 'is not a version 1 envelope'
        WHEN jsonb_typeof(j->'data') IS DISTINCT FROM 'object' THEN 'has no data object'
        WHEN j ? 'sig' AND jsonb_typeof(j->'sig') <> 'string' THEN 'has a sig that is not a string'
        WHEN j ? 'tenant' AND jsonb_typeof(j->'tenant') <> 'string' THEN 'has a tenant that is not a string'
        WHEN jsonb_typeof(j->'kind') IS DISTINCT FROM 'string' OR j->>'kind' IS DISTINCT FROM k THEN 'has another kind than its column'
        WHEN (j->>'tenant') IS DISTINCT FROM tn THEN 'has another tenant than its column'
        WHEN jsonb_typeof(j->'actor') IS DISTINCT FROM 'string' OR j->>'actor' IS DISTINCT FROM a THEN 'has another actor than its column'
        WHEN jsonb_typeof(j->'occurred_at') IS DISTINCT FROM 'string'
             OR j->>'occurred_at' IS DISTINCT FROM to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
            THEN 'has another occurred_at than its column'
    END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION audit_payloads_refused(p_occurred_at timestamptz[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[],
                                       OUT i bigint, OUT why text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    BEGIN
        SELECT u.o, r.why INTO i, why
        FROM unnest(p_occurred_at, p_kind, p_tenant, p_actor, p_payload) WITH ORDINALITY AS u(t, k, tn, a, p, o)
        CROSS JOIN LATERAL (SELECT convert_from(u.p, 'UTF8') AS s) c
        CROSS JOIN LATERAL (SELECT audit_envelope_refusal(c.s::jsonb, c.s, u.t, u.k, u.tn, u.a) AS why) r
        WHERE r.why IS NOT NULL
        ORDER BY u.o LIMIT 1;
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        NULL; -- a payload is not UTF-8 JSON: find which below
    END;
    FOR n IN 1..coalesce(cardinality(p_payload), 0) LOOP
        BEGIN
            PERFORM convert_from(p_payload[n], 'UTF8')::jsonb;
        EXCEPTION WHEN OTHERS THEN
            i := n;
            why := 'is not UTF-8 JSON';
            RETURN;
        END;
    END LOOP;
    i := NULL;
    why := 'is not UTF-8 JSON';
END $$;
-- +goose StatementEnd

-- 00025's audit_sequence, renamed: the chain and tree work, for the
-- owner's definer functions only.
ALTER FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) RENAME TO audit_place;
ALTER FUNCTION audit_place(timestamptz[], text[], text[], text[], bytea[]) SECURITY INVOKER;
REVOKE ALL ON FUNCTION audit_place(timestamptz[], text[], text[], text[], bytea[]) FROM PUBLIC;

-- audit_sequence: the payload check, then audit_place.
-- +goose StatementBegin
CREATE FUNCTION audit_sequence(p_occurred_at timestamptz[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[],
                               OUT first_seq bigint, OUT first_prev bytea, OUT last_hash bytea)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    k   integer := coalesce(cardinality(p_payload), 0);
    bad record;
BEGIN
    -- The batch's shape first, as audit_place refuses it (CL003).
    IF k = 0 OR coalesce(cardinality(p_occurred_at), 0) <> k OR coalesce(cardinality(p_kind), 0) <> k
       OR coalesce(cardinality(p_tenant), 0) <> k OR coalesce(cardinality(p_actor), 0) <> k
       OR array_position(p_payload, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003', MESSAGE = 'audit_sequence: empty batch, null payload or arrays of different lengths';
    END IF;
    SELECT * INTO bad FROM audit_payloads_refused(p_occurred_at, p_kind, p_tenant, p_actor, p_payload);
    IF bad.why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CL020',
            MESSAGE = format('audit_sequence: payload %s of the batch %s', coalesce(bad.i::text, '?'), bad.why);
    END IF;
    SELECT q.first_seq, q.first_prev, q.last_hash INTO first_seq, first_prev, last_hash
        FROM audit_place(p_occurred_at, p_kind, p_tenant, p_actor, p_payload) q;
END $$;
-- +goose StatementEnd

-- audit_integrate as in 00017, calling audit_place: its rows were
-- checked when staged.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_integrate(p_max integer, OUT first_seq bigint, OUT n integer, OUT last_hash bytea)
LANGUAGE plpgsql SECURITY DEFINER AS $$
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
    SELECT q.first_seq, q.last_hash INTO first_seq, last_hash FROM audit_place(occurred, kinds, tenants, actors, payloads) q;
    INSERT INTO audit_integrations (first_seq, staged_ids) VALUES (first_seq, ids);
    n := cardinality(ids);
END $$;
-- +goose StatementEnd

-- A staged row is checked when it is staged: one call per statement.
-- +goose StatementBegin
CREATE FUNCTION audit_staging_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
    ids bigint[];
    t   timestamptz[];
    k   text[];
    tn  text[];
    a   text[];
    p   bytea[];
BEGIN
    SELECT array_agg(n.id ORDER BY n.id), array_agg(n.occurred_at ORDER BY n.id), array_agg(n.kind ORDER BY n.id),
           array_agg(n.tenant ORDER BY n.id), array_agg(n.actor ORDER BY n.id), array_agg(n.payload ORDER BY n.id)
        INTO ids, t, k, tn, a, p FROM new_rows n;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT * INTO bad FROM audit_payloads_refused(t, k, tn, a, p);
    IF bad.why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CL020',
            MESSAGE = format('audit_staging: the payload of row %s %s', coalesce(ids[bad.i]::text, '?'), bad.why);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER audit_staging_check AFTER INSERT ON audit_staging
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audit_staging_check();
ALTER TABLE audit_staging ENABLE ALWAYS TRIGGER audit_staging_check;

-- Fixed search_paths (pg_temp last), and the runtime role's grants: it
-- calls audit_sequence, never audit_place (the rename kept 00025's grant).
-- +goose StatementBegin
DO $$
DECLARE
    rt text := current_setting('cloison.runtime_role');
    sp text := format('pg_catalog, %I, pg_temp', current_schema());
BEGIN
    EXECUTE format('ALTER FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_integrate(integer) SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_payloads_refused(timestamptz[], text[], text[], text[], bytea[]) SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_envelope_refusal(jsonb, text, timestamptz, text, text, text) SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_staging_check() SET search_path = %s', sp);
    REVOKE ALL ON FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) FROM PUBLIC;
    EXECUTE format('REVOKE ALL ON FUNCTION audit_place(timestamptz[], text[], text[], text[], bytea[]) FROM %I', rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER audit_staging_check ON audit_staging;
DROP FUNCTION audit_staging_check();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_integrate(p_max integer, OUT first_seq bigint, OUT n integer, OUT last_hash bytea)
LANGUAGE plpgsql SECURITY DEFINER AS $$
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
DROP FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]);
ALTER FUNCTION audit_place(timestamptz[], text[], text[], text[], bytea[]) RENAME TO audit_sequence;
ALTER FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) SECURITY DEFINER;
-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) TO %I', rt);
    EXECUTE format('ALTER FUNCTION audit_integrate(integer) SET search_path = %s', format('pg_catalog, %I, pg_temp', current_schema()));
END $$;
-- +goose StatementEnd
DROP FUNCTION audit_payloads_refused(timestamptz[], text[], text[], text[], bytea[]);
DROP FUNCTION audit_envelope_refusal(jsonb, text, timestamptz, text, text, text);
