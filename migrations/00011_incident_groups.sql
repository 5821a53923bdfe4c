-- Automatic incidents are grouped: detections from one cause
-- (source, check, model: audit.Detection.GroupKey) within a window join the
-- open entry that cause opened, as new hashed versions, instead of one entry
-- per failed request. group_key and group_until say which entry a detection
-- may join; the key is also in the entry's (hashed) content.
--
-- register_settings: the organisation and privacy officer the register
-- names, set through the admin API, one append-only row per version; its
-- canonical JSON (audit.RegisterSettings) is hashed by the
-- register.settings_set ledger event of the same transaction.

-- +goose Up
ALTER TABLE incidents
    ADD COLUMN group_key   text,
    ADD COLUMN group_until timestamptz,
    ADD CONSTRAINT incidents_group_pair CHECK ((group_key IS NULL) = (group_until IS NULL));
CREATE INDEX incidents_group ON incidents (group_key, group_until) WHERE group_key IS NOT NULL;

CREATE TABLE register_settings (
    version        integer     PRIMARY KEY CHECK (version >= 1),
    content        bytea       NOT NULL, -- RFC 8785 canonical JSON of audit.RegisterSettings
    content_sha256 bytea       NOT NULL CHECK (content_sha256 = sha256(content)),
    recorded_by    text        NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    ledger_seq     bigint      NOT NULL REFERENCES audit_events (seq)
);
CREATE TRIGGER register_settings_no_change BEFORE UPDATE OR DELETE OR TRUNCATE ON register_settings
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE register_settings ENABLE ALWAYS TRIGGER register_settings_no_change;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT INSERT (group_key, group_until) ON incidents TO %I', rt);
    EXECUTE format('GRANT SELECT, INSERT (version, content, content_sha256, recorded_by, ledger_seq) ON register_settings TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE register_settings;
DROP INDEX incidents_group;
ALTER TABLE incidents DROP CONSTRAINT incidents_group_pair, DROP COLUMN group_until, DROP COLUMN group_key;
