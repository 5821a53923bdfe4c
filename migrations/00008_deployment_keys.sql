-- The deployment's keys that live outside the database: the
-- checkpoint (log) signing key, the key-encryption key and the cluster key.
-- Each row is one lifecycle step of one key, recorded by a node at start in
-- the same transaction as its key.created / key.rotated / key.revoked
-- ledger event (audit/postgres EnsureKey). The current key of a purpose is
-- its latest created or rotated row; a revoked key is never current again.
-- Only ids and digests are stored (a public key's SHA-256, a secret's
-- fingerprint): never a secret. Append-only like the ledger.

-- +goose Up
CREATE TABLE deployment_keys (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    purpose     text        NOT NULL CHECK (purpose IN ('checkpoint', 'kek', 'cluster')),
    key_id      text        NOT NULL CHECK (key_id ~ '^[a-z0-9-]{1,64}$'),
    digest      bytea       NOT NULL CHECK (octet_length(digest) = 32),
    op          text        NOT NULL CHECK (op IN ('created', 'rotated', 'revoked')),
    node        text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (purpose, key_id, op)
);

CREATE TRIGGER deployment_keys_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON deployment_keys
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE deployment_keys ENABLE ALWAYS TRIGGER deployment_keys_append_only;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT ON deployment_keys TO %I', rt);
    EXECUTE format('GRANT INSERT (purpose, key_id, digest, op, node) ON deployment_keys TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE deployment_keys;
