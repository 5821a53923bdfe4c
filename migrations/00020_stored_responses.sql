-- Stored responses of the Responses API. A response created
-- with store: true is kept here for its tenant, sealed (AES-256-GCM) under a
-- key derived from the key-encryption key for that tenant
-- (audit.StoredResponseKey): the text never reaches the ledger, which
-- records response.stored and response.deleted (id, request, SHA-256 of the
-- sealed blob, size) in the same transaction as the row's insert or delete.
-- Every read names the tenant: another tenant's id is not found.

-- +goose Up
CREATE TABLE stored_responses (
    id          text        PRIMARY KEY,
    tenant      text        NOT NULL,
    request     text        NOT NULL,
    sealed      bytea       NOT NULL, -- nonce ‖ AES-256-GCM(the response and its conversation)
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    ledger_seq  bigint      NOT NULL REFERENCES audit_events (seq)
);
CREATE INDEX stored_responses_tenant ON stored_responses (tenant, created_at);

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON stored_responses TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE stored_responses;
