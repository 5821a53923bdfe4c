-- A tenant's residency: the node regions its data may be
-- processed in (empty: any) and the node tier it requires (empty: any).
-- Nodes carry the matching labels in their capacity attestation
-- (cloisond --node-region, --node-tier); admission refuses a request no
-- compliant node can serve, and a decode node sends a prompt only to a
-- prefill node the residency allows. Changed like every tenant field, with
-- tenant.updated in the same transaction (its config digest covers these
-- columns). Values are DNS labels, as attest.ValidLabel checks.

-- +goose Up
ALTER TABLE tenants
    ADD COLUMN allowed_regions text[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(allowed_regions) <= 64
               AND array_position(allowed_regions, NULL) IS NULL
               AND array_position(allowed_regions, '') IS NULL
               AND array_to_string(allowed_regions, ',') ~ '^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(,|$))*$'),
    ADD COLUMN required_node_tier text NOT NULL DEFAULT ''
        CHECK (required_node_tier ~ '^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?$');

-- +goose StatementBegin
DO $$
DECLARE rt text := current_setting('cloison.runtime_role');
BEGIN
    EXECUTE format('GRANT INSERT (allowed_regions, required_node_tier), UPDATE (allowed_regions, required_node_tier) ON tenants TO %I', rt);
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE tenants DROP COLUMN required_node_tier, DROP COLUMN allowed_regions;
