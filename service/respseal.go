package service

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/tenancy"
)

// Stored responses of the Responses API. Cloison keeps nothing unless
// asked; what it is asked to keep (the response object and the
// conversation it ends, as the transport encodes them) is sealed with
// AES-256-GCM under the tenant's key (audit.StoredResponseKey, derived from
// the KEK as the report key is), bound to the tenant and the response id,
// and stored in one transaction with the response.stored ledger event,
// which holds the id, the request, the SHA-256 of the sealed blob and its
// size — never text. Reads and deletes name the tenant: another tenant's
// id is ErrNoResponse, the answer an unknown or deleted id gets.

// Errors of the stored responses.
var (
	// ErrNoResponse: no stored response of the caller's tenant has this id.
	ErrNoResponse = cloison.NewError(cloison.CodeNotFound, "no stored response of this tenant has this id")
	// ErrStoreOff: storing or reading a response on a node without a
	// key-encryption key to seal responses with.
	ErrStoreOff = cloison.NewError(cloison.CodeUnavailable, "storing responses is not configured on this server")
)

// StoreOn reports whether this node can store responses (it holds a KEK).
func (r *Responses) StoreOn() bool { return r.cfg.KEK != nil }

func storedAD(t cloison.TenantID, id audit.Name) []byte {
	return []byte("cloison stored-response v1\x00" + string(t) + "\x00" + string(id))
}

func (r *Responses) storedAEAD(t cloison.TenantID) (cipher.AEAD, error) {
	if r.cfg.KEK == nil {
		return nil, ErrStoreOff
	}
	return tenantGCM(audit.StoredResponseKey, r.cfg.KEK, t)
}

// LoadStored opens tenant t's stored response id and returns what Store
// was given.
// Errors: ErrStoreOff; ErrNoResponse (another tenant's, unknown or
// deleted); the store's; a sealed blob that does not open.
func (r *Responses) LoadStored(ctx context.Context, t cloison.TenantID, id string) ([]byte, error) {
	g, err := r.storedAEAD(t)
	if err != nil {
		return nil, err
	}
	if audit.CheckName("id", id) != nil || t == "" {
		return nil, ErrNoResponse
	}
	row, err := r.d.Ledger.StoredResponseOf(ctx, t, audit.Name(id))
	if errors.Is(err, audit.ErrNotFound) {
		return nil, ErrNoResponse
	}
	if err != nil {
		return nil, err
	}
	n := g.NonceSize()
	if len(row.Sealed) < n {
		return nil, fmt.Errorf("stored response %s: sealed blob too short", id)
	}
	plain, err := g.Open(nil, row.Sealed[:n], row.Sealed[n:], storedAD(t, audit.Name(id)))
	if err != nil {
		return nil, fmt.Errorf("stored response %s: sealed blob does not open: %w", id, err)
	}
	return plain, nil
}

// Store seals plain as p's response id (of request rid) and stores it with
// its response.stored event in one transaction. The ledger write outlives
// the caller's cancellation (bounded by the ledger timeout): a response
// that was served is kept or reported unkept, never half-kept.
// Errors: ErrStoreOff; ErrLedgerUnavailable.
func (r *Responses) Store(ctx context.Context, p tenancy.Principal, rid cloison.RequestID, id audit.Name, plain []byte) error {
	g, err := r.storedAEAD(p.Tenant)
	if err != nil {
		return err
	}
	nonce := make([]byte, g.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := g.Seal(nonce, nonce, plain, storedAD(p.Tenant, id))
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.d.LedgerTimeout)
	defer cancel()
	if _, err := r.d.Ledger.StoreResponse(lctx, TenantActor(p), audit.StoredResponse{ID: id, Tenant: p.Tenant, Request: rid, Sealed: sealed}); err != nil {
		r.d.Log.Error("storing a response failed", "response", id, "err", err)
		return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	return nil
}

// DeleteStored deletes p's stored response id with its response.deleted
// event in one transaction.
// Errors: ErrStoreOff; ErrNoResponse (another tenant's, unknown or already
// deleted); ErrLedgerUnavailable.
func (r *Responses) DeleteStored(ctx context.Context, p tenancy.Principal, id string) error {
	if r.cfg.KEK == nil {
		return ErrStoreOff
	}
	if audit.CheckName("id", id) != nil {
		return ErrNoResponse
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.d.LedgerTimeout)
	defer cancel()
	_, err := r.d.Ledger.DeleteResponse(lctx, TenantActor(p), p.Tenant, audit.Name(id))
	if errors.Is(err, audit.ErrNotFound) {
		return ErrNoResponse
	}
	if err != nil {
		r.d.Log.Error("deleting a response failed", "response", id, "err", err)
		return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	return nil
}
