package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
)

// ApplyTx appends e and writes the live row its state document describes,
// in tx, in one statement: row_apply (migration 00027) checks that e's
// State is SHA-256 of state (audit.RowState), that e is an event of that
// row and that the document's prev is the row's last event, appends e
// through audit_sequence and writes the row from the document. The chain
// is recomputed here, as for AppendTx. Call it last in tx: it takes the
// ledger's lock.
//
// Errors: ErrClosed; ErrSchema (the database chained differently); the
// database's error as it came, untranslated, for the caller to map onto
// its rows (23505: the row exists; P0002: it does not; 40001: another
// change came first, rerun the transaction; 23514: a CHECK; CL012: the
// event does not state the row; CL010/CL011: a key going backwards).
func (s *Store) ApplyTx(ctx context.Context, tx pgx.Tx, e audit.Event, state []byte) (audit.Record, error) {
	rec, err := s.events.Prepare(e) // signed, as AppendTx's
	if err != nil {
		return audit.Record{}, err
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return audit.Record{}, ErrClosed
	}
	var seq int64
	var prev, last []byte
	if err := tx.QueryRow(ctx, `SELECT seq, first_prev, last_hash FROM row_apply($1, $2)`, rec.Payload, state).Scan(&seq, &prev, &last); err != nil {
		return audit.Record{}, err
	}
	head := audit.Head{Seq: uint64(seq - 1)}
	copy(head.Hash[:], prev)
	rec = audit.Rechain(rec, head)
	if string(rec.Hash[:]) != string(last) {
		return audit.Record{}, fmt.Errorf("%w: the database chained seq %d to %x, this build to %x", ErrSchema, seq, last, rec.Hash[:])
	}
	return rec, nil
}

// LiveRow is a tenant, client or key row with its state document and last
// event (Rows).
type LiveRow struct {
	Table  string // audit.RowTenants, RowClients, RowSigningKeys
	ID     string // tenant id, client id, kid
	Tenant string // the row's tenant; "" for a key
	State  []byte // audit.RowState of the row as stored
	Seq    uint64 // the row's last event; 0: none (a row older than migration 00027)
	Event  audit.Record
}

// Check reports whether the row is what its last event says
// (audit.CheckRow). Errors: audit.ErrRowState.
func (r LiveRow) Check() error {
	if r.Seq == 0 {
		return fmt.Errorf("%w: %s %s is bound to no event", audit.ErrRowState, r.Table, r.ID)
	}
	if r.Event.Seq != r.Seq {
		return fmt.Errorf("%w: %s %s: its event %d is not in the ledger", audit.ErrRowState, r.Table, r.ID, r.Seq)
	}
	return audit.CheckRow(r.Table, r.ID, r.Tenant, r.State, r.Event)
}

// rowQueries reads each table's rows as state documents' rows, with their
// last event. id narrows to one row (” for all).
var rowQueries = map[string]string{
	audit.RowTenants: `SELECT t.id, t.id, to_jsonb(t) - $1::text[], coalesce(t.ledger_prev, 0), coalesce(t.ledger_seq, 0), e.seq, e.payload
		FROM tenants t LEFT JOIN audit_events e ON e.seq = t.ledger_seq WHERE $2 = '' OR t.id = $2 ORDER BY t.id`,
	audit.RowClients: `SELECT c.id, c.tenant_id, to_jsonb(c) - $1::text[], coalesce(c.ledger_prev, 0), coalesce(c.ledger_seq, 0), e.seq, e.payload
		FROM api_clients c LEFT JOIN audit_events e ON e.seq = c.ledger_seq WHERE $2 = '' OR c.id = $2 ORDER BY c.id`,
	audit.RowSigningKeys: `SELECT k.kid, '', to_jsonb(k) - $1::text[], coalesce(k.ledger_prev, 0), coalesce(k.ledger_seq, 0), e.seq, e.payload
		FROM signing_keys k LEFT JOIN audit_events e ON e.seq = k.ledger_seq WHERE $2 = '' OR k.kid = $2 ORDER BY k.kid`,
}

// Rows reads the live rows of table (id: one row, "" for all) with their
// last events, on q (a pool or a transaction). Errors: the database's.
func Rows(ctx context.Context, q querier, table, id string) ([]LiveRow, error) {
	sql, ok := rowQueries[table]
	if !ok {
		return nil, fmt.Errorf("%w: no live rows in %q", audit.ErrInvalidEvent, table)
	}
	rows, err := q.Query(ctx, sql, audit.RowStateExcluded, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LiveRow
	for rows.Next() {
		var (
			r         LiveRow
			row       json.RawMessage
			prev, seq int64
			eseq      *int64
			payload   []byte
		)
		if err := rows.Scan(&r.ID, &r.Tenant, &row, &prev, &seq, &eseq, &payload); err != nil {
			return nil, err
		}
		r.Table, r.Seq = table, uint64(seq)
		if r.State, err = audit.RowState(table, uint64(prev), row); err != nil {
			return nil, err
		}
		if eseq != nil {
			r.Event = audit.Record{Seq: uint64(*eseq), Payload: payload}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// VerifyRows checks every tenant, API client and signing key row against
// its last event (LiveRow.Check): a row changed off the record (a column
// UPDATE by a role that may still write the table, an event that states
// another row) is a *audit.BreakError of reason audit.ReasonRowState at
// the row's last event. With keys (the trusted log keys, by audit.KeyID),
// a row whose last event comes after the ledger's signing mark
// (audit.SigningBegan) must also carry a valid event signature by one of
// them: a row stated by whoever holds only the database's credentials
// (row_apply called with an unsigned event) is reported. It reports every
// such row (audit.JoinBreaks); Verify calls it with VerifyOptions.Keys.
// Errors: those breaks, or the database's.
func (s *Store) VerifyRows(ctx context.Context, keys map[string]ed25519.PublicKey) error {
	// A database migrated short of 00027 (the migration tests verify one)
	// has no binding to check.
	var bound bool
	if err := s.scan.QueryRow(ctx, `SELECT to_regproc('row_apply') IS NOT NULL`).Scan(&bound); err != nil {
		return translate(err)
	}
	if !bound {
		return nil
	}
	var mark int64
	if len(keys) > 0 {
		err := s.scan.QueryRow(ctx, `SELECT coalesce(min(seq), 0) FROM audit_events WHERE kind = $1`, string(audit.KindSigningBegan)).Scan(&mark)
		if err != nil {
			return translate(err)
		}
	}
	var breaks []error
	for _, table := range []string{audit.RowTenants, audit.RowClients, audit.RowSigningKeys} {
		rows, err := Rows(ctx, s.scan, table, "")
		if err != nil {
			return translate(err)
		}
		for _, r := range rows {
			err := r.Check()
			if err == nil && mark > 0 && r.Seq > uint64(mark) {
				err = r.CheckSigned(keys)
			}
			if err != nil {
				breaks = append(breaks, &audit.BreakError{Seq: r.Seq, Reason: audit.ReasonRowState, Detail: err.Error()})
			}
		}
	}
	return audit.JoinBreaks(breaks...)
}

// CheckSigned reports whether the row's last event carries a valid event
// signature by one of keys (audit.VerifyEventSignature). Errors:
// audit.ErrRowState.
func (r LiveRow) CheckSigned(keys map[string]ed25519.PublicKey) error {
	id, err := audit.VerifyEventSignature(r.Event.Payload, keys)
	if err == nil && id == "" {
		err = audit.ErrUnsigned
	}
	if err != nil {
		return fmt.Errorf("%w: %s %s: event %d: %v", audit.ErrRowState, r.Table, r.ID, r.Seq, err)
	}
	return nil
}
