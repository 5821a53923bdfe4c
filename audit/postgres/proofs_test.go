package postgres

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// Verify fails, never warns, on the tampering a ledger must name: an empty
// ledger; every checkpoint deleted and the chain rewritten; a tail deleted
// after the last stored checkpoint (detected only against a trusted tree
// note the verifier kept, and then named).
func TestVerifyRefusesUnvouchedLedger(t *testing.T) {
	ctx := context.Background()
	// verifier opens the database without a key: it signs nothing.
	verifier := func(t *testing.T, db *pgtest.DB) *Store {
		s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	// honest writes 40 events; checkpoints (chain and tree) at 30; the
	// verifier's trusted tree note is taken at 40.
	honest := func(t *testing.T) (*pgtest.DB, []audit.Record, []byte) {
		db := pgtest.New(t)
		s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
		for i := 1; i <= 40; i++ {
			rec, err := s.Append(ctx, event("honest", i))
			if err != nil {
				t.Fatal(err)
			}
			if i == 30 {
				if _, err := s.Checkpoint(ctx, rec.Head()); err != nil {
					t.Fatal(err)
				}
				if _, err := s.SignTree(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		trusted, err := s.SignTree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var recs []audit.Record
		if err := s.Scan(ctx, 1, 0, func(r audit.Record) error { recs = append(recs, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return db, recs, trusted
	}
	deleteTail := func(t *testing.T, db *pgtest.DB) {
		treeSuperuser(t, db.AdminPool(t), append([]string{"DELETE FROM audit_events WHERE seq > 30",
			"DELETE FROM tlog_checkpoints WHERE size > 30", "DELETE FROM audit_checkpoints WHERE size > 30"},
			pgtest.TruncateTreeSQL(30)...)...)
	}
	rewrite := func(t *testing.T, db *pgtest.DB, recs []audit.Record) {
		r, err := event("rewritten", 10).Prepare()
		if err != nil {
			t.Fatal(err)
		}
		recs[9] = r
		rewriteLedger(t, db.AdminPool(t), recs)
		treeSuperuser(t, db.AdminPool(t), "DELETE FROM audit_checkpoints")
	}

	t.Run("empty ledger", func(t *testing.T) {
		db := pgtest.New(t)
		if _, err := verifier(t, db).Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); !errors.Is(err, audit.ErrEmptyLedger) {
			t.Errorf("got %v, want ErrEmptyLedger", err)
		}
	})
	t.Run("honest", func(t *testing.T) {
		db, _, trusted := honest(t)
		res, err := verifier(t, db).Verify(ctx, audit.VerifyOptions{Keys: testKeys(), Trusted: trusted})
		if err != nil || res.Events != 40 || res.TreeNotes != 2 {
			t.Errorf("got %v (%v), want 40 events and 2 tree notes matched", res, err)
		}
	})
	t.Run("checkpoints deleted and chain rewritten", func(t *testing.T) {
		db, recs, trusted := honest(t)
		rewrite(t, db, recs)
		s := verifier(t, db)
		if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); !errors.Is(err, audit.ErrNoCheckpoint) {
			t.Errorf("without trusted state: got %v, want ErrNoCheckpoint", err)
		}
		if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), Trusted: trusted}); !errors.Is(err, audit.ErrFork) {
			t.Errorf("with trusted state: got %v, want ErrFork", err)
		}
	})
	t.Run("chain rewritten, its old tree note kept", func(t *testing.T) {
		db, recs, trusted := honest(t)
		rewrite(t, db, recs)
		h, err := audit.OpenTreeHead(trusted, mustVerifierKey(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AdminPool(t).Exec(ctx, "INSERT INTO tlog_checkpoints (size, root, signed_at, note) VALUES ($1, $2, now(), $3)",
			int64(h.Size), h.Root[:], string(trusted)); err != nil {
			t.Fatal(err)
		}
		_, err = verifier(t, db).Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
		var be *audit.BreakError
		if !errors.As(err, &be) || be.Reason != audit.ReasonCheckpoint || be.Seq != 40 {
			t.Errorf("got %v, want a break at 40 (checkpoint)", err)
		}
	})
	t.Run("tail deleted after the last checkpoint", func(t *testing.T) {
		db, _, trusted := honest(t)
		deleteTail(t, db)
		s := verifier(t, db)
		// The database alone cannot show it: what remains is vouched for.
		if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
			t.Errorf("without trusted state: got %v, want the remaining 30 vouched for", err)
		}
		if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), Trusted: trusted}); !errors.Is(err, audit.ErrSmallerTree) {
			t.Errorf("with trusted state: got %v, want ErrSmallerTree", err)
		}
	})
}

// A tenant's log on the database: positions 1..n among its own entries,
// each payload its own, each proof checking against its signed tenant
// checkpoint; another tenant's sizes and an empty tenant log are refused.
func TestTenantProofsOnDatabase(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	for i := 1; i <= 50; i++ {
		if _, err := s.Append(ctx, event("tenants", i)); err != nil { // tenant-(i%7)
			t.Fatal(err)
		}
	}
	vkey, _ := s.TreeVerifierKey()
	const tn = cloison.TenantID("tenant-3")
	var want [][]byte
	if err := s.Scan(ctx, 1, 0, func(r audit.Record) error {
		if r.Tenant == tn {
			want = append(want, r.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cp, err := s.TenantCheckpoint(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	h, err := audit.OpenTenantHead(cp, vkey, tn)
	if err != nil || h.Size != uint64(len(want)) {
		t.Fatalf("tenant checkpoint: got size %d (%v), want %d", h.Size, err, len(want))
	}
	for pos := uint64(1); pos <= h.Size; pos++ {
		payload, proof, err := s.TenantInclusionProof(ctx, tn, pos, h.Size)
		if err != nil {
			t.Fatal(err)
		}
		if string(payload) != string(want[pos-1]) {
			t.Errorf("position %d: got another payload than the tenant's %d-th entry", pos, pos)
		}
		if _, err := audit.VerifyTenantInclusion(cp, vkey, tn, pos, payload, proof); err != nil {
			t.Errorf("position %d: %v", pos, err)
		}
	}
	if _, _, err := s.TenantInclusionProof(ctx, tn, h.Size+1, h.Size+1); !errors.Is(err, audit.ErrOutOfRange) {
		t.Errorf("beyond the tenant log: got %v, want audit.ErrOutOfRange", err)
	}
	if _, err := s.TenantConsistencyProof(ctx, tn, 2, h.Size); err != nil {
		t.Errorf("consistency: %v", err)
	}
	if _, err := s.TenantCheckpoint(ctx, "tenant-nobody"); !errors.Is(err, audit.ErrEmptyLedger) {
		t.Errorf("tenant without entries: got %v, want ErrEmptyLedger", err)
	}
}

func mustVerifierKey(t *testing.T) string {
	t.Helper()
	vk, err := audit.TreeVerifierKey("test-ledger", testKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return vk
}
