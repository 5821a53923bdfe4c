-- Live rows bound to their ledger events: tenants, API clients and signing
-- keys change only through row_apply, a SECURITY DEFINER function that
-- appends the change's event and writes the row in one statement.
--
-- Before this migration the runtime role had column INSERT and UPDATE on
-- the three tables: with cloisond's database credentials alone a tenant's
-- quotas could be raised or its zeroing set to never, every signing key
-- retired, any client revoked, and no event said so.
--
-- Now:
--   - The runtime role keeps SELECT and loses INSERT and UPDATE on
--     tenants, api_clients and signing_keys (a table-level REVOKE also
--     revokes the column grants of 00003, 00016 and 00019).
--   - row_apply(payload, state) takes the event's canonical payload (the
--     RFC 8785 envelope audit.Event.Canonical makes, which the node builds
--     and may sign) and the row's state document (audit.RowState: the
--     canonical JSON {"prev": N, "row": {...}, "table": T}). It checks that
--     the event's data.state is SHA-256 of the state document, that the
--     event's kind, tenant and object (client, key) are the row's, and
--     that prev is the seq of the row's last event (0 for a new row: an
--     old event replayed names a stale prev and is refused); then it
--     appends the event through audit_sequence (the ledger lock, the chain
--     and the tree, as every append) and writes the row as
--     jsonb_populate_record of the document's row, with ledger_seq (the
--     event's seq) and ledger_prev (prev). The document's row must be
--     exactly the row's columns (no other key, no value the column types
--     change): the row is a function of the event.
--   - The timestamps (created_at, updated_at, revoked_at, activated_at,
--     retired_at) are not in the document: row_apply sets them from the
--     database's clock, as before.
--   - A row with no ledger_seq predates this migration; audit/postgres
--     Verify reports it and the node binds it at start (tenancy
--     Store.BindUnbound: an update event that states the row as it is).
--
-- A caller of row_apply can still state any row it likes with an event
-- that says so: what it cannot do is change a row without the ledger
-- saying what the row now is. Verify (audit/postgres VerifyRows) and the
-- node (tenancy) compare every live row with its last event, and the
-- event's authorship is checked where events are bound to a key the
-- database does not hold.

-- +goose Up
ALTER TABLE tenants ADD COLUMN ledger_seq bigint, ADD COLUMN ledger_prev bigint;
ALTER TABLE api_clients ADD COLUMN ledger_seq bigint, ADD COLUMN ledger_prev bigint;
ALTER TABLE signing_keys ADD COLUMN ledger_seq bigint, ADD COLUMN ledger_prev bigint;

-- +goose StatementBegin
CREATE FUNCTION row_apply(p_payload bytea, p_state bytea, OUT seq bigint, OUT first_prev bytea, OUT last_hash bytea)
LANGUAGE plpgsql SECURITY DEFINER AS $$
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
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    rt text := current_setting('cloison.runtime_role');
    sp text := format('pg_catalog, %I, pg_temp', current_schema());
BEGIN
    EXECUTE format('ALTER FUNCTION row_apply(bytea, bytea) SET search_path = %s', sp);
    REVOKE ALL ON FUNCTION row_apply(bytea, bytea) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION row_apply(bytea, bytea) TO %I', rt);
    -- A table-level REVOKE also revokes the column grants of 00003, 00016, 00019.
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON tenants, api_clients, signing_keys FROM %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT INSERT (id, name, status, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute, max_context, allowed_models, incident_contact, notice_deadline_hours, allowed_regions, required_node_tier) ON tenants TO %I', rt);
    EXECUTE format('GRANT UPDATE (name, status, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute, max_context, allowed_models, incident_contact, updated_at, notice_deadline_hours, allowed_regions, required_node_tier) ON tenants TO %I', rt);
    EXECUTE format('GRANT INSERT (id, tenant_id, name, scopes) ON api_clients TO %I', rt);
    EXECUTE format('GRANT UPDATE (status, revoked_at) ON api_clients TO %I', rt);
    EXECUTE format('GRANT INSERT (kid, issuer, public_key, sealed_private, state, activated_at) ON signing_keys TO %I', rt);
    EXECUTE format('GRANT UPDATE (state, activated_at, retired_at) ON signing_keys TO %I', rt);
END $$;
-- +goose StatementEnd
DROP FUNCTION row_apply(bytea, bytea);
ALTER TABLE signing_keys DROP COLUMN ledger_prev, DROP COLUMN ledger_seq;
ALTER TABLE api_clients DROP COLUMN ledger_prev, DROP COLUMN ledger_seq;
ALTER TABLE tenants DROP COLUMN ledger_prev, DROP COLUMN ledger_seq;
