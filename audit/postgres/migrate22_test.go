package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/migrations"
)

// auditEventIndexes returns the names of audit_events' indexes.
func auditEventIndexes(t *testing.T, q querier) map[string]bool {
	t.Helper()
	rows, err := q.Query(context.Background(), "SELECT indexname FROM pg_indexes WHERE tablename = 'audit_events'")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// A ledger written under migrations 00001-00021 (direct and staged
// appends, a tree note; legacyLedger) migrates forward through 00022 with
// its data, and the two dropped indexes are gone; migrated on to the
// latest schema, the chain and the tree verify, old entries keep their
// inclusion proofs under a note signed after more appends
// (checkMigratedLedger).
func TestMigration22KeepsLedger(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewAt(t, 21)
	admin := db.AdminPool(t)
	before := auditEventIndexes(t, admin)
	for _, n := range []string{"audit_events_pkey", "audit_events_hash_key", "audit_events_tenant_seq", "audit_events_kind_seq"} {
		if !before[n] {
			t.Fatalf("migrated to 00021: no index %s (have %v)", n, before)
		}
	}
	first, note := legacyLedger(t, db, 400, 1)
	applied, err := migrations.UpTo(ctx, db.AdminURL, db.Roles, 22)
	if err != nil || fmt.Sprint(applied) != "[22]" {
		t.Fatalf("migrate forward: applied %v, %v; want [22]", applied, err)
	}
	after := auditEventIndexes(t, admin)
	if after["audit_events_hash_key"] || after["audit_events_tenant_seq"] || !after["audit_events_pkey"] || !after["audit_events_kind_seq"] {
		t.Fatalf("after 00022: indexes %v", after)
	}

	if _, err := migrations.Up(ctx, db.AdminURL, db.Roles); err != nil {
		t.Fatal(err)
	}
	checkMigratedLedger(t, db, first, note, 400, 1)
}

// Without UNIQUE (hash) (dropped by 00022) an event whose hash repeats an
// earlier one is still refused, for the owner, a superuser and replica
// mode (the runtime role may not insert events at all): the chain trigger
// recomputes each inserted hash from its seq, so a repeated hash is a
// wrong hash (CL003 → ErrChainRejected), before any tree check.
func TestRepeatedHashRefusedWithoutUniqueIndex(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	appendAll(t, s, requestEvents(0, 20))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	head, err := headOn(ctx, db.AdminPool(t))
	if err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
		SELECT $1, occurred_at, kind, tenant, actor, payload, $2, hash FROM audit_events WHERE seq = 5`
	admin := db.AdminPool(t)
	for _, role := range []string{"RESET ROLE", "SET ROLE " + db.Roles.Owner, "SET session_replication_role = replica"} {
		err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, role); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, ins, int64(head.Seq)+1, head.Hash[:])
			return err
		})
		if sqlstate(err) != "CL003" || !errors.Is(translate(err), ErrChainRejected) {
			t.Errorf("%s: a repeated hash: got %v, want CL003 (ErrChainRejected)", role, err)
		}
	}
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), ChainOnly: true})
	if err != nil || res.Events != 20 {
		t.Fatalf("verify: %+v %v", res, err)
	}
}
