package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// RebuildWithoutKey is what a DBA without the log key does to rewrite the
// record: with the triggers off, every event, tree hash, checkpoint and
// cosignature is deleted, then n forged events are appended through the
// ledger's own path (audit_sequence, by a Store without a key), so that
// chain and tree are self-consistent again and nothing in the database
// contradicts them.
func rebuildWithoutKey(t *testing.T, db *pgtest.DB, n int) {
	t.Helper()
	ctx := context.Background()
	admin := db.AdminPool(t)
	tables := []string{"audit_events", "audit_checkpoints", "tlog_tiles", "tlog_checkpoints", "tlog_cosignatures"}
	for _, tb := range tables {
		if _, err := admin.Exec(ctx, "ALTER TABLE "+tb+" DISABLE TRIGGER USER"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tb := range []string{"tlog_cosignatures", "tlog_checkpoints", "audit_checkpoints", "tlog_tiles", "audit_events"} {
		if _, err := admin.Exec(ctx, "DELETE FROM "+tb); err != nil {
			t.Fatalf("delete %s: %v", tb, err)
		}
	}
	for _, tb := range tables {
		if _, err := admin.Exec(ctx, "ALTER TABLE "+tb+" ENABLE TRIGGER USER"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := s.Append(ctx, event("forger", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// openSigner opens a store with the key on dir, closed at cleanup (its
// close error is not the test's: a refusing store fails its last
// checkpoint).
func openSigner(t *testing.T, pool *pgxpool.Pool, dir string, trusted ...TrustedTree) *Store {
	t.Helper()
	s, err := Open(context.Background(), pool, Config{Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: 10,
		CheckpointInterval: time.Hour, TreeCheckpointInterval: time.Hour, CheckpointDir: dir, TrustedTrees: trusted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The node must never sign a tree inconsistent with one it signed: the
// DBA rebuilds the log without the key, deletes every stored checkpoint
// and restarts the node. Its state directory still holds what it signed;
// it refuses to sign (error, count, incident file) whether the forged log
// is shorter, as long or longer, and everything that would hand out a
// checkpoint fails closed.
func TestNodeRefusesToSignRewrittenLedger(t *testing.T) {
	for _, tt := range []struct {
		name   string
		forged int
		reason error
	}{
		{"shorter", 20, audit.ErrSmallerTree},
		{"same size", 30, audit.ErrFork},
		{"longer", 45, audit.ErrFork},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := pgtest.New(t)
			dir := t.TempDir()
			s := openSigner(t, db.RuntimePool(t), dir)
			for i := 1; i <= 30; i++ {
				if _, err := s.Append(ctx, event("honest", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.SignTree(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, TreeCheckpointFileName("test-ledger"))); err != nil {
				t.Fatalf("the tree note is not in the state directory: %v", err)
			}

			rebuildWithoutKey(t, db, tt.forged)

			r := openSigner(t, db.RuntimePool(t), dir)
			if st := r.Stats(); !st.SigningRefused || st.SignRefusals == 0 {
				t.Fatalf("restarted over the rewritten ledger: stats %+v, want a refusal at open", st)
			}
			_, err := r.SignTree(ctx)
			var re *SignRefusedError
			if !errors.As(err, &re) || !errors.Is(err, ErrSigningRefused) || !errors.Is(err, tt.reason) {
				t.Fatalf("SignTree: got %v, want a refusal (%v)", err, tt.reason)
			}
			if re.Anchor.Size != 30 {
				t.Errorf("refusal anchored at size %d, want 30 (the state directory's note)", re.Anchor.Size)
			}
			head, err := r.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Checkpoint(ctx, head); !errors.Is(err, ErrSigningRefused) {
				t.Errorf("Checkpoint: got %v, want the refusal", err)
			}
			if _, err := r.TreeCheckpoint(ctx); !errors.Is(err, ErrSigningRefused) {
				t.Errorf("TreeCheckpoint: got %v, want the refusal (fail closed)", err)
			}
			if _, err := r.TenantCheckpoint(ctx, "tenant-1"); !errors.Is(err, ErrSigningRefused) {
				t.Errorf("TenantCheckpoint: got %v, want the refusal (a tenant log of the forged tree)", err)
			}
			if _, err := r.CosignedCheckpoint(ctx, 1); !errors.Is(err, ErrSigningRefused) {
				t.Errorf("CosignedCheckpoint: got %v, want the refusal (fail closed)", err)
			}
			// Appends go on: what happens next is recorded.
			if _, err := r.Append(ctx, event("after", 1)); err != nil {
				t.Errorf("append after the refusal: %v", err)
			}
			var signed int
			if err := db.AdminPool(t).QueryRow(ctx, "SELECT (SELECT count(*) FROM tlog_checkpoints) + (SELECT count(*) FROM audit_checkpoints)").Scan(&signed); err != nil {
				t.Fatal(err)
			}
			if signed != 0 {
				t.Errorf("the node signed %d checkpoints of the forged ledger", signed)
			}
			files, _ := filepath.Glob(filepath.Join(dir, RefusalFilePrefix+"*.json"))
			if len(files) != 1 {
				t.Fatalf("got %d incident files, want 1", len(files))
			}
			var rec refusalRecord
			b, _ := os.ReadFile(files[0])
			if err := json.Unmarshal(b, &rec); err != nil || rec.Incident != "ledger.signing_refused" || rec.AnchorSize != 30 {
				t.Errorf("incident file %s: %+v, %v", b, rec, err)
			}
		})
	}
}

// The state directory lost, the witnesses' cosigned tree (given as
// TrustedTrees) is the anchor; a tree that does extend every anchor is
// signed, and the anchor moves to it.
func TestSigningProvesConsistencyFromTrustedTrees(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openSigner(t, db.RuntimePool(t), t.TempDir())
	for i := 1; i <= 30; i++ {
		if _, err := s.Append(ctx, event("honest", i)); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := s.TreeVerifierKey()
	h, err := audit.OpenTreeHead(msg, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	witnessed := TrustedTree{h, "witness test"}

	// The honest ledger grows: signed from the witnessed tree.
	g := openSigner(t, db.RuntimePool(t), t.TempDir(), witnessed)
	for i := 31; i <= 40; i++ {
		if _, err := g.Append(ctx, event("honest", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.SignTree(ctx); err != nil {
		t.Fatalf("an honest extension was refused: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	rebuildWithoutKey(t, db, 50)
	r := openSigner(t, db.RuntimePool(t), t.TempDir(), witnessed) // a new, empty state directory
	if _, err := r.SignTree(ctx); !errors.Is(err, ErrSigningRefused) || !errors.Is(err, audit.ErrFork) {
		t.Fatalf("got %v, want a refusal from the witnessed tree", err)
	}
}

// BenchmarkProveTree is what signing adds: the consistency proof, from the
// stored tiles, from the last tree signed (size 2500) to the head (5000).
// BenchmarkSignTree is a whole signature for scale: the proof, the
// signature, the note file written and fsynced, the database row.
func BenchmarkProveTree(b *testing.B) {
	s, h := benchSigner(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.proveTree(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignTree(b *testing.B) {
	s, _ := benchSigner(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Append(ctx, event("bench-more", i)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.SignTree(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSigner(b *testing.B) (*Store, audit.TreeHead) {
	ctx := context.Background()
	db := pgtest.New(b)
	s, err := Open(ctx, db.RuntimePool(b), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: 1 << 30,
		CheckpointInterval: time.Hour, TreeCheckpointInterval: time.Hour, CheckpointDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	fill := func(from, to int) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w; i <= to; i += 16 {
					if _, err := s.Stage(ctx, event("bench", i)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		if err := s.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	fill(1, 2500)
	if _, err := s.SignTree(ctx); err != nil {
		b.Fatal(err)
	}
	fill(2501, 5000)
	h, err := s.committedTreeHead(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return s, h
}
