package tenancy

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
)

// ErrBudgetUnavailable: the shared token budget could not be reached; the
// request is refused (fail closed), never admitted uncounted.
var ErrBudgetUnavailable = cloison.NewError(cloison.CodeUnavailable, "tenancy: quota store unavailable")

// Budget is the cluster-wide store of tokens-per-minute buckets a Limiter
// leases from (WithBudget). *Store implements it in PostgreSQL.
type Budget interface {
	// LeaseTokens refills tenant t's shared bucket (capacity perMinute,
	// refilled at perMinute per minute), adds giveBack (tokens a node
	// leased and did not use), and takes tokens from it: none when the
	// bucket holds less than atLeast, else the bucket's level up to
	// atMost. It returns the tokens taken and the level before taking.
	LeaseTokens(ctx context.Context, t cloison.TenantID, perMinute int, giveBack, atLeast, atMost float64) (granted, level float64, err error)
}

// LeaseTokens implements Budget with one atomic UPDATE on the tenant's row
// of tenant_token_buckets (made, full, on first use), on the database's
// clock: nodes' clocks do not matter. Errors: ErrBudgetUnavailable wrapping
// the database's error.
func (s *Store) LeaseTokens(ctx context.Context, t cloison.TenantID, perMinute int, giveBack, atLeast, atMost float64) (granted, level float64, err error) {
	const lease = `
WITH cur AS (
    SELECT tenant_id, LEAST($2::float8, tokens + $3::float8 +
               GREATEST(0, EXTRACT(EPOCH FROM clock_timestamp() - updated_at)::float8) * $2::float8 / 60) AS level
    FROM tenant_token_buckets WHERE tenant_id = $1 FOR UPDATE
), take AS (
    SELECT tenant_id, level, CASE WHEN level >= $4::float8 THEN LEAST(level, $5::float8) ELSE 0 END AS granted FROM cur
)
UPDATE tenant_token_buckets b SET tokens = GREATEST(0, take.level - take.granted), capacity = $2::float8, updated_at = clock_timestamp()
FROM take WHERE b.tenant_id = take.tenant_id
RETURNING take.granted, take.level`
	for range 2 {
		err = s.pool.QueryRow(ctx, lease, string(t), float64(perMinute), max(giveBack, 0), atLeast, atMost).Scan(&granted, &level)
		if err == nil {
			return granted, level, nil
		}
		if !isNoRows(err) {
			break
		}
		// First use: the bucket starts full (a new node or tenant gets
		// what a fresh single-node bucket would).
		if _, err = s.pool.Exec(ctx, `INSERT INTO tenant_token_buckets (tenant_id, capacity, tokens, updated_at)
VALUES ($1, $2, $2, clock_timestamp()) ON CONFLICT (tenant_id) DO NOTHING`, string(t), float64(perMinute)); err != nil {
			break
		}
	}
	return 0, 0, fmt.Errorf("%w: %w", ErrBudgetUnavailable, err)
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
