package export

import (
	"crypto/ed25519"

	"github.com/cloison/cloison/audit"
)

// Options says what to export and how to sign it.
type Options struct {
	Dir      string             // created; must not exist or be empty
	From, To uint64             // ledger range; 0 means 1 and the head
	Key      ed25519.PrivateKey // signs the manifest
	Actor    audit.Name         // recorded in the export.created event
	// Regime is the act the register is kept under (cited in the PDF);
	// empty: the ledger's configured regime.
	Regime Regime
	// Progress, if set, is called every 10,000 ledger events exported.
	Progress func(seq uint64)
}
