package postgres

import (
	"context"
	"errors"
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

// A ledger written under migrations 00001-00021 (staged appends, AppendTx,
// checkpoints, tree notes) migrates forward through 00022 with its data:
// the chain, its checkpoints and the stored tree verify after it, old
// entries keep their inclusion proofs under a note signed after more
// appends, and the two dropped indexes are gone.
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
	dir := t.TempDir()
	s := openStore(t, db.RuntimePool(t), dir, 100)
	for i := 0; i < 150; i++ {
		if _, err := s.Stage(ctx, event("old", i)); err != nil {
			t.Fatal(err)
		}
	}
	appendAll(t, s, requestEvents(0, 150))
	old, err := s.Append(ctx, event("old", 1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	applied, err := migrations.Up(ctx, db.AdminURL, db.Roles) // through 00022 and any later one (this build's store needs them)
	if err != nil || len(applied) == 0 || applied[0] != 22 {
		t.Fatalf("migrate forward: applied %v, %v; want 22 first", applied, err)
	}
	after := auditEventIndexes(t, admin)
	if after["audit_events_hash_key"] || after["audit_events_tenant_seq"] || !after["audit_events_pkey"] || !after["audit_events_kind_seq"] {
		t.Fatalf("after 00022: indexes %v", after)
	}

	s2 := openStore(t, db.RuntimePool(t), dir, 100)
	for i := 0; i < 100; i++ {
		if _, err := s2.Stage(ctx, event("new", i)); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := s2.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s2.Verify(ctx, VerifyOptions{Keys: testKeys()})
	if err != nil || res.Events != 401 {
		t.Fatalf("verify after 00022: %+v %v, want 401 events", res, err)
	}
	th, err := s2.VerifyTree(ctx)
	if err != nil || th.Size != 401 {
		t.Fatalf("tree after 00022: %+v %v", th, err)
	}
	proof, err := s2.InclusionProof(ctx, old.Seq, th.Size)
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := s2.TreeVerifierKey()
	if got, err := audit.VerifyInclusion(cp, vkey, old, proof); err != nil || got.Size != th.Size || got.Root != th.Root {
		t.Fatalf("inclusion of seq %d written before 00022: %+v %v", old.Seq, got, err)
	}
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
	res, err := s.Verify(ctx, VerifyOptions{Keys: testKeys(), ChainOnly: true})
	if err != nil || res.Events != 20 {
		t.Fatalf("verify: %+v %v", res, err)
	}
}
