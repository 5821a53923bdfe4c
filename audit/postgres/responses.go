package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// RequestEntry finds the request.completed entry of request req in tenant
// t's stored log and proves it. A request of another tenant is not in t's
// log, so it is audit.ErrNotFound exactly like an unknown id: the answer is no
// oracle. It syncs and indexes the ledger to its head first (as
// TenantCheckpoint), then reads the entry's row of request_entries
// (migration 00021; the lowest position when an id repeats), the one
// ledger entry and O(log n) stored tree hashes: never a ledger scan. The
// checkpoint is of t's whole stored log, the note TenantCheckpoint signs
// at that size. What it reads is checked before it is returned: the entry
// is t's request.completed of req, at that position of t's log, and its
// payload is the stored leaf.
//
// Errors: audit.ErrNotFound; ErrNoSigningKey; audit.ErrInvalidEvent for a tenant
// id that is not an identifier; audit.ErrChainBroken when the stored rows
// do not match the ledger; the errors of IndexTenantLogs.
func (s *Store) RequestEntry(ctx context.Context, t cloison.TenantID, req cloison.RequestID) (audit.TenantEntry, error) {
	if s.signer == nil {
		return audit.TenantEntry{}, ErrNoSigningKey
	}
	origin, err := audit.TenantOrigin(s.cfg.Origin, t)
	if err != nil {
		return audit.TenantEntry{}, err
	}
	if err := s.Sync(ctx); err != nil { // the request's staged entry first
		return audit.TenantEntry{}, err
	}
	if _, err := s.IndexTenantLogs(ctx); err != nil {
		return audit.TenantEntry{}, err
	}
	var e audit.TenantEntry
	var pos, seq, lseq, size int64
	err = s.scan.QueryRow(ctx, `SELECT r.pos, r.seq, l.seq, (SELECT max(pos) FROM tenant_log_entries WHERE tenant = $1)
		FROM request_entries r JOIN tenant_log_entries l ON l.tenant = r.tenant AND l.pos = r.pos
		WHERE r.tenant = $1 AND r.request = $2 ORDER BY r.pos LIMIT 1`, string(t), string(req)).Scan(&pos, &seq, &lseq, &size)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit.TenantEntry{}, audit.ErrNotFound
	}
	if err != nil {
		return audit.TenantEntry{}, translate(err)
	}
	var rec *audit.Record
	if err := scanRows(ctx, s.scan, uint64(seq), uint64(seq), 1, func(r audit.Record) error { rec = &r; return nil }); err != nil {
		return audit.TenantEntry{}, translate(err)
	}
	broken := func(detail string) error {
		return &audit.BreakError{Seq: uint64(seq), Reason: audit.ReasonTenantLog, Detail: detail}
	}
	if rec == nil || lseq != seq {
		return audit.TenantEntry{}, broken("request_entries does not name its tenant log position's ledger entry")
	}
	r := tenantReader{ctx: ctx, q: s.scan, t: t}
	stored, err := r.ReadHashes([]int64{tlog.StoredHashIndex(0, pos-1)})
	if err != nil {
		return audit.TenantEntry{}, translate(err)
	}
	env, err := audit.DecodeEnvelope(rec.Payload)
	if err != nil || env.Kind != audit.KindRequestCompleted || env.Tenant != t || tlog.RecordHash(rec.Payload) != stored[0] {
		return audit.TenantEntry{}, broken(fmt.Sprintf("position %d of a tenant log is not the request.completed entry request_entries names", pos))
	}
	p, err := env.DecodePayload()
	if err != nil {
		return audit.TenantEntry{}, broken("a request.completed entry does not decode")
	}
	rc := p.(*audit.RequestCompleted)
	if rc.Request != req {
		return audit.TenantEntry{}, broken("request_entries names another request's entry")
	}
	e = audit.TenantEntry{Seq: rec.Seq, Position: uint64(pos), Size: uint64(size), Payload: rec.Payload, OccurredAt: env.OccurredAt, Completed: *rc}
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		return audit.TenantEntry{}, translate(err)
	}
	if e.Checkpoint, err = s.signTenantHead(t, audit.TreeHead{Origin: origin, Size: e.Size, Root: root}); err != nil {
		return audit.TenantEntry{}, err
	}
	if e.Proof, err = tlog.ProveRecord(size, pos-1, r); err != nil {
		return audit.TenantEntry{}, translate(err)
	}
	return e, nil
}

// RecordReport records a tenant's report in one transaction: the potential
// incident it opens (incident.opened, status under assessment), the
// report.received ledger event and the report row. A second report of the
// same request by the same tenant records nothing and returns the first
// with dup set. Reports of one tenant are serialised (advisory lock), so
// the limit holds across nodes.
//
// Errors: audit.ErrReportRate; audit.ErrInvalidEvent for a reason not in
// audit.ReportReasons; the translated database errors.
func (s *Store) RecordReport(ctx context.Context, actor audit.Name, r audit.NewReport, lim audit.ReportLimit) (rep audit.Report, dup bool, err error) {
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
		if !errors.Is(err, audit.ErrNotFound) {
			return err
		}
		if lim.N > 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM response_reports WHERE tenant = $1 AND received_at > $2`,
				string(r.Tenant), now.Add(-lim.Window)).Scan(&n); err != nil {
				return err
			}
			if n >= lim.N {
				return audit.ErrReportRate
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
		rep = audit.Report{ID: id, Tenant: r.Tenant, Request: r.Request, Reason: r.Reason, Sealed: r.Sealed, Incident: incID, ReceivedAt: now, Seq: recs[0].Seq}
		return nil
	})
	return rep, dup, err
}

const reportColumns = `SELECT id, tenant, request, reason, sealed, incident_id, received_at, ledger_seq, coalesce(verdict, '') FROM response_reports WHERE `

func reportTx(ctx context.Context, q querier, where string, args ...any) (audit.Report, error) {
	var r audit.Report
	var seq int64
	err := q.QueryRow(ctx, reportColumns+where, args...).Scan((*string)(&r.ID), (*string)(&r.Tenant), (*string)(&r.Request),
		(*string)(&r.Reason), &r.Sealed, (*string)(&r.Incident), &r.ReceivedAt, &seq, (*string)(&r.Verdict))
	if errors.Is(err, pgx.ErrNoRows) {
		return audit.Report{}, audit.ErrNotFound
	}
	r.Seq = uint64(seq)
	return r, err
}

// ReportOf returns tenant t's report id. A report of another tenant is
// audit.ErrNotFound.
func (s *Store) ReportOf(ctx context.Context, t cloison.TenantID, id audit.Name) (audit.Report, error) {
	r, err := reportTx(ctx, s.pool, `tenant = $1 AND id = $2`, string(t), string(id))
	return r, translate(err)
}

// ReportFor returns tenant t's report of request req (audit.ErrNotFound if none).
func (s *Store) ReportFor(ctx context.Context, t cloison.TenantID, req cloison.RequestID) (audit.Report, error) {
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
		case errors.Is(err, audit.ErrNotFound):
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
