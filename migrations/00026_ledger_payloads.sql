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
--   - audit_sequence calls it before taking the ledger lock and refuses
--     the batch (CL020) otherwise.
--   - An AFTER INSERT statement trigger on audit_staging does the same,
--     so a poisoned row is refused when staged: it never reaches the
--     integrator, whose every later batch it would otherwise block.
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
        WHEN EXISTS (SELECT 1 FROM jsonb_object_keys(j) AS m(m)
                     WHERE m.m NOT IN ('v', 'kind', 'occurred_at', 'tenant', 'actor', 'data', 'sig')) THEN 'has a member no envelope has'
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_sequence(p_occurred_at timestamptz[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[],
                               OUT first_seq bigint, OUT first_prev bytea, OUT last_hash bytea)
LANGUAGE plpgsql AS $$
DECLARE
    k      integer := coalesce(cardinality(p_payload), 0);
    head   bigint;
    prev   bytea;
    prevs  bytea[];
    hashes bytea[];
    leaves bytea[]; -- SHA-256(0x00 || payload): RFC 6962 leaf hashes
    digs   bytea[]; -- SHA-256(payload): the chain's payload digests
    stack  bytea[]; -- stack[l + 1]: the frontier's level-l subtree hash
    sub    bytea[]; -- the same stack within one partial tile
    prefix bytea[]; -- prefix[L + 1]: the hashes of tile level L's partial tile
    fr     bytea[]; -- the stored frontier of size head (tlog_frontier), if any
    tl     integer[]; -- tile level of each tile-level hash the batch makes
    tx     bytea[];   -- and the hash
    cnt    integer := 0;
    nx     bigint;
    c      bigint;
    w      integer;
    tw     integer;
    td     bytea;
    h      bytea;
    m      integer;
    lv     integer;
    one    CONSTANT bytea := decode('01', 'hex');
    domain CONSTANT bytea := 'CLOISON-AUDIT-EVENT-V1'::bytea;
    bad    record;
BEGIN
    IF k = 0 OR coalesce(cardinality(p_occurred_at), 0) <> k OR coalesce(cardinality(p_kind), 0) <> k
       OR coalesce(cardinality(p_tenant), 0) <> k OR coalesce(cardinality(p_actor), 0) <> k
       OR array_position(p_payload, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003', MESSAGE = 'audit_sequence: empty batch, null payload or arrays of different lengths';
    END IF;
    -- The payloads must be the envelopes their columns copy (00026).
    SELECT * INTO bad FROM audit_payloads_refused(p_occurred_at, p_kind, p_tenant, p_actor, p_payload);
    IF bad.why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CL020',
            MESSAGE = format('audit_sequence: payload %s of the batch %s', coalesce(bad.i::text, '?'), bad.why);
    END IF;
    SELECT array_agg(sha256(decode('00', 'hex') || u.p) ORDER BY u.o), array_agg(sha256(u.p) ORDER BY u.o)
        INTO leaves, digs FROM unnest(p_payload) WITH ORDINALITY AS u(p, o);
    PERFORM pg_advisory_xact_lock(-3458794010727121273); -- audit_head()'s lock
    SELECT e.seq, e.hash INTO head, prev FROM audit_events e ORDER BY e.seq DESC LIMIT 1;
    IF head IS NULL THEN
        head := 0;
        prev := decode(repeat('00', 32), 'hex');
    END IF;
    first_seq := head + 1;
    first_prev := prev;
    SELECT f.stack INTO fr FROM tlog_frontier f WHERE f.size = head AND f.head_hash = prev;
    IF fr IS NOT NULL THEN
        FOR l IN 0..62 LOOP
            IF ((head >> l) & 1) = 1 AND fr[l + 1] IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'CL006',
                    MESSAGE = format('tlog: the stored frontier of tree size %s lacks level %s', head, l);
            END IF;
        END LOOP;
    END IF;
    lv := 0;
    LOOP
        c := head >> (8 * lv); -- hashes at tree level 8 lv
        EXIT WHEN c = 0;
        w := (c & 255)::integer;
        tw := NULL;
        td := NULL;
        SELECT t.width, t.hashes INTO tw, td FROM tlog_tiles t WHERE t.level = lv AND t.n = c >> 8 ORDER BY t.width DESC LIMIT 1;
        IF (w = 0 AND tw IS NOT NULL) OR (w > 0 AND tw IS DISTINCT FROM w) THEN
            RAISE EXCEPTION USING ERRCODE = 'CL006',
                MESSAGE = format('tlog: the frontier of tree size %s is missing from tlog_tiles (level %s)', head, lv);
        END IF;
        prefix[lv + 1] := coalesce(td, ''::bytea);
        IF fr IS NOT NULL THEN
            lv := lv + 1;
            CONTINUE;
        END IF;
        FOR i IN 0..w - 1 LOOP
            h := substring(td FROM 32 * i + 1 FOR 32);
            m := 0;
            WHILE ((i >> m) & 1) = 1 LOOP
                h := sha256(one || sub[m + 1] || h);
                m := m + 1;
            END LOOP;
            sub[m + 1] := h;
        END LOOP;
        FOR j IN 0..7 LOOP
            IF ((w >> j) & 1) = 1 THEN
                stack[8 * lv + j + 1] := sub[j + 1];
            END IF;
        END LOOP;
        lv := lv + 1;
    END LOOP;
    IF fr IS NOT NULL THEN
        stack := fr;
    END IF;
    nx := head; -- the next leaf's index (seq - 1)
    FOR i IN 1..k LOOP
        prevs[i] := prev;
        prev := sha256(domain || int8send(nx + 1) || prev || digs[i]);
        hashes[i] := prev;
        h := leaves[i];
        cnt := cnt + 1;
        tl[cnt] := 0;
        tx[cnt] := h;
        m := 0;
        WHILE ((nx >> m) & 1) = 1 LOOP
            h := sha256(one || stack[m + 1] || h);
            m := m + 1;
            IF (m & 7) = 0 THEN
                cnt := cnt + 1;
                tl[cnt] := m >> 3;
                tx[cnt] := h;
            END IF;
        END LOOP;
        stack[m + 1] := h;
        nx := nx + 1;
    END LOOP;
    -- Tree first: the events' trigger checks that the tree covers them.
    INSERT INTO tlog_tiles (level, n, width, hashes)
        SELECT g.l, g.p >> 8, ((max(g.p) & 255) + 1)::integer,
               CASE WHEN g.p >> 8 = (head >> (8 * g.l)) >> 8 THEN coalesce(prefix[g.l + 1], ''::bytea) ELSE ''::bytea END
                   || string_agg(g.x, ''::bytea ORDER BY g.p)
        FROM (SELECT u.l, u.x, (head >> (8 * u.l)) + row_number() OVER (PARTITION BY u.l ORDER BY u.o) - 1 AS p
              FROM unnest(tl, tx) WITH ORDINALITY AS u(l, x, o)) g
        GROUP BY g.l, g.p >> 8;
    INSERT INTO tlog_frontier (size, head_hash, stack) VALUES (nx, prev, stack) ON CONFLICT DO NOTHING;
    PERFORM set_config('cloison.sequencing', 'on', true);
    INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
        SELECT head + u.o, u.t, u.k, u.tn, u.a, u.p, u.pv, u.h
        FROM unnest(p_occurred_at, p_kind, p_tenant, p_actor, p_payload, prevs, hashes) WITH ORDINALITY AS u(t, k, tn, a, p, pv, h, o);
    PERFORM set_config('cloison.sequencing', 'off', true);
    last_hash := prev;
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

-- The definer's fixed search_path, as 00025 set it (CREATE OR REPLACE
-- keeps the function's settings; said again so this file stands alone).
-- +goose StatementBegin
DO $$
DECLARE
    sp text := format('pg_catalog, %I, pg_temp', current_schema());
BEGIN
    EXECUTE format('ALTER FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) SECURITY DEFINER SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_payloads_refused(timestamptz[], text[], text[], text[], bytea[]) SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_envelope_refusal(jsonb, text, timestamptz, text, text, text) SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_staging_check() SET search_path = %s', sp);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER audit_staging_check ON audit_staging;
DROP FUNCTION audit_staging_check();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_sequence(p_occurred_at timestamptz[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[],
                               OUT first_seq bigint, OUT first_prev bytea, OUT last_hash bytea)
LANGUAGE plpgsql AS $$
DECLARE
    k      integer := coalesce(cardinality(p_payload), 0);
    head   bigint;
    prev   bytea;
    prevs  bytea[];
    hashes bytea[];
    leaves bytea[]; -- SHA-256(0x00 || payload): RFC 6962 leaf hashes
    digs   bytea[]; -- SHA-256(payload): the chain's payload digests
    stack  bytea[]; -- stack[l + 1]: the frontier's level-l subtree hash
    sub    bytea[]; -- the same stack within one partial tile
    prefix bytea[]; -- prefix[L + 1]: the hashes of tile level L's partial tile
    fr     bytea[]; -- the stored frontier of size head (tlog_frontier), if any
    tl     integer[]; -- tile level of each tile-level hash the batch makes
    tx     bytea[];   -- and the hash
    cnt    integer := 0;
    nx     bigint;
    c      bigint;
    w      integer;
    tw     integer;
    td     bytea;
    h      bytea;
    m      integer;
    lv     integer;
    one    CONSTANT bytea := decode('01', 'hex');
    domain CONSTANT bytea := 'CLOISON-AUDIT-EVENT-V1'::bytea;
BEGIN
    IF k = 0 OR coalesce(cardinality(p_occurred_at), 0) <> k OR coalesce(cardinality(p_kind), 0) <> k
       OR coalesce(cardinality(p_tenant), 0) <> k OR coalesce(cardinality(p_actor), 0) <> k
       OR array_position(p_payload, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003', MESSAGE = 'audit_sequence: empty batch, null payload or arrays of different lengths';
    END IF;
    SELECT array_agg(sha256(decode('00', 'hex') || u.p) ORDER BY u.o), array_agg(sha256(u.p) ORDER BY u.o)
        INTO leaves, digs FROM unnest(p_payload) WITH ORDINALITY AS u(p, o);
    PERFORM pg_advisory_xact_lock(-3458794010727121273); -- audit_head()'s lock
    SELECT e.seq, e.hash INTO head, prev FROM audit_events e ORDER BY e.seq DESC LIMIT 1;
    IF head IS NULL THEN
        head := 0;
        prev := decode(repeat('00', 32), 'hex');
    END IF;
    first_seq := head + 1;
    first_prev := prev;
    SELECT f.stack INTO fr FROM tlog_frontier f WHERE f.size = head AND f.head_hash = prev;
    IF fr IS NOT NULL THEN
        FOR l IN 0..62 LOOP
            IF ((head >> l) & 1) = 1 AND fr[l + 1] IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'CL006',
                    MESSAGE = format('tlog: the stored frontier of tree size %s lacks level %s', head, l);
            END IF;
        END LOOP;
    END IF;
    lv := 0;
    LOOP
        c := head >> (8 * lv); -- hashes at tree level 8 lv
        EXIT WHEN c = 0;
        w := (c & 255)::integer;
        tw := NULL;
        td := NULL;
        SELECT t.width, t.hashes INTO tw, td FROM tlog_tiles t WHERE t.level = lv AND t.n = c >> 8 ORDER BY t.width DESC LIMIT 1;
        IF (w = 0 AND tw IS NOT NULL) OR (w > 0 AND tw IS DISTINCT FROM w) THEN
            RAISE EXCEPTION USING ERRCODE = 'CL006',
                MESSAGE = format('tlog: the frontier of tree size %s is missing from tlog_tiles (level %s)', head, lv);
        END IF;
        prefix[lv + 1] := coalesce(td, ''::bytea);
        IF fr IS NOT NULL THEN
            lv := lv + 1;
            CONTINUE;
        END IF;
        FOR i IN 0..w - 1 LOOP
            h := substring(td FROM 32 * i + 1 FOR 32);
            m := 0;
            WHILE ((i >> m) & 1) = 1 LOOP
                h := sha256(one || sub[m + 1] || h);
                m := m + 1;
            END LOOP;
            sub[m + 1] := h;
        END LOOP;
        FOR j IN 0..7 LOOP
            IF ((w >> j) & 1) = 1 THEN
                stack[8 * lv + j + 1] := sub[j + 1];
            END IF;
        END LOOP;
        lv := lv + 1;
    END LOOP;
    IF fr IS NOT NULL THEN
        stack := fr;
    END IF;
    nx := head; -- the next leaf's index (seq - 1)
    FOR i IN 1..k LOOP
        prevs[i] := prev;
        prev := sha256(domain || int8send(nx + 1) || prev || digs[i]);
        hashes[i] := prev;
        h := leaves[i];
        cnt := cnt + 1;
        tl[cnt] := 0;
        tx[cnt] := h;
        m := 0;
        WHILE ((nx >> m) & 1) = 1 LOOP
            h := sha256(one || stack[m + 1] || h);
            m := m + 1;
            IF (m & 7) = 0 THEN
                cnt := cnt + 1;
                tl[cnt] := m >> 3;
                tx[cnt] := h;
            END IF;
        END LOOP;
        stack[m + 1] := h;
        nx := nx + 1;
    END LOOP;
    -- Tree first: the events' trigger checks that the tree covers them.
    INSERT INTO tlog_tiles (level, n, width, hashes)
        SELECT g.l, g.p >> 8, ((max(g.p) & 255) + 1)::integer,
               CASE WHEN g.p >> 8 = (head >> (8 * g.l)) >> 8 THEN coalesce(prefix[g.l + 1], ''::bytea) ELSE ''::bytea END
                   || string_agg(g.x, ''::bytea ORDER BY g.p)
        FROM (SELECT u.l, u.x, (head >> (8 * u.l)) + row_number() OVER (PARTITION BY u.l ORDER BY u.o) - 1 AS p
              FROM unnest(tl, tx) WITH ORDINALITY AS u(l, x, o)) g
        GROUP BY g.l, g.p >> 8;
    INSERT INTO tlog_frontier (size, head_hash, stack) VALUES (nx, prev, stack) ON CONFLICT DO NOTHING;
    PERFORM set_config('cloison.sequencing', 'on', true);
    INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
        SELECT head + u.o, u.t, u.k, u.tn, u.a, u.p, u.pv, u.h
        FROM unnest(p_occurred_at, p_kind, p_tenant, p_actor, p_payload, prevs, hashes) WITH ORDINALITY AS u(t, k, tn, a, p, pv, h, o);
    PERFORM set_config('cloison.sequencing', 'off', true);
    last_hash := prev;
END $$;
-- +goose StatementEnd
DROP FUNCTION audit_payloads_refused(timestamptz[], text[], text[], text[], bytea[]);
DROP FUNCTION audit_envelope_refusal(jsonb, text, timestamptz, text, text, text);
