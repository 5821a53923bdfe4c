-- Ledger throughput: the global Merkle tree as C2SP
-- tlog-tiles (golang.org/x/mod/sumdb/tlog's Tile, height 8) instead of one
-- tlog_hashes row per stored hash.
--
-- Before this migration audit_sequence inserted about two tlog_hashes rows
-- (and their primary-key entries) per event, as many rows as the events
-- themselves. A tile (level L, index n, width w) holds the w hashes of
-- tree level 8L at positions 256n .. 256n+w-1, concatenated (32 bytes
-- each): every stored hash of levels 8L .. 8L+7 is computed from them
-- (tlog.HashFromTile). Full tiles have width 256; the tree's frontier is
-- held by the partial tiles of its current size, one per level, rewritten
-- wider (a new row, the old one kept) by each batch. A batch of 8,192
-- events now inserts about 35 rows instead of about 16,000.
--
-- audit_sequence reads the partial tiles of the committed size (at most
-- one row per level) and the frontier the last batch stored (tlog_frontier;
-- computed from the partial tiles when there is none), chains and hashes
-- the batch as before and inserts the tiles it completes or widens. The
-- triggers keep the fail-closed properties of 00005: tiles are append-only
-- (for every role), each new row extends the rows of its tile that it
-- widens (same prefix) and follows a full tile of its level, and the
-- events' trigger refuses a batch whose size the level-0 tiles do not
-- exactly end at (CL006), so a writer that skips the tree fails closed.
--
-- tlog_hashes is kept, frozen and readable: this migration converts its
-- rows to tiles (the tree it holds, exactly), and no writer inserts into it
-- any more (INSERT revoked from the runtime role).

-- +goose Up
CREATE TABLE tlog_tiles (
    level  integer NOT NULL CHECK (level >= 0 AND level < 8), -- tile level: tree level 8 * level
    n      bigint  NOT NULL CHECK (n >= 0),
    width  integer NOT NULL CHECK (width BETWEEN 1 AND 256),
    hashes bytea   NOT NULL CHECK (octet_length(hashes) = 32 * width),
    PRIMARY KEY (level, n, width)
);
-- Hashes do not compress: a full tile (8 kB) is stored out of line
-- without a compression attempt.
ALTER TABLE tlog_tiles ALTER COLUMN hashes SET STORAGE EXTERNAL;

CREATE TRIGGER tlog_tiles_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_tiles
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tlog_tiles ENABLE ALWAYS TRIGGER tlog_tiles_append_only;

-- The frontier each batch leaves (stack[l + 1]: the level-l subtree left
-- of leaf size, present when bit l of size is set), so that the next batch
-- does not rebuild it from the partial tiles (up to 255 hashes a level):
-- one row per batch, append-only, a cache of what the tiles determine.
-- A row edited behind the triggers makes the next batches' upper-level
-- tiles wrong, which VerifyTree reports (it recomputes every tile from the
-- entries); it is never read by a proof.
-- Keyed by the size and the chain hash of the event at that size, which
-- commits to every entry before it: a row left by a history that was
-- rolled back or rewritten behind the triggers never matches another.
CREATE TABLE tlog_frontier (
    size      bigint  NOT NULL CHECK (size >= 1),
    head_hash bytea   NOT NULL CHECK (octet_length(head_hash) = 32),
    stack     bytea[] NOT NULL,
    PRIMARY KEY (size, head_hash)
);
CREATE TRIGGER tlog_frontier_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_frontier
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tlog_frontier ENABLE ALWAYS TRIGGER tlog_frontier_append_only;

-- A new tile row follows the full tile before it (level L, n - 1, width
-- 256) and keeps every hash its narrower rows hold: hashes are written
-- once, in order, never changed.
-- +goose StatementBegin
CREATE FUNCTION tlog_tiles_check_extend() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$;
-- +goose StatementEnd

CREATE TRIGGER tlog_tiles_extend AFTER INSERT ON tlog_tiles
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tlog_tiles_check_extend();
ALTER TABLE tlog_tiles ENABLE ALWAYS TRIGGER tlog_tiles_extend;

-- Every statement that inserts events must find the level-0 tiles ending
-- exactly at the new head: the tile of leaf n - 1 at width (n - 1) % 256 + 1,
-- and no level-0 tile beyond it. Same trigger name and order as 00005.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_events_check_tlog() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$;
-- +goose StatementEnd

-- audit_sequence as in 00012 (same arguments, results, lock and chain),
-- with the tree as tiles. The frontier (stack[l + 1]: the level-l subtree
-- left of the next leaf, present when bit l of the size is set) is
-- computed from the partial tile of each tile level: running the same
-- stack over its w hashes leaves, for each bit j of w, the level-(8L + j)
-- subtree. The loop then records every hash of a level multiple of 8 (the
-- leaves, and each 256th combination) with its tile level, and one INSERT
-- writes, per level, the tiles the batch touches: the first one prefixed
-- by the hashes of the partial tile it widens.
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
    -- The frontier: the one the batch that made size head stored, or else
    -- (a tree converted by this migration, or built by Open) computed from
    -- the partial tiles of size head, which are read and checked either way
    -- (their hashes prefix the tiles this batch widens).
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
    INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
        SELECT head + u.o, u.t, u.k, u.tn, u.a, u.p, u.pv, u.h
        FROM unnest(p_occurred_at, p_kind, p_tenant, p_actor, p_payload, prevs, hashes) WITH ORDINALITY AS u(t, k, tn, a, p, pv, h, o);
    last_hash := prev;
END $$;
-- +goose StatementEnd

-- Convert the tree tlog_hashes holds (size s: its 2s - popcount(s) rows)
-- to the tiles of size s: per tile level L, the hashes of tree level 8L
-- at positions 0 .. (s >> 8L) - 1, 256 a row, the last row partial.
-- +goose StatementBegin
DO $$
DECLARE
    stored bigint;
    s      bigint := -1;
    c      bigint;
    got    bigint;
BEGIN
    SELECT count(*) INTO stored FROM tlog_hashes;
    FOR x IN stored / 2 .. stored / 2 + 64 LOOP
        IF 2 * x - bit_count(x::bit(64)) = stored THEN
            s := x;
            EXIT;
        END IF;
    END LOOP;
    IF s < 0 OR (stored > 0 AND NOT EXISTS (SELECT 1 FROM tlog_hashes WHERE index = stored - 1)) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL006',
            MESSAGE = format('tlog: %s stored hashes in tlog_hashes are no tree', stored);
    END IF;
    FOR lv IN 0..7 LOOP
        c := s >> (8 * lv);
        EXIT WHEN c = 0;
        INSERT INTO tlog_tiles (level, n, width, hashes)
            SELECT lv, p.p >> 8, ((max(p.p) & 255) + 1)::integer, string_agg(h.hash, ''::bytea ORDER BY p.p)
            FROM generate_series(0::bigint, c - 1) AS p(p)
            JOIN tlog_hashes h ON h.index = tlog_stored_index(8 * lv, p.p)
            GROUP BY p.p >> 8;
        GET DIAGNOSTICS got = ROW_COUNT;
        IF got <> (c + 255) / 256 OR EXISTS (SELECT 1 FROM tlog_tiles t WHERE t.level = lv
                                              AND t.width <> least(256, c - 256 * t.n)) THEN
            RAISE EXCEPTION USING ERRCODE = 'CL006',
                MESSAGE = format('tlog: tlog_hashes lacks hashes of level %s of a tree of size %s', 8 * lv, s);
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT ON tlog_tiles, tlog_frontier TO %I', rt);
    EXECUTE format('REVOKE INSERT ON tlog_hashes FROM %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
-- Irreversible: tiles written after this migration have no tlog_hashes rows.
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION '00024 (tlog tiles) cannot be reverted'; END $$;
-- +goose StatementEnd
