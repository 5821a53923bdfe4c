package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloison/cloison/audit"
)

// A receipt binds the record the writer returned: its leaf is the tree
// leaf the integrator gives that entry, and it opens with the store's
// published verifier key. A store without the log key promises nothing
// (ErrNoSigningKey), so the request path fails closed.
func TestStoreReceiptIsTheStagedLeaf(t *testing.T) {
	ctx := context.Background()
	pool := pkgDB.RuntimePool(t)
	s := openStore(t, pool, "", 1000)
	e := event("receipt", 1)
	rec, err := s.Stage(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := s.Receipt(rec, "receipt-req-1")
	if err != nil {
		t.Fatal(err)
	}
	vk, err := s.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	r, err := audit.OpenReceipt(enc, vk)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	if err := s.Scan(ctx, 1, head.Seq, func(got audit.Record) error {
		found = found || audit.LeafHash(got) == r.Leaf && got.Tenant == e.Tenant
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !found || r.Origin != "test-ledger" || time.Until(r.Deadline) > audit.MaxMergeDelay {
		t.Fatalf("receipt %+v: leaf found %v", r, found)
	}

	keyless, err := Open(ctx, pool, Config{Origin: "test-ledger"})
	if err != nil {
		t.Fatal(err)
	}
	defer keyless.Close()
	if _, err := keyless.Receipt(rec, "receipt-req-1"); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("keyless store: got %v, want ErrNoSigningKey", err)
	}
}
