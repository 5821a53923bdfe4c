-- Tenant logs, stored: each tenant's log (audit.TenantLeaf:
-- the entries that name the tenant, redacted where they name others too)
-- as an RFC 6962 tree of its own, so a tenant's checkpoint and proofs read
-- O(log n) rows instead of scanning the ledger. The rows are derived from
-- the committed ledger by audit/postgres (indexTenantLogs), in seq order,
-- under an advisory lock, a page per transaction: tenant_log_indexed says
-- how far (one row per page, the largest seq is the watermark).
-- Store.Verify recomputes every row from the ledger. Append-only like the
-- ledger: the runtime role may INSERT and SELECT, triggers enabled ALWAYS
-- refuse UPDATE, DELETE and TRUNCATE for everyone else.

-- +goose Up
CREATE TABLE tenant_log_entries (
    tenant text   NOT NULL,
    pos    bigint NOT NULL CHECK (pos >= 1), -- 1-based position in the tenant's log
    seq    bigint NOT NULL CHECK (seq >= 1), -- the ledger entry it is the leaf of
    PRIMARY KEY (tenant, pos)
);

CREATE TABLE tenant_log_hashes (
    tenant text   NOT NULL,
    index  bigint NOT NULL CHECK (index >= 0), -- tlog.StoredHashIndex in the tenant's tree
    hash   bytea  NOT NULL CHECK (octet_length(hash) = 32),
    PRIMARY KEY (tenant, index)
);

CREATE TABLE tenant_log_indexed (
    seq        bigint      PRIMARY KEY CHECK (seq >= 1), -- ledger indexed up to here
    indexed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TRIGGER tenant_log_entries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tenant_log_entries
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tenant_log_entries ENABLE ALWAYS TRIGGER tenant_log_entries_append_only;
CREATE TRIGGER tenant_log_hashes_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tenant_log_hashes
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tenant_log_hashes ENABLE ALWAYS TRIGGER tenant_log_hashes_append_only;
CREATE TRIGGER tenant_log_indexed_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tenant_log_indexed
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tenant_log_indexed ENABLE ALWAYS TRIGGER tenant_log_indexed_append_only;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT ON tenant_log_entries, tenant_log_hashes TO %I', rt);
    EXECUTE format('GRANT SELECT, INSERT (seq) ON tenant_log_indexed TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE tenant_log_indexed;
DROP TABLE tenant_log_hashes;
DROP TABLE tenant_log_entries;
