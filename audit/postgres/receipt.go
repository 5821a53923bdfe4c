package postgres

import (
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Receipt signs the receipt of rec, a record Stage or Append returned
// (its canonical payload is the entry's leaf), for request, acknowledged
// now, with the log key (audit.SignReceipt): the promise that the entry is
// in a signed checkpoint of this log by now + audit.MaxMergeDelay. It
// signs only what this store wrote: the receipt's leaf is the payload the
// writer hashed.
//
// Errors: ErrNoSigningKey for a store opened without the log key (it can
// promise nothing); audit.ErrInvalidEvent for a record without payload.
func (s *Store) Receipt(rec audit.Record, request cloison.RequestID) (string, error) {
	if s.signer == nil {
		return "", ErrNoSigningKey
	}
	r, err := audit.NewReceipt(s.cfg.Origin, rec, request, time.Now())
	if err != nil {
		return "", err
	}
	return audit.SignReceipt(s.signer, r)
}
