-- The Loi 25 confidentiality-incident register. Entries are kept up to date
-- by appending versions (never by updating a row); each version's canonical
-- JSON is stored verbatim and its SHA-256 chained into the ledger. Notices
-- are child records. Every row is kept at least five years after the date,
-- or the end of the period, of awareness; only cloison_incident_purge, after
-- that date and with its ledger event, may delete.

-- +goose Up
CREATE TABLE incidents (
    id          text        PRIMARY KEY,
    source      text        NOT NULL CHECK (source IN ('isolation_violation', 'transfer_verification_failed', 'admin')),
    opened_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    opened_by   text        NOT NULL,
    ledger_seq  bigint      NOT NULL REFERENCES audit_events (seq)
);

CREATE TABLE incident_versions (
    incident_id     text        NOT NULL REFERENCES incidents (id),
    version         integer     NOT NULL CHECK (version >= 1),
    recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    recorded_by     text        NOT NULL,
    content         bytea       NOT NULL, -- RFC 8785 canonical JSON of audit.IncidentVersion
    content_sha256  bytea       NOT NULL CHECK (content_sha256 = sha256(content)),
    ledger_seq      bigint      NOT NULL REFERENCES audit_events (seq),
    -- Derived from content by incident_versions_derive (never from the client):
    status          text        NOT NULL,
    assessment      text        NOT NULL,
    awareness_start date        NOT NULL,
    awareness_end   date,
    retain_until    date        NOT NULL,
    PRIMARY KEY (incident_id, version)
);

CREATE TABLE incident_notices (
    incident_id    text        NOT NULL REFERENCES incidents (id),
    notice_no      integer     NOT NULL CHECK (notice_no >= 1),
    recipient_kind text        NOT NULL CHECK (recipient_kind IN ('cai', 'persons', 'public', 'foreign_authority', 'tenant')),
    recipient      text        NOT NULL,
    tenant         text,
    sent_at        timestamptz NOT NULL,
    method         text        NOT NULL,
    content_sha256 bytea       NOT NULL CHECK (octet_length(content_sha256) = 32),
    recorded_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    recorded_by    text        NOT NULL,
    ledger_seq     bigint      NOT NULL REFERENCES audit_events (seq),
    PRIMARY KEY (incident_id, notice_no),
    CHECK (recipient_kind <> 'tenant' OR tenant IS NOT NULL)
);

-- +goose StatementBegin
CREATE FUNCTION incident_versions_derive() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    c    jsonb := convert_from(NEW.content, 'UTF8')::jsonb;
    prev integer;
BEGIN
    IF c->>'incident' IS DISTINCT FROM NEW.incident_id OR (c->>'version')::integer IS DISTINCT FROM NEW.version THEN
        RAISE EXCEPTION USING ERRCODE = 'CL004', MESSAGE = 'incident version content names another incident or version';
    END IF;
    SELECT max(v.version) INTO prev FROM incident_versions v WHERE v.incident_id = NEW.incident_id;
    IF NEW.version <> coalesce(prev, 0) + 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'CL005',
            MESSAGE = format('incident %s: version %s does not follow %s', NEW.incident_id, NEW.version, coalesce(prev, 0));
    END IF;
    NEW.status          := c->>'status';
    NEW.assessment      := c->'assessment'->>'status';
    NEW.awareness_start := (c->'awareness'->>'start')::date;
    NEW.awareness_end   := nullif(c->'awareness'->>'end', '')::date;
    NEW.retain_until    := (coalesce(NEW.awareness_end, NEW.awareness_start) + interval '5 years')::date;
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER incident_versions_derive BEFORE INSERT ON incident_versions
    FOR EACH ROW EXECUTE FUNCTION incident_versions_derive();
ALTER TABLE incident_versions ENABLE ALWAYS TRIGGER incident_versions_derive;

-- No UPDATE, no TRUNCATE, ever.
CREATE TRIGGER incidents_no_update BEFORE UPDATE OR TRUNCATE ON incidents
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
CREATE TRIGGER incident_versions_no_update BEFORE UPDATE OR TRUNCATE ON incident_versions
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
CREATE TRIGGER incident_notices_no_update BEFORE UPDATE OR TRUNCATE ON incident_notices
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE incidents ENABLE ALWAYS TRIGGER incidents_no_update;
ALTER TABLE incident_versions ENABLE ALWAYS TRIGGER incident_versions_no_update;
ALTER TABLE incident_notices ENABLE ALWAYS TRIGGER incident_notices_no_update;

-- DELETE only inside cloison_incident_purge (which sets cloison.purging to
-- the incident id) and only once every version's retention has ended.
-- +goose StatementBegin
CREATE FUNCTION incident_refuse_early_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    id   text := to_jsonb(OLD)->>TG_ARGV[0]; -- the incident id column: 'id' or 'incident_id'
    keep date;
BEGIN
    IF current_setting('cloison.purging', true) IS DISTINCT FROM id THEN
        RAISE EXCEPTION USING ERRCODE = 'CL002',
            MESSAGE = format('%s: incident %s may only be removed by cloison_incident_purge', TG_TABLE_NAME, id);
    END IF;
    SELECT max(v.retain_until) INTO keep FROM incident_versions v WHERE v.incident_id = id;
    IF keep IS NOT NULL AND keep > current_date THEN
        RAISE EXCEPTION USING ERRCODE = 'CL002',
            MESSAGE = format('incident %s must be kept until %s (five years after awareness)', id, keep);
    END IF;
    RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER incidents_retention BEFORE DELETE ON incidents
    FOR EACH ROW EXECUTE FUNCTION incident_refuse_early_delete('id');
CREATE TRIGGER incident_versions_retention BEFORE DELETE ON incident_versions
    FOR EACH ROW EXECUTE FUNCTION incident_refuse_early_delete('incident_id');
CREATE TRIGGER incident_notices_retention BEFORE DELETE ON incident_notices
    FOR EACH ROW EXECUTE FUNCTION incident_refuse_early_delete('incident_id');
ALTER TABLE incidents ENABLE ALWAYS TRIGGER incidents_retention;
ALTER TABLE incident_versions ENABLE ALWAYS TRIGGER incident_versions_retention;
ALTER TABLE incident_notices ENABLE ALWAYS TRIGGER incident_notices_retention;

-- The explicit, ledgered purge: the caller has appended an incident.purged
-- event naming the incident in this same transaction. Not granted to the
-- runtime role: an administrator connected as the owner runs it.
-- +goose StatementBegin
CREATE FUNCTION cloison_incident_purge(p_id text, p_ledger_seq bigint) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE n integer := 0; k integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM audit_events e WHERE e.seq = p_ledger_seq AND e.kind = 'incident.purged'
                   AND convert_from(e.payload, 'UTF8')::jsonb->'data'->>'incident' = p_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'CL002', MESSAGE = format('purge of %s has no incident.purged ledger event at seq %s', p_id, p_ledger_seq);
    END IF;
    PERFORM set_config('cloison.purging', p_id, true);
    DELETE FROM incident_notices WHERE incident_id = p_id;
    GET DIAGNOSTICS k = ROW_COUNT; n := n + k;
    DELETE FROM incident_versions WHERE incident_id = p_id;
    GET DIAGNOSTICS k = ROW_COUNT; n := n + k;
    DELETE FROM incidents WHERE id = p_id;
    GET DIAGNOSTICS k = ROW_COUNT; n := n + k;
    PERFORM set_config('cloison.purging', '', true);
    RETURN n;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION cloison_incident_purge(text, bigint) FROM PUBLIC;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT ON incidents, incident_versions, incident_notices TO %I', rt);
    -- recorded_at / opened_at are the database's clock, never the client's.
    EXECUTE format('GRANT INSERT (id, source, opened_by, ledger_seq) ON incidents TO %I', rt);
    EXECUTE format('GRANT INSERT (incident_id, notice_no, recipient_kind, recipient, tenant, sent_at, method, content_sha256, recorded_by, ledger_seq) ON incident_notices TO %I', rt);
    -- Derived columns are the trigger's to set.
    EXECUTE format('GRANT INSERT (incident_id, version, recorded_by, content, content_sha256, ledger_seq) ON incident_versions TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE incident_notices;
DROP TABLE incident_versions;
DROP TABLE incidents;
DROP FUNCTION cloison_incident_purge(text, bigint);
DROP FUNCTION incident_refuse_early_delete();
DROP FUNCTION incident_versions_derive();
