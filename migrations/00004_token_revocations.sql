-- Token revocation list: one bearer token (by issuer and jti) that must stop
-- verifying before it expires. The verifier reads it on every request (with
-- a short cache); a row is kept until well after expires_at and never
-- updated. The runtime role may SELECT and INSERT (named columns; revoked_at
-- is the database's clock), never UPDATE, DELETE or TRUNCATE.

-- +goose Up
CREATE TABLE revoked_tokens (
    issuer     text        NOT NULL CHECK (length(issuer) BETWEEN 1 AND 128),
    jti        text        NOT NULL CHECK (jti ~ '^[A-Za-z0-9_-]{1,128}$'),
    tenant_id  text        REFERENCES tenants (id),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (issuer, jti)
);

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT ON revoked_tokens TO %I', rt);
    EXECUTE format('GRANT INSERT (issuer, jti, tenant_id, expires_at) ON revoked_tokens TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE revoked_tokens;
