-- Ledger integration cost: audit_sequence is the only
-- writer of the chain and the tree, and the chain trigger no longer
-- recomputes what it just hashed.
--
-- Before this migration the runtime role could INSERT into audit_events,
-- tlog_tiles and tlog_frontier, so audit_events_check_chain (00001) had to
-- recompute every hash of every inserted batch (two SHA-256 per event:
-- 60-90 ms of the 195-280 ms audit_sequence took per 8,192-event
-- integration, audit/postgres/doc.go). Now:
--
--   - audit_sequence is SECURITY DEFINER (owned by the ledger owner, the
--     role migrations run as), with a fixed search_path (pg_catalog, the
--     ledger's schema, pg_temp last, so a temporary table cannot shadow a
--     ledger table); audit_integrate gets the same search_path (it had
--     FROM CURRENT, which searches pg_temp first for tables). EXECUTE is
--     revoked from PUBLIC and granted to the runtime role.
--   - The runtime role loses INSERT (and UPDATE, DELETE, TRUNCATE, which
--     it never had) on audit_events, tlog_tiles, tlog_frontier and
--     tlog_hashes, and EXECUTE on audit_append (00001: an invoker's
--     function, useless without INSERT). It keeps SELECT, INSERT on the
--     staging table and the checkpoint notes, and EXECUTE on audit_head,
--     audit_sequence, audit_integrate and tlog_backfill.
--   - audit_events_check_chain skips the per-row pass (the window over
--     the batch and both SHA-256) for a statement that audit_sequence
--     runs: current_user is the table's owner through a SECURITY DEFINER
--     call (session_user is not the owner and no SET ROLE to the owner is
--     in effect) and audit_sequence has marked the statement
--     (cloison.sequencing, transaction-local, set just before its INSERT
--     and cleared right after). audit_sequence computes prev_hash and hash
--     itself, from the committed head it read under the ledger lock, and
--     the writer recomputes the chain in Go and compares the last hash.
--     Every other insert (the owner's, SET ROLE to the owner, a superuser,
--     session_user the owner) is checked in full, as before. The link of
--     the batch's first event to the committed head is checked for every
--     statement (one index lookup). The runtime role cannot make
--     current_user the owner except through the owner's SECURITY DEFINER
--     functions: it is no member of the owner (SET ROLE is refused) and
--     cannot create functions in the ledger's schema. A role that can
--     create a function owned by the owner can also drop the trigger:
--     against it the triggers never were the defence, Verify is.
--   - tlog_backfill (SECURITY DEFINER) is how Open gives a ledger written
--     before the tree existed (00005, no tile and no signed note) its tiles,
--     computed in Go, now that the runtime role cannot insert them: it
--     takes the ledger lock, refuses once any tree note is signed, refuses
--     tiles reaching past the ledger and level-0 hashes that are not the
--     events' leaf hashes; tlog_tiles' triggers check the rest as before,
--     and VerifyTree recomputes every tile.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_events_check_chain() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$;
-- +goose StatementEnd

-- audit_sequence as in 00024, marking its event insert for the chain
-- trigger (cloison.sequencing, transaction-local: a subtransaction that
-- fails rolls it back with the insert).
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

-- tlog_backfill inserts the tiles Open computed (tree.go's ensureTree) for
-- a ledger that has no tree yet: see the migration's comment.
-- +goose StatementBegin
CREATE FUNCTION tlog_backfill(p_level integer[], p_n bigint[], p_width integer[], p_hashes bytea[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
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
END $$;
-- +goose StatementEnd

-- Definer functions: a fixed search_path, pg_temp last.
-- +goose StatementBegin
DO $$
DECLARE
    rt text := current_setting('cloison.runtime_role');
    sp text := format('pg_catalog, %I, pg_temp', current_schema());
BEGIN
    EXECUTE format('ALTER FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) SECURITY DEFINER SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION audit_integrate(integer) SET search_path = %s', sp);
    EXECUTE format('ALTER FUNCTION tlog_backfill(integer[], bigint[], integer[], bytea[]) SET search_path = %s', sp);
    REVOKE ALL ON FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) FROM PUBLIC;
    REVOKE ALL ON FUNCTION audit_integrate(integer) FROM PUBLIC;
    REVOKE ALL ON FUNCTION tlog_backfill(integer[], bigint[], integer[], bytea[]) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) TO %I', rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_integrate(integer) TO %I', rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION tlog_backfill(integer[], bigint[], integer[], bytea[]) TO %I', rt);
    EXECUTE format('REVOKE EXECUTE ON FUNCTION audit_append(bigint[], timestamptz[], text[], text[], text[], bytea[], bytea[], bytea[]) FROM %I', rt);
    -- A table-level REVOKE also revokes the column-level INSERT of 00001.
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON audit_events, tlog_tiles, tlog_frontier, tlog_hashes FROM %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT INSERT (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash) ON audit_events TO %I', rt);
    EXECUTE format('GRANT INSERT ON tlog_tiles, tlog_frontier TO %I', rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_append(bigint[], timestamptz[], text[], text[], text[], bytea[], bytea[], bytea[]) TO %I', rt);
END $$;
-- +goose StatementEnd
ALTER FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) SECURITY INVOKER RESET search_path;
ALTER FUNCTION audit_integrate(integer) SET search_path FROM CURRENT;
DROP FUNCTION tlog_backfill(integer[], bigint[], integer[], bytea[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_events_check_chain() RETURNS trigger LANGUAGE plpgsql AS $$
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
