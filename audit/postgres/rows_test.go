package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

func tenantDoc(id string, maxConcurrent int, zeroing string) map[string]any {
	return map[string]any{"id": id, "name": "Acme", "status": "active", "tier": "shared", "zeroing": zeroing,
		"classification": "internal", "max_concurrent": maxConcurrent, "kv_pages": 64, "tokens_per_minute": 6000,
		"max_context": 0, "allowed_models": []string{"m"}, "incident_contact": "", "notice_deadline_hours": 0,
		"allowed_regions": []string{}, "required_node_tier": ""}
}

// What cloisonctl audit verify runs (Store.Verify) names a tenant row that
// is not what its last event states: raised by the runtime role through
// row_apply with an unsigned tenant.updated (its quotas and zeroing), and
// changed behind row_apply by the owner. Before live rows were bound to
// their events both passed verification.
func TestVerifyNamesRowsOffTheRecord(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, db.RuntimePool(t), dir, 5)
	if _, err := s.BeginSigning(ctx, "engine:node-1"); err != nil {
		t.Fatal(err)
	}
	state := func(prev uint64, doc map[string]any) []byte {
		st, err := audit.RowState(audit.RowTenants, prev, doc)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := state(0, tenantDoc("acme", 16, "cross-tenant"))
	d := audit.Sum(st)
	var made audit.Record
	if err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		made, err = s.ApplyTx(ctx, tx, audit.Event{OccurredAt: time.Now(), Tenant: "acme", Actor: "admin:alice",
			Payload: audit.TenantChange{Op: audit.TenantCreated, Tier: "shared", State: &d}}, st)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	verify := func() error {
		for i := range 5 {
			if _, err := s.Append(ctx, event("engine:node-1", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.SignTree(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), ExternalDir: dir})
		return err
	}
	if err := verify(); err != nil {
		t.Fatalf("verify as made: %v", err)
	}

	// The runtime role: its own event, no key.
	st = state(made.Seq, tenantDoc("acme", 24, "never"))
	d = audit.Sum(st)
	payload, err := audit.Event{OccurredAt: time.Now(), Tenant: "acme", Actor: "admin:mallory",
		Payload: audit.TenantChange{Op: audit.TenantUpdated, Tier: "shared", State: &d}}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var forged int64
	if err := db.RuntimePool(t).QueryRow(ctx, `SELECT seq FROM row_apply($1, $2)`, payload, st).Scan(&forged); err != nil {
		t.Fatalf("row_apply as the runtime role: %v", err)
	}
	got := breaksAt(t, verify())
	if !slices.Contains(got[uint64(forged)], audit.ReasonRowState) {
		t.Fatalf("after the forged update: breaks %v, want %s at seq %d", got, audit.ReasonRowState, forged)
	}

	// The owner, behind row_apply: the row disagrees with its event.
	if _, err := db.AdminPool(t).Exec(ctx, `UPDATE tenants SET kv_pages = 65 WHERE id = 'acme'`); err != nil {
		t.Fatal(err)
	}
	rows, err := Rows(ctx, s.pool, audit.RowTenants, "acme")
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows: %v, %v", rows, err)
	}
	if err := rows[0].Check(); err == nil {
		t.Fatal("an owner's UPDATE: the row still matches its event")
	}
}
