-- Automatic incidents are grouped (issue 13 §5): detections from one cause
-- (source, check, model: audit.Detection.GroupKey) within a window join the
-- open entry that cause opened, as new hashed versions, instead of one entry
-- per failed request. group_key and group_until say which entry a detection
-- may join; the key is also in the entry's (hashed) content.

-- +goose Up
ALTER TABLE incidents
    ADD COLUMN group_key   text,
    ADD COLUMN group_until timestamptz,
    ADD CONSTRAINT incidents_group_pair CHECK ((group_key IS NULL) = (group_until IS NULL));
CREATE INDEX incidents_group ON incidents (group_key, group_until) WHERE group_key IS NOT NULL;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT INSERT (group_key, group_until) ON incidents TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX incidents_group;
ALTER TABLE incidents DROP CONSTRAINT incidents_group_pair, DROP COLUMN group_until, DROP COLUMN group_key;
