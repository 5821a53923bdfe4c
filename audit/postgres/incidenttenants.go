package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// The tenants an incident's register entry names: every version's
// affected tenants, united, so that the entry's ledger events enter each
// named tenant's log.

// entryTenantsTx returns the tenants every stored version of incident id
// names (affected_tenants), each once, in order of first appearance.
func entryTenantsTx(ctx context.Context, tx pgx.Tx, id audit.Name) ([]cloison.TenantID, error) {
	rows, err := tx.Query(ctx, `SELECT a.t FROM incident_versions v,
		jsonb_array_elements_text(convert_from(v.content, 'UTF8')::jsonb -> 'affected_tenants') WITH ORDINALITY AS a(t, i)
		WHERE v.incident_id = $1 ORDER BY v.version, a.i`, string(id))
	if err != nil {
		return nil, err
	}
	ts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var out []cloison.TenantID
	for _, t := range ts {
		out = unionTenants(out, []cloison.TenantID{cloison.TenantID(t)})
	}
	return out, nil
}

// unionTenants appends to a the tenants of b it lacks.
func unionTenants(a, b []cloison.TenantID) []cloison.TenantID {
	for _, t := range b {
		if t != "" && !slices.Contains(a, t) {
			a = append(a, t)
		}
	}
	return a
}

// fileTenants returns the tenants any version of f names.
func fileTenants(f audit.IncidentFile) []cloison.TenantID {
	var out []cloison.TenantID
	for _, v := range f.Versions {
		out = unionTenants(out, v.AffectedTenants)
	}
	return out
}

// sameTenants reports whether a and b hold the same tenants (in any
// order).
func sameTenants(a, b []cloison.TenantID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		if !slices.Contains(b, t) {
			return false
		}
	}
	return true
}

// legacyTenants tells incident events written before migration 00013
// (which name no tenants) from later ones that leave tenants out: once an
// incident event in the ledger names tenants, every later one must.
type legacyTenants struct {
	first uint64 // seq of the first incident event naming tenants; 0: none yet
}

func (l *legacyTenants) see(seq int64, tenants []cloison.TenantID) {
	if len(tenants) > 0 && (l.first == 0 || uint64(seq) < l.first) {
		l.first = uint64(seq)
	}
}

// legacy reports whether an event at seq naming tenants may be one
// written before events named them.
func (l *legacyTenants) legacy(seq uint64, tenants []cloison.TenantID) bool {
	return len(tenants) == 0 && (l.first == 0 || seq < l.first)
}
