package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Errors of the report register.
var (
	// ErrReportRate: the tenant sent more reports in the window than
	// ReportLimit allows.
	ErrReportRate = cloison.NewError(cloison.CodeRateLimited, "too many reports from this tenant; try again later")
)

// TenantEntry is one entry of a tenant's log with what proves it: its
// position among the tenant's entries, the size of the tenant log it is
// proven in, the tenant checkpoint of that size (signed now) and the
// inclusion proof, checkable offline with audit.VerifyTenantInclusion.
type TenantEntry struct {
	Seq        uint64 // global ledger seq (operator view only; never sent to a tenant)
	Position   uint64
	Size       uint64
	Payload    []byte // canonical JSON, verbatim
	Checkpoint []byte
	Proof      tlog.RecordProof
	OccurredAt time.Time
	Completed  audit.RequestCompleted
}

// RequestEntry finds the request.completed entry of request req in tenant
// t's log and proves it. A request of another tenant is not in t's log, so
// it is ErrNotFound exactly like an unknown id: the answer is no oracle.
//
// Errors: ErrNotFound; ErrNoSigningKey; the errors of TenantCheckpoint.
func (s *Store) RequestEntry(ctx context.Context, t cloison.TenantID, req cloison.RequestID) (TenantEntry, error) {
	if s.signer == nil {
		return TenantEntry{}, ErrNoSigningKey
	}
	origin, err := audit.TenantOrigin(s.cfg.Origin, t)
	if err != nil {
		return TenantEntry{}, err
	}
	needle := []byte(`"request":"` + string(req) + `"`)
	tree := &audit.MemTree{}
	var e TenantEntry
	err = s.Scan(ctx, 1, 0, func(r audit.Record) error {
		if !audit.TenantVisible(r, t) {
			return nil
		}
		pos, err := tree.Append(r.Payload)
		if err != nil || e.Position != 0 || !bytes.Contains(r.Payload, needle) {
			return err
		}
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil || env.Kind != audit.KindRequestCompleted {
			return nil
		}
		p, err := env.DecodePayload()
		if err != nil {
			return nil
		}
		if rc := p.(*audit.RequestCompleted); rc.Request == req {
			e = TenantEntry{Seq: r.Seq, Position: pos, Payload: r.Payload, OccurredAt: env.OccurredAt, Completed: *rc}
		}
		return nil
	})
	if err != nil {
		return TenantEntry{}, err
	}
	if e.Position == 0 {
		return TenantEntry{}, ErrNotFound
	}
	e.Size = tree.Size()
	h, err := tree.Head(origin, e.Size)
	if err != nil {
		return TenantEntry{}, err
	}
	if e.Checkpoint, err = audit.SignTenantHead(s.signer, t, h); err != nil {
		return TenantEntry{}, err
	}
	if e.Proof, err = tree.ProveRecord(e.Position, e.Size); err != nil {
		return TenantEntry{}, err
	}
	return e, nil
}

// Report is a stored report of a suspicious response.
type Report struct {
	ID         audit.Name
	Tenant     cloison.TenantID
	Request    cloison.RequestID
	Reason     audit.Name
	Sealed     []byte // nonce ‖ AES-256-GCM ciphertext; nil when no text was sent
	Incident   audit.Name
	ReceivedAt time.Time
	Seq        uint64
	Verdict    audit.Name // "" before any replay
}

// ReportLimit bounds the reports of one tenant: at most N per Window.
type ReportLimit struct {
	N      int
	Window time.Duration
}

// NewReport is what RecordReport records.
type NewReport struct {
	Tenant    cloison.TenantID
	Request   cloison.RequestID
	Reason    audit.Name
	Sealed    []byte
	RequestAt time.Time // when the request was served (its request.completed entry)
	EntrySeq  uint64    // that entry's ledger seq
}

// RecordReport records a tenant's report in one transaction: the potential
// incident it opens (incident.opened, status under assessment), the
// report.received ledger event and the report row. A second report of the
// same request by the same tenant records nothing and returns the first
// with dup set. Reports of one tenant are serialised (advisory lock), so
// the limit holds across nodes.
//
// Errors: ErrReportRate; audit.ErrInvalidEvent for a reason not in
// audit.ReportReasons; the translated database errors.
func (s *Store) RecordReport(ctx context.Context, actor audit.Name, r NewReport, lim ReportLimit) (rep Report, dup bool, err error) {
	now := time.Now()
	err = s.readWrite(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.report:' || $1, 0))`, string(r.Tenant)); err != nil {
			return err
		}
		old, err := reportTx(ctx, tx, `tenant = $1 AND request = $2`, string(r.Tenant), string(r.Request))
		if err == nil {
			rep, dup = old, true
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		if lim.N > 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM response_reports WHERE tenant = $1 AND received_at > $2`,
				string(r.Tenant), now.Add(-lim.Window)).Scan(&n); err != nil {
				return err
			}
			if n >= lim.N {
				return ErrReportRate
			}
		}
		incID := NewIncidentID(now)
		v, err := audit.ReportVersion(incID, r.Tenant, r.Request, r.Reason, r.RequestAt, now, int64(r.EntrySeq))
		if err != nil {
			return err
		}
		if _, err := s.openTx(ctx, tx, actor, v, nil); err != nil {
			return err
		}
		id := audit.Name("rep-" + string(incID)[len("inc-"):])
		recs, err := s.AppendTx(ctx, tx, audit.Event{OccurredAt: now, Tenant: r.Tenant, Actor: actor, Payload: audit.ReportReceived{
			Report: id, Request: r.Request, Reason: r.Reason, Sealed: r.Sealed != nil, Incident: incID}})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO response_reports (id, tenant, request, reason, sealed, incident_id, received_at, ledger_seq)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, string(id), string(r.Tenant), string(r.Request), string(r.Reason), r.Sealed,
			string(incID), now, int64(recs[0].Seq)); err != nil {
			return err
		}
		rep = Report{ID: id, Tenant: r.Tenant, Request: r.Request, Reason: r.Reason, Sealed: r.Sealed, Incident: incID, ReceivedAt: now, Seq: recs[0].Seq}
		return nil
	})
	return rep, dup, err
}

const reportColumns = `SELECT id, tenant, request, reason, sealed, incident_id, received_at, ledger_seq, coalesce(verdict, '') FROM response_reports WHERE `

func reportTx(ctx context.Context, q querier, where string, args ...any) (Report, error) {
	var r Report
	var seq int64
	err := q.QueryRow(ctx, reportColumns+where, args...).Scan((*string)(&r.ID), (*string)(&r.Tenant), (*string)(&r.Request),
		(*string)(&r.Reason), &r.Sealed, (*string)(&r.Incident), &r.ReceivedAt, &seq, (*string)(&r.Verdict))
	if errors.Is(err, pgx.ErrNoRows) {
		return Report{}, ErrNotFound
	}
	r.Seq = uint64(seq)
	return r, err
}

// ReportOf returns tenant t's report id. A report of another tenant is
// ErrNotFound.
func (s *Store) ReportOf(ctx context.Context, t cloison.TenantID, id audit.Name) (Report, error) {
	r, err := reportTx(ctx, s.pool, `tenant = $1 AND id = $2`, string(t), string(id))
	return r, translate(err)
}

// ReportFor returns tenant t's report of request req (ErrNotFound if none).
func (s *Store) ReportFor(ctx context.Context, t cloison.TenantID, req cloison.RequestID) (Report, error) {
	r, err := reportTx(ctx, s.pool, `tenant = $1 AND request = $2`, string(t), string(req))
	return r, translate(err)
}

// RecordReplay records a replay of tenant t's request in one transaction:
// when the request was reported, the report's register entry gets a new
// version (audit.ApplyReplay: closed, confirmed or left under assessment)
// and the report its verdict; the request.replayed event (its Report and
// Incident set here) is appended either way.
//
// Errors: the translated database errors; ErrConflict on a concurrent
// update of the entry.
func (s *Store) RecordReplay(ctx context.Context, actor audit.Name, t cloison.TenantID, p audit.RequestReplayed) (audit.Record, error) {
	var rec audit.Record
	now := time.Now()
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		rep, err := reportTx(ctx, tx, `tenant = $1 AND request = $2`, string(t), string(p.Request))
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			p.Report, p.Incident = rep.ID, rep.Incident
		}
		recs, err := s.AppendTx(ctx, tx, audit.Event{OccurredAt: now, Tenant: t, Actor: actor, Payload: p})
		if err != nil {
			return err
		}
		rec = recs[0]
		if p.Report == "" {
			return nil
		}
		latest, err := latestVersionTx(ctx, tx, rep.Incident)
		if err != nil {
			return err
		}
		if _, err := s.updateTx(ctx, tx, actor, rep.Incident, latest, func(v *audit.IncidentVersion) error {
			audit.ApplyReplay(v, p.Verdict, p.Reason, int64(rec.Seq), now)
			return nil
		}); err != nil {
			return fmt.Errorf("replay: register entry %s: %w", rep.Incident, err)
		}
		_, err = tx.Exec(ctx, `UPDATE response_reports SET verdict = $1 WHERE id = $2`, string(p.Verdict), string(rep.ID))
		return err
	})
	return rec, err
}
