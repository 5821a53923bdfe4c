-- The SQL functions of the ledger as they stand after every migration,
-- each once, in PostgreSQL's own rendering (pg_get_functiondef), so the
-- code in force can be read in one place: the migrations under
-- migrations/ redefine functions whole (audit_sequence three times) and
-- show their history. This file is documentation, never applied: the
-- migrations are the schema, and applied migrations never change.
--
-- TestSchemaSQLIsTheMigratedSchema (schema_test.go) migrates a database
-- and compares every function with this file, both ways; after writing a
-- migration that adds or changes a function, run
--
--     go test ./audit/postgres -run TestSchemaSQL -rewrite-schema
--
-- which rewrites the definitions and keeps these comments. Each function
-- below says which migration last defined it and what it is for.

-- audit_append (00001): the first writer's insert of a batch it hashed
-- itself. Kept for older writers; the runtime role lost EXECUTE on it in
-- 00025 (it is an invoker's function and the role has no INSERT on
-- audit_events any more).
CREATE OR REPLACE FUNCTION public.audit_append(p_seq bigint[], p_occurred_at timestamp with time zone[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[], p_prev_hash bytea[], p_hash bytea[])
 RETURNS bigint
 LANGUAGE sql
AS $function$
    WITH ins AS (
        INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
        SELECT * FROM unnest(p_seq, p_occurred_at, p_kind, p_tenant, p_actor, p_payload, p_prev_hash, p_hash)
        RETURNING seq
    )
    SELECT max(seq) FROM ins;
$function$
;

-- audit_events_check_chain (00025; first 00001): the statement trigger on
-- audit_events. Every batch's first event must link to the committed head;
-- a batch that audit_sequence inserts (current_user the owner through its
-- SECURITY DEFINER call, the statement marked cloison.sequencing) is not
-- rehashed, every other insert is recomputed in full.
CREATE OR REPLACE FUNCTION public.audit_events_check_chain()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
    -- audit_sequence's own insert (see the migration's comment): it
    -- hashed these rows itself.
    IF current_setting('cloison.sequencing', true) = 'on'
       AND current_user = (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = TG_RELID)
       AND session_user <> current_user
       AND current_setting('role') <> current_user THEN
        RETURN NULL;
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
END $function$
;

-- audit_events_check_tlog (00024; first 00005): the events of a statement
-- must be exactly covered by the Merkle tree's level-0 tiles (CL006).
CREATE OR REPLACE FUNCTION public.audit_events_check_tlog()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    top bigint;
BEGIN
    SELECT max(r.seq) INTO top FROM new_rows r;
    IF top IS NULL THEN
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM tlog_tiles t WHERE t.level = 0 AND t.n = (top - 1) >> 8 AND t.width = ((top - 1) & 255) + 1)
       OR EXISTS (SELECT 1 FROM tlog_tiles t WHERE t.level = 0 AND t.n >= (top - 1) >> 8 AND t.n * 256 + t.width > top) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL006',
            MESSAGE = format('tlog: events up to seq %s are not exactly covered by the Merkle tree', top);
    END IF;
    RETURN NULL;
END $function$
;

-- audit_head (00001): the committed head (seq, hash) read under the
-- ledger's advisory lock, the lock every writer of the chain takes.
CREATE OR REPLACE FUNCTION public.audit_head(OUT seq bigint, OUT hash bytea)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_advisory_xact_lock(-3458794010727121273); -- first 8 bytes of SHA-256('cloison-audit-ledger')
    SELECT e.seq, e.hash INTO seq, hash FROM audit_events e ORDER BY e.seq DESC LIMIT 1;
    IF seq IS NULL THEN
        seq := 0;
        hash := decode(repeat('00', 32), 'hex');
    END IF;
END $function$
;

-- audit_integrate (00026; first 00017): moves up to p_max staged events,
-- in staging order, into the chain through audit_place (their payloads
-- were checked when staged), in the caller's transaction (SECURITY
-- DEFINER, fixed search_path).
CREATE OR REPLACE FUNCTION public.audit_integrate(p_max integer, OUT first_seq bigint, OUT n integer, OUT last_hash bytea)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$
;

-- audit_sequence (00026; first 00012): the runtime role's door to the
-- chain: refuses (CL020) a batch with a payload that is not the envelope
-- its columns copy (audit_payloads_refused), then audit_place (SECURITY
-- DEFINER, fixed search_path, pg_temp last).
CREATE OR REPLACE FUNCTION public.audit_sequence(p_occurred_at timestamp with time zone[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[], OUT first_seq bigint, OUT first_prev bytea, OUT last_hash bytea)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$
;

-- audit_staging_guard (00017): audit_staging is append-only; rows leave it
-- only through audit_integrate (cloison.integrating set).
CREATE OR REPLACE FUNCTION public.audit_staging_guard()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('cloison.integrating', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'CL001',
        MESSAGE = format('%s is append-only: staged rows leave only through audit_integrate', TG_TABLE_NAME);
END $function$
;

-- cloison_incident_purge (00002): the one way to delete a register entry,
-- after its retention, bound to its incident.purged ledger event.
CREATE OR REPLACE FUNCTION public.cloison_incident_purge(p_id text, p_ledger_seq bigint)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE n integer := 0; k integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM audit_events e WHERE e.seq = p_ledger_seq AND e.kind = 'incident.purged'
                   AND convert_from(e.payload, 'UTF8')::jsonb->'data'->>'incident' = p_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL002', MESSAGE = format('purge of %s has no incident.purged ledger event at seq %s', p_id, p_ledger_seq);
    END IF;
    PERFORM set_config('cloison.purging', p_id, true);
    DELETE FROM incident_notices WHERE incident_id = p_id;
    GET DIAGNOSTICS k = ROW_COUNT; n := n + k;
    DELETE FROM incident_versions WHERE incident_id = p_id;
    GET DIAGNOSTICS k = ROW_COUNT; n := n + k;
    DELETE FROM incidents WHERE id = p_id;
    GET DIAGNOSTICS k = ROW_COUNT; n := n + k;
    PERFORM set_config('cloison.purging', '', true);
    RETURN n;
END $function$
;

-- cloison_refuse_change (00001): the append-only trigger of the ledger and
-- register tables (CL001 on UPDATE, DELETE, TRUNCATE).
CREATE OR REPLACE FUNCTION public.cloison_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'CL001',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END $function$
;

-- incident_refuse_early_delete (00002): register rows leave only through
-- cloison_incident_purge, and not before five years after awareness.
CREATE OR REPLACE FUNCTION public.incident_refuse_early_delete()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    id   text := to_jsonb(OLD)->>TG_ARGV[0]; -- the incident id column: 'id' or 'incident_id'
    keep date;
BEGIN
    IF current_setting('cloison.purging', true) IS DISTINCT FROM id THEN
        RAISE EXCEPTION USING ERRCODE = 'CL002',
            MESSAGE = format('%s: incident %s may only be removed by cloison_incident_purge', TG_TABLE_NAME, id);
    END IF;
    SELECT max(v.retain_until) INTO keep FROM incident_versions v WHERE v.incident_id = id;
    IF keep IS NOT NULL AND keep > current_date THEN
        RAISE EXCEPTION USING ERRCODE = 'CL002',
            MESSAGE = format('incident %s must be kept until %s (five years after awareness)', id, keep);
    END IF;
    RETURN OLD;
END $function$
;

-- incident_versions_derive (00002): a version's columns are derived from
-- its hashed content; versions of an incident are numbered 1, 2, ….
CREATE OR REPLACE FUNCTION public.incident_versions_derive()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    c    jsonb := convert_from(NEW.content, 'UTF8')::jsonb;
    prev integer;
BEGIN
    IF c->>'incident' IS DISTINCT FROM NEW.incident_id OR (c->>'version')::integer IS DISTINCT FROM NEW.version THEN
        RAISE EXCEPTION USING ERRCODE = 'CL004', MESSAGE = 'incident version content names another incident or version';
    END IF;
    SELECT max(v.version) INTO prev FROM incident_versions v WHERE v.incident_id = NEW.incident_id;
    IF NEW.version <> coalesce(prev, 0) + 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'CL005',
            MESSAGE = format('incident %s: version %s does not follow %s', NEW.incident_id, NEW.version, coalesce(prev, 0));
    END IF;
    NEW.status          := c->>'status';
    NEW.assessment      := c->'assessment'->>'status';
    NEW.awareness_start := (c->'awareness'->>'start')::date;
    NEW.awareness_end   := nullif(c->'awareness'->>'end', '')::date;
    NEW.retain_until    := (coalesce(NEW.awareness_end, NEW.awareness_start) + interval '5 years')::date;
    RETURN NEW;
END $function$
;

-- signing_keys_one_way (00003): token signing key material never changes,
-- and a key's state only moves forward (next, current, previous, retired).
CREATE OR REPLACE FUNCTION public.signing_keys_one_way()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.kid <> OLD.kid OR NEW.issuer <> OLD.issuer OR NEW.public_key <> OLD.public_key
       OR NEW.sealed_private <> OLD.sealed_private THEN
        RAISE EXCEPTION USING ERRCODE = 'CL010', MESSAGE = 'signing key material is immutable';
    END IF;
    IF array_position(ARRAY['next', 'current', 'previous', 'retired'], NEW.state)
       < array_position(ARRAY['next', 'current', 'previous', 'retired'], OLD.state) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL011',
            MESSAGE = format('signing key %s: %s → %s goes backwards', OLD.kid, OLD.state, NEW.state);
    END IF;
    RETURN NEW;
END $function$
;

-- tlog_backfill (00025): gives an older ledger its tree's tiles, for the
-- runtime role that has no INSERT on tlog_tiles; refused once a tree note
-- is signed, for tiles past the ledger, and for level-0 hashes that are
-- not the events' leaf hashes.
CREATE OR REPLACE FUNCTION public.tlog_backfill(p_level integer[], p_n bigint[], p_width integer[], p_hashes bytea[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    head bigint;
    bad  record;
BEGIN
    IF coalesce(cardinality(p_level), 0) = 0 OR cardinality(p_n) IS DISTINCT FROM cardinality(p_level)
       OR cardinality(p_width) IS DISTINCT FROM cardinality(p_level) OR cardinality(p_hashes) IS DISTINCT FROM cardinality(p_level) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003', MESSAGE = 'tlog_backfill: no tile or arrays of different lengths';
    END IF;
    PERFORM pg_advisory_xact_lock(-3458794010727121273); -- audit_head()'s lock
    IF EXISTS (SELECT 1 FROM tlog_checkpoints) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL006',
            MESSAGE = 'tlog_backfill: the tree has a signed note: only audit_sequence extends it';
    END IF;
    SELECT coalesce(max(e.seq), 0) INTO head FROM audit_events e;
    SELECT t.l, t.n, t.w INTO bad FROM unnest(p_level, p_n, p_width, p_hashes) AS t(l, n, w, h)
    WHERE t.l IS NULL OR t.n IS NULL OR t.w IS NULL OR t.h IS NULL OR t.l < 0 OR t.l > 7 OR t.n < 0 OR t.w < 1
       OR t.n * 256 + t.w > head >> (8 * t.l)
       OR (t.l = 0 AND EXISTS (SELECT 1 FROM generate_series(0, t.w - 1) AS i(i)
                               LEFT JOIN audit_events e ON e.seq = t.n * 256 + i.i + 1
                               WHERE substring(t.h FROM 32 * i.i + 1 FOR 32) IS DISTINCT FROM sha256(decode('00', 'hex') || e.payload)))
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CL006',
            MESSAGE = format('tlog_backfill: tile %s/%s.w%s is not the tree of the ledger''s events', bad.l, bad.n, bad.w);
    END IF;
    INSERT INTO tlog_tiles (level, n, width, hashes) SELECT * FROM unnest(p_level, p_n, p_width, p_hashes);
END $function$
;

-- tlog_hashes_check_dense (00005): the stored hashes of the first tree
-- table (tlog_hashes) are dense: no hole.
CREATE OR REPLACE FUNCTION public.tlog_hashes_check_dense()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$
;

-- tlog_stored_index (00012): tlog.StoredHashIndex in SQL.
CREATE OR REPLACE FUNCTION public.tlog_stored_index(p_level integer, p_n bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$
-- tlog.StoredHashIndex: level L's n'th hash is written right after level
-- L+1's 2n+1'th hash; level 0's n'th at n + n/2 + n/4 + ...
DECLARE
    n bigint := p_n;
    i bigint := 0;
BEGIN
    FOR l IN 1..p_level LOOP
        n := 2 * n + 1;
    END LOOP;
    WHILE n > 0 LOOP
        i := i + n;
        n := n >> 1;
    END LOOP;
    RETURN i + p_level;
END $function$
;

-- tlog_tiles_check_extend (00024): tiles only grow: a tile follows a full
-- one, and a wider row keeps the narrower rows' hashes.
CREATE OR REPLACE FUNCTION public.tlog_tiles_check_extend()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    bad record;
BEGIN
    SELECT r.level, r.n, r.width INTO bad FROM new_rows r
    WHERE (r.n > 0 AND NOT EXISTS (SELECT 1 FROM tlog_tiles t WHERE t.level = r.level AND t.n = r.n - 1 AND t.width = 256))
       OR EXISTS (SELECT 1 FROM tlog_tiles t WHERE t.level = r.level AND t.n = r.n AND t.width < r.width
                  AND t.hashes <> substring(r.hashes FROM 1 FOR 32 * t.width))
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CL003',
            MESSAGE = format('tlog: tile %s/%s.w%s leaves a hole or rewrites a stored hash', bad.level, bad.n, bad.width);
    END IF;
    RETURN NULL;
END $function$
;

-- audit_envelope_refusal (00026): why one parsed payload is not the
-- envelope its columns copy (members, version, kind, tenant, actor,
-- occurred_at as audit.TimeFormat writes it), or NULL.
CREATE OR REPLACE FUNCTION public.audit_envelope_refusal(j jsonb, s text, t timestamp with time zone, k text, tn text, a text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
$function$
;

-- audit_payloads_refused (00026): the first payload of a batch (1-based)
-- that is not UTF-8 JSON or not its columns' envelope, and why; NULLs
-- when all are. One subtransaction for the batch's parse.
CREATE OR REPLACE FUNCTION public.audit_payloads_refused(p_occurred_at timestamp with time zone[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[], OUT i bigint, OUT why text)
 RETURNS record
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$
;

-- audit_staging_check (00026): audit_staging's AFTER INSERT statement
-- trigger: refuses (CL020) a statement staging a payload that is not its
-- columns' envelope, so none reaches the integrator.
CREATE OR REPLACE FUNCTION public.audit_staging_check()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$
;

-- audit_place (00026, 00025's audit_sequence renamed; first 00012): the
-- only writer of the chain and the tree. Under the ledger lock it reads
-- the head, hashes the batch, inserts the events and extends the tree's
-- tiles and frontier. Invoker's rights, no EXECUTE for the runtime role:
-- only the owner's definer functions (audit_sequence, audit_integrate)
-- call it.
CREATE OR REPLACE FUNCTION public.audit_place(p_occurred_at timestamp with time zone[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[], OUT first_seq bigint, OUT first_prev bytea, OUT last_hash bytea)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$
;

-- row_apply (00027): the only way the runtime role changes a tenant, API
-- client or signing key row. It appends the change's event (audit_sequence)
-- and writes the row from the state document the event's data.state is the
-- digest of, in one statement; the row records the event's seq
-- (ledger_seq) and the one it followed (ledger_prev).
CREATE OR REPLACE FUNCTION public.row_apply(p_payload bytea, p_state bytea, OUT seq bigint, OUT first_prev bytea, OUT last_hash bytea)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    ev    jsonb;
    st    jsonb;
    tab   text;
    kind  text;
    prev  bigint;
    cur   bigint;
    found_row boolean;
    rid   text;
    owner text;
    extra CONSTANT text[] := ARRAY['created_at', 'updated_at', 'revoked_at', 'activated_at', 'retired_at', 'ledger_seq', 'ledger_prev'];
BEGIN
    BEGIN
        ev := convert_from(p_payload, 'UTF8')::jsonb;
        st := convert_from(p_state, 'UTF8')::jsonb;
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = 'row_apply: the event or the state is not JSON';
    END;
    IF jsonb_typeof(ev) <> 'object' OR jsonb_typeof(st) <> 'object' OR jsonb_typeof(st->'row') <> 'object'
       OR jsonb_typeof(st->'prev') <> 'number' OR (SELECT count(*) FROM jsonb_object_keys(st)) <> 3 THEN
        RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = 'row_apply: the state is not {prev, row, table}';
    END IF;
    IF ev->'data'->>'state' IS DISTINCT FROM encode(sha256(p_state), 'hex') THEN
        RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = 'row_apply: the event does not state this row';
    END IF;
    tab := st->>'table';
    kind := ev->>'kind';
    prev := (st->>'prev')::bigint;
    IF tab = 'tenants' THEN
        rid := st->'row'->>'id';
        IF kind NOT IN ('tenant.created', 'tenant.updated', 'tenant.disabled') OR ev->>'tenant' IS DISTINCT FROM rid
           OR st->'row' <> (to_jsonb(jsonb_populate_record(NULL::tenants, st->'row')) - extra) THEN
            RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = format('row_apply: %s does not state tenant %s', kind, rid);
        END IF;
        SELECT t.ledger_seq, true INTO cur, found_row FROM tenants t WHERE t.id = rid FOR UPDATE;
    ELSIF tab = 'api_clients' THEN
        rid := st->'row'->>'id';
        IF kind NOT IN ('client.created', 'client.revoked') OR ev->>'tenant' IS DISTINCT FROM st->'row'->>'tenant_id'
           OR ev->'data'->>'client' IS DISTINCT FROM rid
           OR st->'row' <> (to_jsonb(jsonb_populate_record(NULL::api_clients, st->'row')) - extra) THEN
            RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = format('row_apply: %s does not state client %s', kind, rid);
        END IF;
        SELECT c.ledger_seq, true, c.tenant_id INTO cur, found_row, owner FROM api_clients c WHERE c.id = rid FOR UPDATE;
        IF owner IS DISTINCT FROM st->'row'->>'tenant_id' AND found_row THEN
            RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = format('row_apply: client %s belongs to another tenant', rid);
        END IF;
    ELSIF tab = 'signing_keys' THEN
        rid := st->'row'->>'kid';
        IF kind NOT IN ('key.created', 'key.rotated', 'key.revoked') OR ev ? 'tenant' OR ev->'data'->>'key' IS DISTINCT FROM rid
           OR st->'row' <> (to_jsonb(jsonb_populate_record(NULL::signing_keys, st->'row')) - extra) THEN
            RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = format('row_apply: %s does not state key %s', kind, rid);
        END IF;
        SELECT k.ledger_seq, true INTO cur, found_row FROM signing_keys k WHERE k.kid = rid FOR UPDATE;
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'CL012', MESSAGE = format('row_apply: no live rows in %s', tab);
    END IF;
    -- A created event makes a row, or binds one older than this migration
    -- (no ledger_seq: tenancy Store.BindUnbound); any other changes one.
    found_row := coalesce(found_row, false);
    IF found_row AND cur IS NOT NULL AND kind IN ('tenant.created', 'client.created', 'key.created') THEN
        RAISE EXCEPTION USING ERRCODE = '23505', MESSAGE = format('row_apply: %s %s already exists', tab, rid);
    END IF;
    IF NOT found_row AND kind NOT IN ('tenant.created', 'client.created', 'key.created') THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('row_apply: %s %s does not exist', tab, rid);
    END IF;
    IF coalesce(cur, 0) <> prev THEN
        -- Another change came first (or an old event is replayed): the
        -- caller rereads and tries again.
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = format('row_apply: %s %s is at event %s, the state follows %s', tab, rid, coalesce(cur, 0), prev);
    END IF;
    SELECT q.first_seq, q.first_prev, q.last_hash INTO seq, first_prev, last_hash
        FROM audit_sequence(ARRAY[(ev->>'occurred_at')::timestamptz], ARRAY[kind], ARRAY[ev->>'tenant'], ARRAY[ev->>'actor'], ARRAY[p_payload]) q;
    IF tab = 'tenants' THEN
        IF found_row THEN
            UPDATE tenants t SET name = r.name, status = r.status, tier = r.tier, zeroing = r.zeroing,
                classification = r.classification, max_concurrent = r.max_concurrent, kv_pages = r.kv_pages,
                tokens_per_minute = r.tokens_per_minute, max_context = r.max_context, allowed_models = r.allowed_models,
                incident_contact = r.incident_contact, notice_deadline_hours = r.notice_deadline_hours,
                allowed_regions = r.allowed_regions, required_node_tier = r.required_node_tier,
                updated_at = clock_timestamp(), ledger_seq = seq, ledger_prev = prev
            FROM jsonb_populate_record(NULL::tenants, st->'row') r WHERE t.id = rid;
        ELSE
            INSERT INTO tenants (id, name, status, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute,
                                 max_context, allowed_models, incident_contact, notice_deadline_hours, allowed_regions,
                                 required_node_tier, ledger_seq, ledger_prev)
            SELECT r.id, r.name, r.status, r.tier, r.zeroing, r.classification, r.max_concurrent, r.kv_pages, r.tokens_per_minute,
                   r.max_context, r.allowed_models, r.incident_contact, r.notice_deadline_hours, r.allowed_regions,
                   r.required_node_tier, seq, prev
            FROM jsonb_populate_record(NULL::tenants, st->'row') r;
        END IF;
    ELSIF tab = 'api_clients' THEN
        IF found_row THEN
            UPDATE api_clients c SET tenant_id = r.tenant_id, name = r.name, scopes = r.scopes, status = r.status,
                revoked_at = CASE WHEN r.status = 'revoked' THEN coalesce(c.revoked_at, clock_timestamp()) END,
                ledger_seq = seq, ledger_prev = prev
            FROM jsonb_populate_record(NULL::api_clients, st->'row') r WHERE c.id = rid;
        ELSE
            INSERT INTO api_clients (id, tenant_id, name, scopes, status, revoked_at, ledger_seq, ledger_prev)
            SELECT r.id, r.tenant_id, r.name, r.scopes, r.status,
                   CASE WHEN r.status = 'revoked' THEN clock_timestamp() END, seq, prev
            FROM jsonb_populate_record(NULL::api_clients, st->'row') r;
        END IF;
    ELSE
        IF found_row THEN
            UPDATE signing_keys k SET issuer = r.issuer, algorithm = r.algorithm, public_key = r.public_key,
                sealed_private = r.sealed_private, state = r.state,
                activated_at = CASE WHEN r.state = 'current' AND k.state <> 'current' THEN clock_timestamp() ELSE k.activated_at END,
                retired_at = CASE WHEN r.state = 'retired' THEN coalesce(k.retired_at, clock_timestamp()) END,
                ledger_seq = seq, ledger_prev = prev
            FROM jsonb_populate_record(NULL::signing_keys, st->'row') r WHERE k.kid = rid;
        ELSE
            INSERT INTO signing_keys (kid, issuer, algorithm, public_key, sealed_private, state, activated_at, retired_at, ledger_seq, ledger_prev)
            SELECT r.kid, r.issuer, r.algorithm, r.public_key, r.sealed_private, r.state,
                   CASE WHEN r.state = 'current' THEN clock_timestamp() END,
                   CASE WHEN r.state = 'retired' THEN clock_timestamp() END, seq, prev
            FROM jsonb_populate_record(NULL::signing_keys, st->'row') r;
        END IF;
    END IF;
END $function$
;
-- placeholder
