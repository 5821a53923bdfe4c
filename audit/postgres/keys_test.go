package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// Every step of a deployment key's life is a ledger event committed with
// its deployment_keys row: created once however often nodes
// start; another key is refused (audit.ErrKeyMismatch, nothing written) unless
// the policy lets it rotate, which records key.rotated for the new key and
// key.revoked for the old; a revoked key never comes back (audit.ErrKeyRetired).
// The rows are append-only for the runtime role, and the chain verifies.
func TestEnsureKeyLifecycle(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	key := func(id string) audit.DeploymentKey {
		return audit.DeploymentKey{Purpose: audit.PurposeCheckpoint, ID: id, Digest: sha256.Sum256([]byte(id))}
	}
	k1, k2 := key("1111111111111111"), key("2222222222222222")
	rotate := audit.KeyPolicy{Rotate: true}
	steps := []struct {
		name   string
		key    audit.DeploymentKey
		policy audit.KeyPolicy
		op     audit.KeyOp
		err    error
		events []string // ledger events written by this step: "op key"
	}{
		{"first start creates", k1, audit.KeyPolicy{}, audit.KeyCreated, nil, []string{"created 1111111111111111"}},
		{"second start (another node, same key)", k1, audit.KeyPolicy{}, "", nil, nil},
		{"another key without rotation", k2, audit.KeyPolicy{}, "", audit.ErrKeyMismatch, nil},
		{"another key, old one not replaceable", k2, audit.KeyPolicy{Rotate: true, MayReplace: func(string) bool { return false }}, "", audit.ErrKeyMismatch, nil},
		{"rotation", k2, rotate, audit.KeyRotated, nil, []string{"rotated 2222222222222222", "revoked 1111111111111111"}},
		{"the new key again", k2, rotate, "", nil, nil},
		{"the retired key", k1, rotate, "", audit.ErrKeyRetired, nil},
	}
	for _, st := range steps {
		before, err := s.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if op, ok := CheckKey(ctx, s.Pool(), st.key, st.policy); !errors.Is(ok, st.err) || (ok == nil && op != st.op) {
			t.Errorf("%s: CheckKey got %q, %v; want %q, %v", st.name, op, ok, st.op, st.err)
		}
		op, err := s.EnsureKey(ctx, "engine:test", st.key, st.policy)
		if !errors.Is(err, st.err) || op != st.op {
			t.Fatalf("%s: got %q, %v; want %q, %v", st.name, op, err, st.op, st.err)
		}
		var got []string
		if err := s.Scan(ctx, before.Seq+1, 0, func(r audit.Record) error {
			env, err := audit.DecodeEnvelope(r.Payload)
			if err != nil {
				return err
			}
			var p audit.KeyChange
			if err := json.Unmarshal(env.Data, &p); err != nil {
				return err
			}
			if p.Purpose != audit.PurposeCheckpoint || r.Actor != "engine:test" {
				t.Errorf("%s: event %s %+v", st.name, r.Kind, p)
			}
			if r.Kind != p.Kind() {
				t.Errorf("%s: kind %s, payload op %s", st.name, r.Kind, p.Op)
			}
			got = append(got, string(p.Op)+" "+string(p.Key))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(st.events) || (len(got) > 0 && got[0] != st.events[0]) || (len(got) > 1 && got[1] != st.events[1]) {
			t.Errorf("%s: events %v, want %v", st.name, got, st.events)
		}
	}
	if cur, err := s.CurrentKey(ctx, audit.PurposeCheckpoint); err != nil || cur != k2.ID {
		t.Errorf("current key: got %q, %v; want %s", cur, err, k2.ID)
	}
	// Rows and events match one to one: each row's transaction ledgered it.
	var rows int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM deployment_keys").Scan(&rows); err != nil || rows != 3 {
		t.Errorf("deployment_keys: %d rows, %v; want 3", rows, err)
	}
	for _, q := range []string{"UPDATE deployment_keys SET op = 'created'", "DELETE FROM deployment_keys", "TRUNCATE deployment_keys"} {
		if _, err := s.Pool().Exec(ctx, q); !errors.Is(translate(err), ErrAppendOnly) {
			t.Errorf("%s: got %v, want ErrAppendOnly", q, err)
		}
	}
	err := pgx.BeginFunc(ctx, db.AdminPool(t), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM deployment_keys")
		return err
	})
	if !errors.Is(translate(err), ErrAppendOnly) {
		t.Errorf("superuser delete: got %v, want ErrAppendOnly", err)
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
}

// Two nodes recording the same new key at once record one creation.
func TestEnsureKeyConcurrent(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	a := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	b := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	k := audit.DeploymentKey{Purpose: audit.PurposeKEK, ID: "kek-0123456789abcdef", Digest: sha256.Sum256([]byte("k"))}
	ops := make(chan audit.KeyOp, 8)
	for i := 0; i < 8; i++ {
		s := a
		if i%2 == 1 {
			s = b
		}
		go func() {
			op, err := s.EnsureKey(ctx, "engine:n", k, audit.KeyPolicy{})
			if err != nil {
				t.Error(err)
			}
			ops <- op
		}()
	}
	created := 0
	for i := 0; i < 8; i++ {
		if <-ops == audit.KeyCreated {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("got %d creations, want 1", created)
	}
}
