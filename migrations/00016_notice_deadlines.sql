-- A tenant's contractual incident-notice deadline: the hours
-- within which the art. 18.3 notice of an incident naming the tenant must
-- be sent, counted from the register version that first names it. 0: the
-- contract sets none. Changed like every tenant field, with tenant.updated
-- in the same transaction (its config digest covers this column).

-- +goose Up
ALTER TABLE tenants ADD COLUMN notice_deadline_hours integer NOT NULL DEFAULT 0
    CHECK (notice_deadline_hours BETWEEN 0 AND 8760);

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT INSERT (notice_deadline_hours), UPDATE (notice_deadline_hours) ON tenants TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE tenants DROP COLUMN notice_deadline_hours;
