-- Reports of suspicious responses. A tenant reports one of its
-- own requests; the report opens a potential incident (source
-- 'tenant_report', status under_assessment) in the same transaction as its
-- report.received ledger event. The text the tenant found foreign, if it
-- sent any, is stored here only, sealed (AES-256-GCM) under a key derived
-- from the key-encryption key for the report's tenant: never in the ledger,
-- readable through the compliance API of that tenant only. One report per
-- (tenant, request): the unique key deduplicates. Rows are append-only
-- except the replay verdict, which the report.replayed ledger event of the
-- same transaction records.

-- +goose Up
ALTER TABLE incidents DROP CONSTRAINT incidents_source_check;
ALTER TABLE incidents ADD CONSTRAINT incidents_source_check
    CHECK (source IN ('isolation_violation', 'transfer_verification_failed', 'admin', 'tenant_report'));

CREATE TABLE response_reports (
    id          text        PRIMARY KEY,
    tenant      text        NOT NULL,
    request     text        NOT NULL,
    reason      text        NOT NULL,
    sealed      bytea,      -- nonce ‖ AES-256-GCM(details and foreign text), NULL when none was sent
    incident_id text        NOT NULL REFERENCES incidents (id),
    received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ledger_seq  bigint      NOT NULL REFERENCES audit_events (seq),
    verdict     text,       -- the last replay's verdict, NULL before any
    UNIQUE (tenant, request)
);
CREATE INDEX response_reports_tenant_time ON response_reports (tenant, received_at);

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT, INSERT ON response_reports TO %I', rt);
    EXECUTE format('GRANT UPDATE (verdict) ON response_reports TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE response_reports;
ALTER TABLE incidents DROP CONSTRAINT incidents_source_check;
ALTER TABLE incidents ADD CONSTRAINT incidents_source_check
    CHECK (source IN ('isolation_violation', 'transfer_verification_failed', 'admin'));
