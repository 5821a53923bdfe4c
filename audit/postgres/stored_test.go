package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// A stored response is its tenant's only: another tenant reads and deletes
// nothing (audit.ErrNotFound, the answer an unknown id gets, and the row stays);
// storing and deleting each commit with their ledger event, which holds the
// sealed blob's digest and size; a second store of one id is ErrConflict
// and ledgers nothing; the runtime role may delete rows here (not in the
// ledger).
func TestStoredResponsesAreTenantScoped(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 100)
	sealed := []byte("nonce-and-ciphertext")
	r, err := s.StoreResponse(ctx, "tenant:a/u", audit.StoredResponse{ID: "resp_1", Tenant: "a", Request: "req-1", Sealed: sealed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreResponse(ctx, "tenant:a/u", audit.StoredResponse{ID: "resp_1", Tenant: "a", Request: "req-2", Sealed: sealed}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second store of one id: got %v, want ErrConflict", err)
	}
	if _, err := s.StoredResponseOf(ctx, "b", "resp_1"); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("another tenant's read: got %v, want audit.ErrNotFound", err)
	}
	if _, err := s.DeleteResponse(ctx, "tenant:b/u", "b", "resp_1"); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("another tenant's delete: got %v, want audit.ErrNotFound", err)
	}
	got, err := s.StoredResponseOf(ctx, "a", "resp_1")
	if err != nil || string(got.Sealed) != string(sealed) || got.Request != "req-1" || got.Seq != r.Seq {
		t.Fatalf("got %+v, %v, want the stored row", got, err)
	}
	del, err := s.DeleteResponse(ctx, "tenant:a/u", "a", "resp_1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoredResponseOf(ctx, "a", "resp_1"); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("read after delete: got %v, want audit.ErrNotFound", err)
	}
	if _, err := s.DeleteResponse(ctx, "tenant:a/u", "a", "resp_1"); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("second delete: got %v, want audit.ErrNotFound", err)
	}
	var kinds []audit.Kind
	if err := s.Scan(ctx, 1, 0, func(rec audit.Record) error {
		env, err := audit.DecodeEnvelope(rec.Payload)
		if err != nil {
			return err
		}
		p, err := env.DecodePayload()
		if err != nil {
			return err
		}
		switch e := p.(type) {
		case *audit.ResponseStored:
			if rec.Seq != r.Seq || e.Sealed != audit.Sum(sealed) || e.Bytes != int64(len(sealed)) || e.Request != "req-1" || env.Tenant != "a" {
				t.Errorf("response.stored %+v at %d", e, rec.Seq)
			}
		case *audit.ResponseDeleted:
			if rec.Seq != del.Seq || e.Sealed != audit.Sum(sealed) || env.Tenant != "a" {
				t.Errorf("response.deleted %+v at %d", e, rec.Seq)
			}
		}
		kinds = append(kinds, env.Kind)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := map[audit.Kind]int{}
	for _, k := range kinds {
		n[k]++
	}
	if n[audit.KindResponseStored] != 1 || n[audit.KindResponseDeleted] != 1 {
		t.Fatalf("ledger kinds %v: want one response.stored and one response.deleted", kinds)
	}
}
