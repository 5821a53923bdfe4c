-- Witness cosignatures of the tree checkpoints: each row is a
-- C2SP tlog-cosignature line a witness returned for the stored checkpoint
-- of that size, verified against the witness's key before it is inserted
-- (audit/witness). Append-only like tlog_checkpoints: the runtime role may
-- INSERT and SELECT; a trigger enabled ALWAYS refuses UPDATE, DELETE and
-- TRUNCATE for everyone else. A cosignature is public data (a signature on
-- a public checkpoint); deleting one only weakens what can be shown.

-- +goose Up
CREATE TABLE tlog_cosignatures (
    size        bigint      NOT NULL REFERENCES tlog_checkpoints (size),
    witness     text        NOT NULL CHECK (witness <> '' AND witness !~ '[[:space:]+]'),
    signature   text        NOT NULL CHECK (signature ~ '^— [^[:space:]]+ [A-Za-z0-9+/=]+(\n— [^[:space:]]+ [A-Za-z0-9+/=]+)*\n$'),
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (size, witness)
);

CREATE TRIGGER tlog_cosignatures_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_cosignatures
    FOR EACH STATEMENT EXECUTE FUNCTION cloison_refuse_change();
ALTER TABLE tlog_cosignatures ENABLE ALWAYS TRIGGER tlog_cosignatures_append_only;

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT SELECT ON tlog_cosignatures TO %I', rt);
    EXECUTE format('GRANT INSERT (size, witness, signature) ON tlog_cosignatures TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE tlog_cosignatures;
