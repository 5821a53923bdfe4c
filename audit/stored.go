package audit

import (
	"fmt"
	"time"

	"github.com/cloison/cloison"
)

// Stored responses of the Responses API. A tenant that asks
// for store: true gets its response kept, sealed under StoredResponseKey,
// in the stored_responses table; the ledger records only that it was
// stored and deleted: the response id, the request that produced it, the
// SHA-256 of the sealed blob and its size. No text.

// ResponseStored records that a response was stored for its tenant.
type ResponseStored struct {
	Response Name              `json:"response"`
	Request  cloison.RequestID `json:"request"`
	Sealed   Digest            `json:"sealed"` // SHA-256 of the sealed blob as stored
	Bytes    int64             `json:"bytes"`  // its length
}

func (ResponseStored) Kind() Kind { return KindResponseStored }
func (p ResponseStored) validate() error {
	if err := firstErr(CheckName("response", string(p.Response)), CheckName("request", string(p.Request)),
		checkCount("bytes", p.Bytes)); err != nil {
		return err
	}
	if p.Sealed.IsZero() || p.Bytes == 0 {
		return fmt.Errorf("%w: a stored response has a digest and a size", ErrInvalidEvent)
	}
	return nil
}

// ResponseDeleted records that a tenant deleted one of its stored
// responses; Sealed is the digest ResponseStored recorded.
type ResponseDeleted struct {
	Response Name   `json:"response"`
	Sealed   Digest `json:"sealed"`
}

func (ResponseDeleted) Kind() Kind { return KindResponseDeleted }
func (p ResponseDeleted) validate() error {
	if err := CheckName("response", string(p.Response)); err != nil {
		return err
	}
	if p.Sealed.IsZero() {
		return fmt.Errorf("%w: a deleted response names its digest", ErrInvalidEvent)
	}
	return nil
}

// StoredResponseKey derives the AES-256 key that seals tenant t's stored
// responses (kept in the register database, never in the ledger), from the
// key-encryption key as ReportKey does. Errors: as DigestKey.
func StoredResponseKey(kek []byte, t cloison.TenantID) ([]byte, error) {
	return deriveTenantKey(kek, "cloison stored-response v1", t, "k1")
}

// StoredResponse is a response of the Responses API kept for its tenant
// (store: true), sealed by the API (StoredResponseKey): the ledger never
// sees its text.
type StoredResponse struct {
	ID        Name
	Tenant    cloison.TenantID
	Request   cloison.RequestID
	Sealed    []byte // nonce ‖ AES-256-GCM ciphertext
	CreatedAt time.Time
	Seq       uint64 // the response.stored ledger entry
}
