-- Ledger throughput: one statement sequences a batch.
--
-- Before this migration every writer took the ledger lock (audit_head()),
-- read the head, computed the chain and the Merkle tree in Go and sent them
-- back: two or more client round trips inside the lock, which is held
-- through the commit's WAL flush. On a loaded machine each round trip also
-- waits for the client process to be scheduled, so the lock, not the
-- database, was the cluster's ceiling.
--
-- audit_sequence does all of it inside the database, in the one statement
-- that inserts: lock, head, chain hashes (audit.HashEvent), the RFC 6962
-- stored hashes (golang.org/x/mod/sumdb/tlog's StoredHashes: leaf
-- SHA-256(0x00 || payload), nodes SHA-256(0x01 || left || right)), then
-- the inserts. Writers precompute nothing that depends on the position;
-- no client round trip happens while the lock is held, so the lock is held
-- for the statement and the commit's flush only. The triggers of migrations
-- 00001 and 00005 still check every batch (chain, dense tree, tree covers
-- the events), so a writer that bypasses this function fails closed as
-- before; VerifyTree recomputes the tree in Go and compares every stored
-- hash.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION tlog_stored_index(p_level integer, p_n bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
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
END $$;
-- +goose StatementEnd

-- audit_sequence appends one batch (parallel arrays, one element per event)
-- after the committed head, under the ledger lock, and returns where it
-- placed it: the first seq, the prev_hash of the first event, the hash of
-- the last. The caller recomputes the chain from (first_seq - 1,
-- first_prev) in Go and compares the last hash, so a database that hashes
-- differently is a schema error, never a silently different chain.
--
-- The tree is built with a stack of the complete subtrees left of the next
-- leaf (the frontier: stack[L + 1] is the level-L subtree, present when bit
-- L of the size is set), read in one query from tlog_hashes at the start:
-- each leaf with m trailing one bits in its index combines with stack
-- levels 0..m-1 and becomes level m. Position-independent hashes (leaf
-- hashes, payload digests) are computed set-based before the loop.
-- +goose StatementBegin
CREATE FUNCTION audit_sequence(p_occurred_at timestamptz[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[],
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
    stack  bytea[]; -- stack[L + 1]: the frontier's level-L subtree hash
    base   bigint;  -- stored index of the batch's first leaf hash
    tree   bytea[]; -- the batch's stored hashes, tree[j] at index base + j - 1
    cnt    integer := 0;
    n      bigint;
    h      bytea;
    m      integer;
    lvl    integer;
    got    integer := 0;
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
    base := tlog_stored_index(0, head);
    FOR lvl, h IN SELECT g.l, t.hash FROM generate_series(0, 62) AS g(l)
                  JOIN tlog_hashes t ON t.index = tlog_stored_index(g.l, (head >> g.l) - 1)
                  WHERE ((head >> g.l) & 1) = 1 LOOP
        stack[lvl + 1] := h;
        got := got + 1;
    END LOOP;
    IF got <> bit_count(head::bit(64)) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL006',
            MESSAGE = format('tlog: the frontier of tree size %s is missing from tlog_hashes', head);
    END IF;
    n := head; -- the next leaf's index (seq - 1)
    FOR i IN 1..k LOOP
        prevs[i] := prev;
        prev := sha256(domain || int8send(n + 1) || prev || digs[i]);
        hashes[i] := prev;
        h := leaves[i];
        cnt := cnt + 1;
        tree[cnt] := h;
        m := 0;
        WHILE ((n >> m) & 1) = 1 LOOP
            h := sha256(one || stack[m + 1] || h);
            cnt := cnt + 1;
            tree[cnt] := h;
            m := m + 1;
        END LOOP;
        stack[m + 1] := h;
        n := n + 1;
    END LOOP;
    -- Tree first: the events' trigger checks that the tree covers them.
    INSERT INTO tlog_hashes (index, hash)
        SELECT base + u.o - 1, u.x FROM unnest(tree) WITH ORDINALITY AS u(x, o);
    INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
        SELECT head + u.o, u.t, u.k, u.tn, u.a, u.p, u.pv, u.h
        FROM unnest(p_occurred_at, p_kind, p_tenant, p_actor, p_payload, prevs, hashes) WITH ORDINALITY AS u(t, k, tn, a, p, pv, h, o);
    last_hash := prev;
END $$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) FROM PUBLIC;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT EXECUTE ON FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]) TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION audit_sequence(timestamptz[], text[], text[], text[], bytea[]);
DROP FUNCTION tlog_stored_index(integer, bigint);
