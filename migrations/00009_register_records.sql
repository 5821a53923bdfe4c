-- Everything the register shows under a hash: each notice
-- keeps its canonical register record (audit.NoticeRecord: recipient,
-- method, sent and recorded times, the text as sent), whose SHA-256 the
-- notice.sent ledger event names. Rows written before this migration have
-- no record; verifiers name them as unhashed.

-- +goose Up
ALTER TABLE incident_notices
    ADD COLUMN record        bytea,
    ADD COLUMN record_sha256 bytea CHECK (record_sha256 = sha256(record)),
    ADD CONSTRAINT incident_notices_record_pair CHECK ((record IS NULL) = (record_sha256 IS NULL));

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT INSERT (record, record_sha256) ON incident_notices TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE incident_notices DROP CONSTRAINT incident_notices_record_pair,
    DROP COLUMN record_sha256, DROP COLUMN record;
