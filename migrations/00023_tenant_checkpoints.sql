-- Tenant checkpoints served: every tenant checkpoint note
-- that TenantCheckpoint signs and hands out is kept, one row per (tenant,
-- size), so a later rollback of a tenant log below a checkpoint a tenant
-- was given is detected by Store.Verify (audit.ErrSmallerTree) even when
-- the tenant keeps no trusted state, and a different root at a served size
-- is refused (audit.ErrFork). Append-only like tlog_checkpoints: the
-- runtime role may INSERT and SELECT, triggers enabled ALWAYS refuse
-- UPDATE, DELETE and TRUNCATE for everyone else.

-- +goose Up
CREATE TABLE tenant_checkpoints (
    tenant      text        NOT NULL,
    size        bigint      NOT NULL CHECK (size >= 1),
    root        bytea       NOT NULL CHECK (octet_length(root) = 32),
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    note        text        NOT NULL, -- the signed note, verbatim
    PRIMARY KEY (tenant, size)
);

CREATE TRIGGER tenant_checkpoints_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tenant_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tenant_checkpoints ENABLE ALWAYS TRIGGER tenant_checkpoints_append_only;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT ON tenant_checkpoints TO %I', rt);
    EXECUTE format('GRANT INSERT (tenant, size, root, note) ON tenant_checkpoints TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE tenant_checkpoints;
