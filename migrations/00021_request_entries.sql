-- Verify-response without a ledger scan: where each
-- request.completed entry sits in its tenant's log, so RequestEntry (POST
-- /v1/requests/{id}/verify, ResponseService, cloisonctl verify-response)
-- reads one row and O(log n) tree hashes instead of scanning the whole
-- ledger. Derived like the tenant logs (00013): audit/postgres
-- (indexTenantLogs) inserts a row for every request.completed leaf in the
-- same transaction as its tenant_log_entries row, so the append path pays
-- nothing and the table is exactly as far as tenant_log_indexed says.
-- Store.Verify recomputes every row from the ledger. A request id is not
-- unique by constraint (a ledger with a repeated id must not stop the
-- indexer): a reader takes the lowest position. Append-only like the
-- ledger.

-- +goose Up
CREATE TABLE request_entries (
    tenant  text   NOT NULL,
    request text   NOT NULL,
    pos     bigint NOT NULL CHECK (pos >= 1), -- position in the tenant's log
    seq     bigint NOT NULL CHECK (seq >= 1), -- the request.completed entry
    PRIMARY KEY (tenant, request, pos)
);

-- The entries already indexed: their tenant_log_entries rows and the
-- request id of their payload (canonical JSON; data.request).
INSERT INTO request_entries (tenant, request, pos, seq)
SELECT t.tenant, convert_from(e.payload, 'UTF8')::jsonb -> 'data' ->> 'request', t.pos, t.seq
FROM tenant_log_entries t JOIN audit_events e ON e.seq = t.seq
WHERE e.kind = 'request.completed' AND e.tenant = t.tenant
  AND convert_from(e.payload, 'UTF8')::jsonb -> 'data' ->> 'request' IS NOT NULL;

CREATE TRIGGER request_entries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON request_entries
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE request_entries ENABLE ALWAYS TRIGGER request_entries_append_only;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT ON request_entries TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE request_entries;
