package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// NewIncidentID returns a fresh incident identifier: inc-YYYYMMDD-<8 hex>.
func NewIncidentID(now time.Time) audit.Name {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return audit.Name(fmt.Sprintf("inc-%s-%s", now.UTC().Format("20060102"), hex.EncodeToString(b[:])))
}

// OpenIncident adds a register entry whose version 1 is v, chaining it into
// the ledger (incident.opened) in the same transaction.
//
// Errors: audit.ErrInvalidIncident for a version missing a required element;
// ErrConflict when the id exists.
func (s *Store) OpenIncident(ctx context.Context, actor audit.Name, v audit.IncidentVersion) (audit.StoredVersion, error) {
	if v.Version != 1 {
		return audit.StoredVersion{}, fmt.Errorf("%w: a new incident starts at version 1", audit.ErrInvalidIncident)
	}
	content, digest, err := v.Canonical()
	if err != nil {
		return audit.StoredVersion{}, err
	}
	rec, err := audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.IncidentOpened{
		Incident: v.Incident, Source: audit.Name(v.Source), Version: 1, ContentDigest: digest,
	}}.Prepare()
	if err != nil {
		return audit.StoredVersion{}, err
	}
	var sv audit.StoredVersion
	err = s.readWrite(ctx, func(tx pgx.Tx) error {
		recs := []audit.Record{rec}
		if err := appendInTx(ctx, tx, recs); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO incidents (id, source, opened_by, ledger_seq) VALUES ($1, $2, $3, $4)`,
			string(v.Incident), string(v.Source), string(actor), int64(recs[0].Seq)); err != nil {
			return err
		}
		var err error
		sv, err = insertVersion(ctx, tx, actor, v, content, digest, recs[0].Seq)
		return err
	})
	return sv, err
}

// OpenFromDetection opens an incident for an isolation violation or a
// transfer-verification failure reported by the engine (its OnIncident hook
// calls this through cmd): period, affected tenants and response counts are
// prefilled, the assessment is pending. It returns the new incident's id.
func (s *Store) OpenFromDetection(ctx context.Context, actor audit.Name, d audit.Detection) (audit.Name, error) {
	id := NewIncidentID(d.DetectedAt)
	v, err := d.FirstVersion(id, s.cfg.Organization, s.cfg.Contact)
	if err != nil {
		return "", err
	}
	if _, err := s.OpenIncident(ctx, actor, v); err != nil {
		return "", err
	}
	return id, nil
}

func insertVersion(ctx context.Context, tx pgx.Tx, actor audit.Name, v audit.IncidentVersion, content []byte, digest audit.Digest, seq uint64) (audit.StoredVersion, error) {
	var retain time.Time
	var recordedAt time.Time
	err := tx.QueryRow(ctx, `INSERT INTO incident_versions (incident_id, version, recorded_by, content, content_sha256, ledger_seq)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING retain_until, recorded_at`,
		string(v.Incident), v.Version, string(actor), content, digest[:], int64(seq)).Scan(&retain, &recordedAt)
	if err != nil {
		return audit.StoredVersion{}, err
	}
	return audit.StoredVersion{IncidentVersion: v, Content: content, Digest: digest, RecordedAt: recordedAt,
		RecordedBy: actor, LedgerSeq: seq, RetainUntil: audit.DayOf(retain)}, nil
}

// UpdateIncident appends a new version: fn edits a copy of the latest
// version (its Version is set for it). The latest version is read and the
// new one written in one transaction; a concurrent update makes it fail with
// ErrConflict rather than lose either edit.
//
// Errors: ErrNotFound, ErrConflict, audit.ErrInvalidIncident, fn's error.
func (s *Store) UpdateIncident(ctx context.Context, actor audit.Name, id audit.Name, fn func(*audit.IncidentVersion) error) (audit.StoredVersion, error) {
	var sv audit.StoredVersion
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		latest, err := latestVersionTx(ctx, tx, id)
		if err != nil {
			return err
		}
		v := latest.IncidentVersion
		if err := fn(&v); err != nil {
			return err
		}
		v.Incident, v.Version, v.Source = id, latest.Version+1, latest.Source
		content, digest, err := v.Canonical()
		if err != nil {
			return err
		}
		rec, err := audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.IncidentUpdated{
			Incident: id, Version: v.Version, ContentDigest: digest,
		}}.Prepare()
		if err != nil {
			return err
		}
		recs := []audit.Record{rec}
		if err := appendInTx(ctx, tx, recs); err != nil {
			return err
		}
		sv, err = insertVersion(ctx, tx, actor, v, content, digest, recs[0].Seq)
		return err
	})
	return sv, err
}

func latestVersionTx(ctx context.Context, tx pgx.Tx, id audit.Name) (audit.StoredVersion, error) {
	rows, err := tx.Query(ctx, versionQuery+` WHERE incident_id = $1 ORDER BY version DESC LIMIT 1`, string(id))
	if err != nil {
		return audit.StoredVersion{}, err
	}
	vs, err := collectVersions(rows)
	if err != nil {
		return audit.StoredVersion{}, err
	}
	if len(vs) == 0 {
		return audit.StoredVersion{}, fmt.Errorf("%w: incident %s", ErrNotFound, id)
	}
	return vs[0], nil
}

const versionQuery = `SELECT content, content_sha256, recorded_at, recorded_by, ledger_seq, retain_until FROM incident_versions`

func collectVersions(rows pgx.Rows) ([]audit.StoredVersion, error) {
	defer rows.Close()
	var out []audit.StoredVersion
	for rows.Next() {
		var sv audit.StoredVersion
		var digest []byte
		var by string
		var seq int64
		var retain time.Time
		if err := rows.Scan(&sv.Content, &digest, &sv.RecordedAt, &by, &seq, &retain); err != nil {
			return nil, err
		}
		copy(sv.Digest[:], digest)
		if audit.Sum(sv.Content) != sv.Digest {
			return nil, fmt.Errorf("%w: incident version content does not match its digest", audit.ErrChainBroken)
		}
		if err := decodeStrict(sv.Content, &sv.IncidentVersion); err != nil {
			return nil, fmt.Errorf("%w: incident version: %v", ErrSchema, err)
		}
		sv.RecordedBy, sv.LedgerSeq, sv.RetainUntil = audit.Name(by), uint64(seq), audit.DayOf(retain)
		out = append(out, sv)
	}
	return out, rows.Err()
}

// AddNotice records a notice sent about an incident (to the Commission, the
// persons concerned, the public, an authority outside Québec, or an
// affected tenant), numbered after the existing ones and chained into the
// ledger (notice.sent).
func (s *Store) AddNotice(ctx context.Context, actor audit.Name, n audit.Notice) (audit.StoredNotice, error) {
	if err := n.Validate(); err != nil {
		return audit.StoredNotice{}, err
	}
	var sn audit.StoredNotice
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		var next int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(notice_no), 0) + 1 FROM incident_notices WHERE incident_id = $1`, string(n.Incident)).Scan(&next); err != nil {
			return err
		}
		n.Number = next
		p := audit.NoticeSent{Incident: n.Incident, Notice: next, Recipient: n.Recipient, ContentDigest: n.ContentDigest}
		if n.Recipient == audit.RecipientTenant {
			p.RecipientID = audit.Name(n.Tenant)
		}
		rec, err := audit.Event{OccurredAt: n.SentAt, Tenant: n.Tenant, Actor: actor, Payload: p}.Prepare()
		if err != nil {
			return err
		}
		recs := []audit.Record{rec}
		if err := appendInTx(ctx, tx, recs); err != nil {
			return err
		}
		var tenant *string
		if n.Tenant != "" {
			t := string(n.Tenant)
			tenant = &t
		}
		var recordedAt time.Time
		err = tx.QueryRow(ctx, `INSERT INTO incident_notices (incident_id, notice_no, recipient_kind, recipient, tenant, sent_at, method, content_sha256, recorded_by, ledger_seq)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING recorded_at`,
			string(n.Incident), next, string(n.Recipient), n.RecipientName, tenant, n.SentAt, n.Method, n.ContentDigest[:], string(actor), int64(recs[0].Seq)).Scan(&recordedAt)
		sn = audit.StoredNotice{Notice: n, RecordedAt: recordedAt, RecordedBy: actor, LedgerSeq: recs[0].Seq}
		return err
	})
	return sn, err
}

// Incident returns a register entry with all its versions and notices.
//
// Errors: ErrNotFound.
func (s *Store) Incident(ctx context.Context, id audit.Name) (audit.IncidentFile, error) {
	var f audit.IncidentFile
	err := s.readOnly(ctx, func(tx pgx.Tx) error {
		var err error
		f, err = incidentTx(ctx, tx, id)
		return err
	})
	return f, err
}

func incidentTx(ctx context.Context, tx pgx.Tx, id audit.Name) (audit.IncidentFile, error) {
	f := audit.IncidentFile{ID: id}
	var src, by string
	var seq int64
	err := tx.QueryRow(ctx, `SELECT source, opened_at, opened_by, ledger_seq FROM incidents WHERE id = $1`, string(id)).Scan(&src, &f.OpenedAt, &by, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("%w: incident %s", ErrNotFound, id)
	}
	if err != nil {
		return f, err
	}
	f.Source, f.OpenedBy, f.LedgerSeq = audit.IncidentSource(src), audit.Name(by), uint64(seq)
	rows, err := tx.Query(ctx, versionQuery+` WHERE incident_id = $1 ORDER BY version`, string(id))
	if err != nil {
		return f, err
	}
	if f.Versions, err = collectVersions(rows); err != nil {
		return f, err
	}
	nrows, err := tx.Query(ctx, `SELECT notice_no, recipient_kind, recipient, tenant, sent_at, method, content_sha256, recorded_at, recorded_by, ledger_seq
		FROM incident_notices WHERE incident_id = $1 ORDER BY notice_no`, string(id))
	if err != nil {
		return f, err
	}
	defer nrows.Close()
	for nrows.Next() {
		var n audit.StoredNotice
		var kind, nby string
		var tenant *string
		var digest []byte
		var nseq int64
		if err := nrows.Scan(&n.Number, &kind, &n.RecipientName, &tenant, &n.SentAt, &n.Method, &digest, &n.RecordedAt, &nby, &nseq); err != nil {
			return f, err
		}
		n.Incident, n.Recipient, n.RecordedBy, n.LedgerSeq = id, audit.RecipientKind(kind), audit.Name(nby), uint64(nseq)
		if tenant != nil {
			n.Tenant = cloison.TenantID(*tenant)
		}
		copy(n.ContentDigest[:], digest)
		f.Notices = append(f.Notices, n)
	}
	return f, nrows.Err()
}

// Incidents returns every register entry, oldest first, with all versions
// and notices, in one snapshot.
func (s *Store) Incidents(ctx context.Context) ([]audit.IncidentFile, error) {
	var out []audit.IncidentFile
	err := s.readOnly(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM incidents ORDER BY opened_at, id`)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			f, err := incidentTx(ctx, tx, audit.Name(id))
			if err != nil {
				return err
			}
			out = append(out, f)
		}
		return nil
	})
	return out, err
}

// VerifyRegister checks that every register version and notice is the one
// the ledger chained: the digest in its ledger event equals the SHA-256 of
// the stored content. Run it after Verify (which proves the ledger itself).
func (s *Store) VerifyRegister(ctx context.Context) error {
	files, err := s.Incidents(ctx)
	if err != nil {
		return err
	}
	return s.readOnly(ctx, func(tx pgx.Tx) error {
		// The ledger says which versions and notices must exist: a row
		// deleted from the register (even by a superuser who disabled the
		// triggers) without an incident.purged event is missing here.
		rows, err := tx.Query(ctx, `SELECT seq, payload FROM audit_events
			WHERE kind IN ('incident.opened', 'incident.updated', 'incident.purged', 'notice.sent') ORDER BY seq`)
		if err != nil {
			return err
		}
		wantVersions, wantNotices := map[audit.Name]int{}, map[audit.Name]int{}
		for rows.Next() {
			var seq int64
			var payload []byte
			if err := rows.Scan(&seq, &payload); err != nil {
				return err
			}
			env, err := audit.DecodeEnvelope(payload)
			if err != nil {
				return fmt.Errorf("%w: seq %d: %v", audit.ErrChainBroken, seq, err)
			}
			p, err := env.DecodePayload()
			if err != nil {
				return fmt.Errorf("%w: seq %d: %v", audit.ErrChainBroken, seq, err)
			}
			switch e := p.(type) {
			case *audit.IncidentOpened:
				wantVersions[e.Incident]++
			case *audit.IncidentUpdated:
				wantVersions[e.Incident]++
			case *audit.NoticeSent:
				wantNotices[e.Incident]++
			case *audit.IncidentPurged:
				delete(wantVersions, e.Incident)
				delete(wantNotices, e.Incident)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		have := map[audit.Name]audit.IncidentFile{}
		for _, f := range files {
			have[f.ID] = f
		}
		for id, n := range wantVersions {
			if f := have[id]; len(f.Versions) != n || len(f.Notices) != wantNotices[id] {
				return fmt.Errorf("%w: incident %s: the ledger records %d versions and %d notices, the register holds %d and %d",
					audit.ErrChainBroken, id, n, wantNotices[id], len(f.Versions), len(f.Notices))
			}
		}
		for _, f := range files {
			if _, ok := wantVersions[f.ID]; !ok {
				return fmt.Errorf("%w: incident %s is in the register but not in the ledger", audit.ErrChainBroken, f.ID)
			}
		}
		for _, f := range files {
			for _, v := range f.Versions {
				p, err := ledgerPayload(ctx, tx, v.LedgerSeq)
				if err != nil {
					return err
				}
				var got audit.Digest
				switch e := p.(type) {
				case *audit.IncidentOpened:
					got = e.ContentDigest
				case *audit.IncidentUpdated:
					got = e.ContentDigest
				}
				if got != v.Digest {
					return fmt.Errorf("%w: incident %s version %d: ledger seq %d names digest %s, stored content %s",
						audit.ErrChainBroken, f.ID, v.Version, v.LedgerSeq, got, v.Digest)
				}
			}
			for _, n := range f.Notices {
				p, err := ledgerPayload(ctx, tx, n.LedgerSeq)
				if err != nil {
					return err
				}
				e, ok := p.(*audit.NoticeSent)
				if !ok || e.ContentDigest != n.ContentDigest || e.Notice != n.Number || audit.Name(e.Incident) != f.ID {
					return fmt.Errorf("%w: incident %s notice %d does not match ledger seq %d", audit.ErrChainBroken, f.ID, n.Number, n.LedgerSeq)
				}
			}
		}
		return nil
	})
}

func ledgerPayload(ctx context.Context, tx pgx.Tx, seq uint64) (audit.Payload, error) {
	var payload []byte
	if err := tx.QueryRow(ctx, `SELECT payload FROM audit_events WHERE seq = $1`, int64(seq)).Scan(&payload); err != nil {
		return nil, err
	}
	env, err := audit.DecodeEnvelope(payload)
	if err != nil {
		return nil, err
	}
	return env.DecodePayload()
}

// PurgeIncident removes a register entry whose retention ended, as an
// explicit, ledgered action: an incident.purged event and the deletion are
// one transaction. The store's pool must connect as the owner role (the
// runtime role may not delete). Before the retention date the database
// refuses: ErrRetention.
func (s *Store) PurgeIncident(ctx context.Context, actor audit.Name, id audit.Name) (audit.Record, error) {
	var out audit.Record
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		f, err := incidentTx(ctx, tx, id)
		if err != nil {
			return err
		}
		latest := f.Latest()
		var retain time.Time
		if err := tx.QueryRow(ctx, `SELECT max(retain_until) FROM incident_versions WHERE incident_id = $1`, string(id)).Scan(&retain); err != nil {
			return err
		}
		rec, err := audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.IncidentPurged{
			Incident: id, Versions: int64(len(f.Versions)), Notices: int64(len(f.Notices)),
			LastContentDigest: latest.Digest, RetainUntil: audit.DayOf(retain),
		}}.Prepare()
		if err != nil {
			return err
		}
		recs := []audit.Record{rec}
		if err := appendInTx(ctx, tx, recs); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT cloison_incident_purge($1, $2)`, string(id), int64(recs[0].Seq)); err != nil {
			return err
		}
		out = recs[0]
		return nil
	})
	return out, err
}
