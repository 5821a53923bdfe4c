-- The adapters:write scope: an API client of a tenant may carry it, so
-- that the tenant uploads its own LoRA adapters (POST /v1/adapters) without
-- the admin scope.

-- +goose Up
ALTER TABLE api_clients DROP CONSTRAINT api_clients_scopes_check;
ALTER TABLE api_clients ADD CONSTRAINT api_clients_scopes_check
    CHECK (scopes <@ ARRAY['infer', 'compliance:read', 'compliance:write', 'admin', 'adapters:write']::text[]);

-- +goose Down
ALTER TABLE api_clients DROP CONSTRAINT api_clients_scopes_check;
ALTER TABLE api_clients ADD CONSTRAINT api_clients_scopes_check
    CHECK (scopes <@ ARRAY['infer', 'compliance:read', 'compliance:write', 'admin']::text[]);
