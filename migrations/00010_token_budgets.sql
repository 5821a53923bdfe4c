-- Cluster-wide tokens-per-minute buckets (tenancy.Store.LeaseTokens): one
-- row per tenant, a token bucket of `capacity` tokens refilled at capacity
-- per minute on the database's clock. Nodes lease tokens from it in chunks
-- with one atomic UPDATE, so N nodes admit a tenant's quota once (plus the
-- burst tenancy documents), not N times. Counters, not a record: the
-- runtime role may SELECT, INSERT and UPDATE the counter columns, never
-- DELETE or TRUNCATE.

-- +goose Up
CREATE TABLE tenant_token_buckets (
    tenant_id  text             PRIMARY KEY REFERENCES tenants (id),
    capacity   double precision NOT NULL CHECK (capacity > 0),
    tokens     double precision NOT NULL CHECK (tokens >= 0),
    updated_at timestamptz      NOT NULL
);

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT (tenant_id, capacity, tokens, updated_at), UPDATE (capacity, tokens, updated_at) ON tenant_token_buckets TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE tenant_token_buckets;
