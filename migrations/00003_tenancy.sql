-- Tenancy: tenants, their API clients, and the JWT signing keys.
-- Objects are created by the owner role (migrations run with SET ROLE owner);
-- the runtime role, named by the session setting cloison.runtime_role, may
-- SELECT, INSERT and UPDATE (named columns only), never DELETE or TRUNCATE:
-- a tenant is suspended, a client revoked, a key retired — nothing vanishes.

-- +goose Up
CREATE TABLE tenants (
    id                   text        PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name                 text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    status               text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    tier                 text        NOT NULL CHECK (tier IN ('shared', 'dedicated')),
    zeroing              text        NOT NULL CHECK (zeroing IN ('never', 'cross-tenant', 'always')),
    classification       text        NOT NULL CHECK (classification IN ('public', 'internal', 'confidential', 'personal')),
    max_concurrent       integer     NOT NULL CHECK (max_concurrent >= 1),
    kv_pages             integer     NOT NULL CHECK (kv_pages >= 1),
    tokens_per_minute    integer     NOT NULL CHECK (tokens_per_minute >= 1),
    max_context          integer     NOT NULL DEFAULT 0 CHECK (max_context >= 0), -- 0: the engine's served context
    allowed_models       text[]      NOT NULL DEFAULT '{}' CHECK (array_position(allowed_models, NULL) IS NULL),
    incident_contact     text        NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Personal or confidential data is never served from shared pages or
    -- from pages that another request could have left dirty (the policy
    -- bundle enforces the same rule at decision time).
    CONSTRAINT tenants_sensitive_isolated CHECK (
        classification NOT IN ('confidential', 'personal') OR (tier = 'dedicated' AND zeroing = 'always'))
);

CREATE TABLE api_clients (
    id         text        PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'), -- the JWT sub
    tenant_id  text        NOT NULL REFERENCES tenants (id),
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    scopes     text[]      NOT NULL CHECK (scopes <@ ARRAY['infer', 'compliance:read', 'compliance:write', 'admin']::text[]),
    status     text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_at timestamptz,
    CHECK ((status = 'revoked') = (revoked_at IS NOT NULL))
);
CREATE INDEX api_clients_tenant ON api_clients (tenant_id);

-- Ed25519 signing keys of an issuer. Life cycle: next → current → previous
-- → retired, one way. next, current and previous verify (next is published
-- in the JWKS before it signs; previous keeps verifying the tokens it signed
-- until the following rotation); only current signs; retired never verifies.
CREATE TABLE signing_keys (
    kid          text        PRIMARY KEY CHECK (length(kid) BETWEEN 1 AND 128),
    issuer       text        NOT NULL CHECK (length(issuer) BETWEEN 1 AND 512),
    algorithm    text        NOT NULL DEFAULT 'EdDSA' CHECK (algorithm = 'EdDSA'),
    public_key   bytea       NOT NULL CHECK (octet_length(public_key) = 32),
    -- AES-256-GCM sealed Ed25519 seed (nonce || ciphertext), additional data
    -- binding it to kid and issuer; the key-encryption key never enters the
    -- database (see tenancy.LoadKEK).
    sealed_private bytea     NOT NULL CHECK (octet_length(sealed_private) = 12 + 32 + 16),
    state        text        NOT NULL CHECK (state IN ('next', 'current', 'previous', 'retired')),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    activated_at timestamptz,
    retired_at   timestamptz,
    CHECK ((state = 'retired') = (retired_at IS NOT NULL))
);
CREATE UNIQUE INDEX signing_keys_one_next ON signing_keys (issuer) WHERE state = 'next';
CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys (issuer) WHERE state = 'current';
CREATE UNIQUE INDEX signing_keys_one_previous ON signing_keys (issuer) WHERE state = 'previous';

-- A retired key never comes back, and key material never changes.
-- +goose StatementBegin
CREATE FUNCTION signing_keys_one_way() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kid <> OLD.kid OR NEW.issuer <> OLD.issuer OR NEW.public_key <> OLD.public_key
       OR NEW.sealed_private <> OLD.sealed_private THEN
        RAISE EXCEPTION USING ERRCODE = 'CL010', MESSAGE = 'signing key material is immutable';
    END IF;
    IF array_position(ARRAY['next', 'current', 'previous', 'retired'], NEW.state)
       < array_position(ARRAY['next', 'current', 'previous', 'retired'], OLD.state) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL011',
            MESSAGE = format('signing key %s: %s → %s goes backwards', OLD.kid, OLD.state, NEW.state);
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER signing_keys_one_way BEFORE UPDATE ON signing_keys
    FOR EACH ROW EXECUTE FUNCTION signing_keys_one_way();

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT ON tenants, api_clients, signing_keys TO %I', rt);
    -- created_at / updated_at / revoked_at / activated_at / retired_at are the
    -- database's clock; the runtime sets them with clock_timestamp() only.
    EXECUTE format('GRANT INSERT (id, name, status, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute, max_context, allowed_models, incident_contact) ON tenants TO %I', rt);
    EXECUTE format('GRANT UPDATE (name, status, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute, max_context, allowed_models, incident_contact, updated_at) ON tenants TO %I', rt);
    EXECUTE format('GRANT INSERT (id, tenant_id, name, scopes) ON api_clients TO %I', rt);
    EXECUTE format('GRANT UPDATE (status, revoked_at) ON api_clients TO %I', rt);
    EXECUTE format('GRANT INSERT (kid, issuer, public_key, sealed_private, state, activated_at) ON signing_keys TO %I', rt);
    EXECUTE format('GRANT UPDATE (state, activated_at, retired_at) ON signing_keys TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE signing_keys;
DROP FUNCTION signing_keys_one_way();
DROP TABLE api_clients;
DROP TABLE tenants;
