package postgres

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// openOrigin opens a store on db with origin (empty: the default) and key,
// appends one event of tenant alpha and signs the tree.
func openOrigin(t *testing.T, db *pgtest.DB, origin audit.Name, key ed25519.PrivateKey) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: origin, SigningKey: key, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Append(ctx, event("origin-test", 7)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// Two deployments that configure no origin get different ones (derived
// from their log keys), a deployment keeps the origin its ledger recorded
// across restarts and key changes, and one that recorded the old shared
// default keeps it.
func TestDefaultOriginPerDeployment(t *testing.T) {
	ctx := context.Background()
	_, k1, _ := ed25519.GenerateKey(nil)
	_, k2, _ := ed25519.GenerateKey(nil)
	db1, db2 := pgtest.New(t), pgtest.New(t)
	s1 := openOrigin(t, db1, "", k1)
	s2 := openOrigin(t, db2, "", k2)
	if s1.Origin() == s2.Origin() {
		t.Fatalf("two deployments share origin %q", s1.Origin())
	}
	if s1.Origin() != audit.DefaultOrigin(k1.Public().(ed25519.PublicKey)) || s1.Origin() == audit.LegacyOrigin {
		t.Fatalf("origin %q, want %q", s1.Origin(), audit.DefaultOrigin(k1.Public().(ed25519.PublicKey)))
	}
	cp, err := s1.TreeCheckpoint(ctx)
	if err != nil || !strings.HasPrefix(string(cp), string(s1.Origin())+"\n") {
		t.Fatalf("checkpoint %q: %v", cp, err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart, even under another log key, keeps the recorded origin.
	again := openOrigin(t, db1, "", k2)
	if again.Origin() != s1.Origin() {
		t.Fatalf("after a restart: origin %q, want %q", again.Origin(), s1.Origin())
	}
	// A deployment that ran with the old default keeps it.
	db3 := pgtest.New(t)
	legacy := openOrigin(t, db3, audit.LegacyOrigin, k1)
	if err := legacy.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openOrigin(t, db3, "", k1).Origin(); got != audit.LegacyOrigin {
		t.Fatalf("a ledger that recorded %q reopened as %q", audit.LegacyOrigin, got)
	}
}

// A tenant checkpoint's key name is its origin, so a note client holding
// the tenant key derived from the published one opens it.
func TestTenantCheckpointKeyName(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, pgtest.New(t).RuntimePool(t), t.TempDir(), 1000)
	if _, err := s.Append(ctx, event("key-name", 7)); err != nil {
		t.Fatal(err)
	}
	tn := cloison.TenantID("tenant-0")
	cp, err := s.TenantCheckpoint(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	origin, _ := audit.TenantOrigin(s.Origin(), tn)
	vkey, _ := s.TreeVerifierKey()
	tkey, err := audit.TenantVerifierKey(vkey, tn)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := note.NewVerifier(tkey)
	n, err := note.Open(cp, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open with the tenant key: %v", err)
	}
	if first, _, _ := strings.Cut(n.Text, "\n"); first != string(origin) || n.Sigs[0].Name != string(origin) {
		t.Fatalf("origin %q signed by %q, want both %q", first, n.Sigs[0].Name, origin)
	}
	if _, err := audit.OpenTenantHead(cp, vkey, tn); err != nil {
		t.Fatal(err)
	}
}
