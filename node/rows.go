package node

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/tenancy"
)

// rowKeys is the log keys whose event signatures the node accepts on the
// last event of a tenant, client or key row: its own and the trusted ones
// (a rotated log key keeps vouching for the rows it stated).
func rowKeys(k Keys) map[string]ed25519.PublicKey {
	if k.Log == nil {
		return nil
	}
	keys := map[string]ed25519.PublicKey{}
	for id, pub := range k.Trusted {
		keys[id] = pub
	}
	pub := k.Log.Public().(ed25519.PublicKey)
	keys[audit.KeyID(pub)] = pub
	return keys
}

// rowAlarm opens a register entry when the tenant store finds a row that
// is not what its last ledger event states (the store already refused it:
// its tenant's requests fail closed). The entry is an automatic isolation
// detection of invariant row_state:<table>: a tenant whose quotas or
// zeroing were changed off the record may have been served with isolation
// weaker than its contract. It runs on its own goroutine, bounded, so the
// request that found the row never waits for the register.
func rowAlarm(ledger *auditpg.Store, actor audit.Name, log *slog.Logger) func(tenancy.RowMismatch) {
	return func(m tenancy.RowMismatch) {
		log.Error("live row refused: not what its last ledger event states", "table", m.Table, "id", m.ID,
			"tenant", m.Tenant, "seq", m.Seq, "err", m.Err.Error())
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			now := time.Now()
			d := audit.Detection{Source: audit.SourceIsolationViolation, Invariant: audit.Name("row_state:" + m.Table),
				DetectedAt: now, PeriodStart: now, PeriodEnd: now}
			if m.Tenant != "" {
				d.AffectedTenants = []cloison.TenantID{m.Tenant}
			}
			if m.Seq > 0 {
				d.LedgerEvents = []int64{int64(m.Seq)}
			}
			id, err := ledger.OpenFromDetection(ctx, actor, d)
			if err != nil {
				log.Error("live row refused: the register entry could not be opened", "table", m.Table, "id", m.ID, "err", err.Error())
				return
			}
			log.Warn("live row refused: incident opened", "table", m.Table, "id", m.ID, "incident", id)
		}()
	}
}

// signingAlarm opens a register entry when the ledger refuses to sign a
// tree that contradicts one signed before (auditpg.SignRefusedError: the
// database was rewritten, rolled back or truncated). The entry is an
// automatic detection of invariant ledger_signing naming the refused size
// and the anchor's; the state directory's incident file and the metric
// record it outside the database as well.
func signingAlarm(actor audit.Name, log *slog.Logger) func(*auditpg.Store, *auditpg.SignRefusedError) {
	return func(ledger *auditpg.Store, e *auditpg.SignRefusedError) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		now := time.Now()
		d := audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ledger_signing",
			DetectedAt: now, PeriodStart: now, PeriodEnd: now}
		id, err := ledger.OpenFromDetection(ctx, actor, d)
		if err != nil {
			log.Error("ledger signing refused: the register entry could not be opened", "size", e.Size, "anchor_size", e.Anchor.Size, "err", err.Error())
			return
		}
		log.Error("ledger signing refused: incident opened", "incident", id, "size", e.Size, "anchor_size", e.Anchor.Size)
	}
}
