package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Ledger appends audit events inside a Store transaction, so that every
// change and its ledger event commit together or not at all;
// *audit/postgres.Store is one.
type Ledger interface {
	AppendTx(ctx context.Context, tx pgx.Tx, events ...audit.Event) ([]audit.Record, error)
	// ApplyTx appends e and writes the tenant, client or key row that
	// state (audit.RowState, of which e's State is the digest) describes,
	// in one statement (row_apply), returning the database's own refusals
	// of the row unchanged.
	ApplyTx(ctx context.Context, tx pgx.Tx, e audit.Event, state []byte) (audit.Record, error)
}

// Ledger errors of the change methods.
var (
	// ErrNoLedger: a change asked of a Store that has no ledger (NewStore
	// without WithLedger). Nothing changed: an admin action is never made
	// outside the record.
	ErrNoLedger = cloison.NewError(cloison.CodeInternal, "tenancy: no ledger to record the change")
	// ErrLedger: the ledger could not record the change, so nothing
	// changed (the change and its event share one transaction).
	ErrLedger = cloison.NewError(cloison.CodeUnavailable, "tenancy: the audit ledger did not record the change; nothing changed")
)

// WithLedger returns a Store that ledgers every change through l, in the
// change's own transaction. The copy shares the pool.
func (s *Store) WithLedger(l Ledger) *Store {
	c := *s
	c.ledger = l
	return &c
}

type actorKey struct{}

// WithActor returns ctx carrying the ledger actor ("admin:alice",
// "cli:bob", "engine:node-1") of the changes made with it; without one the
// actor is "system".
func WithActor(ctx context.Context, actor audit.Name) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

func actorOf(ctx context.Context) audit.Name {
	if a, ok := ctx.Value(actorKey{}).(audit.Name); ok && audit.CheckName("actor", string(a)) == nil {
		return a
	}
	return "system"
}

// record appends payloads (of tenant, "" for platform events) inside tx.
// Call it last in tx: it takes the ledger's lock.
func (s *Store) record(ctx context.Context, tx pgx.Tx, tenant cloison.TenantID, payloads ...audit.Payload) error {
	if s.ledger == nil {
		return ErrNoLedger
	}
	now, actor := time.Now(), actorOf(ctx)
	events := make([]audit.Event, len(payloads))
	for i, p := range payloads {
		events[i] = audit.Event{OccurredAt: now, Tenant: tenant, Actor: actor, Payload: p}
	}
	if _, err := s.ledger.AppendTx(ctx, tx, events...); err != nil {
		return fmt.Errorf("%w: %w", ErrLedger, err)
	}
	return nil
}

// tenantDigest is the config digest a tenant event carries: SHA-256 of the
// record's JSON (names and quotas, never request content), timestamps
// left out (the database sets them as it writes the row).
func tenantDigest(t Tenant) audit.Digest {
	t.CreatedAt, t.UpdatedAt = time.Time{}, time.Time{}
	b, _ := json.Marshal(t)
	return sha256.Sum256(b)
}

func tenantEvent(op audit.TenantOp, t Tenant) audit.TenantChange {
	return audit.TenantChange{Op: op, Tier: audit.Name(t.Tier.String()), ConfigDigest: tenantDigest(t)}
}

func clientEvent(op audit.ClientOp, c Client) audit.ClientChange {
	scopes := make([]audit.Name, len(c.Scopes))
	for i, sc := range c.Scopes {
		scopes[i] = audit.Name(sc)
	}
	return audit.ClientChange{Op: op, Client: audit.Name(c.ID), Scopes: scopes}
}

func keyEvent(op audit.KeyOp, kid string, public []byte) audit.KeyChange {
	return audit.KeyChange{Op: op, Key: audit.Name(kid), Purpose: "jwt", PublicKeyDigest: sha256.Sum256(public)}
}
