package audit

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Live rows bound to their events. A tenant, API client or signing key row
// is what its last ledger event says it is: the event's State is SHA-256
// of the row's state document, and the database's row_apply (migration
// 00027) writes the row from that document and records the event's seq in
// the row (ledger_seq) with the seq the change followed (ledger_prev). A
// row whose columns are not its last event's document is a row changed
// off the record.

// Tables whose rows are bound to their events.
const (
	RowTenants     = "tenants"
	RowClients     = "api_clients"
	RowSigningKeys = "signing_keys"
)

// RowStateExcluded lists the columns a state document leaves out: the
// database's clock and the binding itself.
var RowStateExcluded = []string{"created_at", "updated_at", "revoked_at", "activated_at", "retired_at", "ledger_seq", "ledger_prev"}

// ErrRowState: a live row disagrees with its last event (or has none).
var ErrRowState = errors.New("audit: live row disagrees with its last event")

// RowState returns the state document of a row of table: the RFC 8785
// canonical JSON of {"prev": prev, "row": row, "table": table}. row is the
// row's columns (less RowStateExcluded) as PostgreSQL's to_jsonb writes
// them: text as strings, integers as numbers, arrays as arrays, bytea as
// "\x" and lowercase hex. prev is the seq of the row's previous event, 0
// for a new row.
func RowState(table string, prev uint64, row any) ([]byte, error) {
	switch table {
	case RowTenants, RowClients, RowSigningKeys:
	default:
		return nil, fmt.Errorf("%w: no live rows in %q", ErrInvalidEvent, table)
	}
	b, err := json.Marshal(row)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return MarshalCanonical(struct {
		Prev  uint64          `json:"prev"`
		Row   json.RawMessage `json:"row"`
		Table string          `json:"table"`
	}{prev, b, table})
}

// StateDigest returns the State of a tenant, client or key event, nil for
// an event without one or of another kind.
func StateDigest(p Payload) *Digest {
	switch p := p.(type) {
	case *TenantChange:
		return p.State
	case *ClientChange:
		return p.State
	case *KeyChange:
		return p.State
	}
	return nil
}

// CheckRow reports whether state (RowState of a row of table) is what rec,
// the row's last event, says: rec is a tenant, client or key event of that
// row (kind, tenant, object) whose State is SHA-256 of state. id is the
// row's key (tenant id, client id, kid) and tenant its tenant ("" for a
// key). Errors: ErrRowState, with what disagrees.
func CheckRow(table, id, tenant string, state []byte, rec Record) error {
	env, err := DecodeEnvelope(rec.Payload)
	if err != nil {
		return fmt.Errorf("%w: %s %s: event %d: %v", ErrRowState, table, id, rec.Seq, err)
	}
	p, err := env.DecodePayload()
	if err != nil {
		return fmt.Errorf("%w: %s %s: event %d: %v", ErrRowState, table, id, rec.Seq, err)
	}
	var object string
	switch p := p.(type) {
	case *TenantChange:
		object = string(env.Tenant)
		if table != RowTenants {
			object = "\x00"
		}
	case *ClientChange:
		object = string(p.Client)
		if table != RowClients {
			object = "\x00"
		}
	case *KeyChange:
		object = string(p.Key)
		if table != RowSigningKeys {
			object = "\x00"
		}
	default:
		object = "\x00"
	}
	if object != id || string(env.Tenant) != tenant {
		return fmt.Errorf("%w: %s %s: event %d is %s of %q", ErrRowState, table, id, rec.Seq, env.Kind, object)
	}
	d := StateDigest(p)
	if d == nil || *d != Sum(state) {
		return fmt.Errorf("%w: %s %s: the row is not what event %d (%s) states", ErrRowState, table, id, rec.Seq, env.Kind)
	}
	return nil
}
