-- Ledger throughput: fewer index entries per event.
--
-- Every sequenced event inserted one entry into each of audit_events' four
-- indexes. Two of them no query uses:
--
--   - audit_events_hash_key (UNIQUE (hash)): 32 random bytes per key, so
--     every insert lands on a random leaf page of a B-tree as large as the
--     table's hashes, dirtying (and after each checkpoint WAL-logging whole)
--     pages all over it; the sequential seq index, by contrast, appends to
--     its rightmost page. Uniqueness never depended on it: each hash
--     commits to its seq (audit.HashEvent), seqs are the primary key, and
--     audit_events_check_chain (00001) recomputes every hash of every
--     inserted batch, so a duplicate hash is a SHA-256 collision.
--   - audit_events_tenant_seq: no reader selects events by tenant (the
--     tenant logs of 00013 and request_entries of 00021 are read instead;
--     their indexer reads the ledger in seq order).
--
-- audit_events_kind_seq stays: the register's verification and the
-- register settings read events by kind. Nothing else changes: the
-- triggers, the privileges and every stored row are as before, so a
-- database migrated by 00001-00021 migrates forward with its data as is.

-- +goose Up
ALTER TABLE audit_events DROP CONSTRAINT audit_events_hash_key;
DROP INDEX audit_events_tenant_seq;

-- +goose Down
CREATE INDEX audit_events_tenant_seq ON audit_events (tenant, seq) WHERE tenant IS NOT NULL;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_hash_key UNIQUE (hash);
