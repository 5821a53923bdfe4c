package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// NewIncidentID is audit.NewIncidentID.
func NewIncidentID(now time.Time) audit.Name { return audit.NewIncidentID(now) }

// OpenIncident adds a register entry whose version 1 is v, chaining it into
// the ledger (incident.opened) in the same transaction.
//
// Errors: audit.ErrInvalidIncident for a version missing a required element;
// ErrConflict when the id exists.
func (s *Store) OpenIncident(ctx context.Context, actor audit.Name, v audit.IncidentVersion) (audit.StoredVersion, error) {
	var sv audit.StoredVersion
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		var err error
		sv, err = s.openTx(ctx, tx, actor, v, nil)
		return err
	})
	return sv, err
}

// openGroup is an automatic entry's grouping key and the end of its window.
type openGroup struct {
	key   string
	until time.Time
}

func (s *Store) openTx(ctx context.Context, tx pgx.Tx, actor audit.Name, v audit.IncidentVersion, g *openGroup) (audit.StoredVersion, error) {
	if v.Version != 1 {
		return audit.StoredVersion{}, fmt.Errorf("%w: a new incident starts at version 1", audit.ErrInvalidIncident)
	}
	v.Normalize()
	// The organisation and its privacy officer are configured once
	// (Config, then the admin API: RegisterSettings) and copied into every
	// entry that does not name them.
	if v.Organization == (audit.Organization{}) || v.Contact == (audit.Contact{}) {
		set, err := s.settingsTx(ctx, tx)
		if err != nil {
			return audit.StoredVersion{}, err
		}
		if v.Organization == (audit.Organization{}) {
			v.Organization = set.Organization
		}
		if v.Contact == (audit.Contact{}) {
			v.Contact = set.Contact
		}
	}
	content, digest, err := v.Canonical()
	if err != nil {
		return audit.StoredVersion{}, err
	}
	rec, err := s.events.Prepare(audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.IncidentOpened{
		Incident: v.Incident, Source: audit.Name(v.Source), Version: 1, ContentDigest: digest,
		Tenants: unionTenants(nil, v.AffectedTenants),
	}})
	if err != nil {
		return audit.StoredVersion{}, err
	}
	recs := []audit.Record{rec}
	if err := appendInTx(ctx, tx, recs); err != nil {
		return audit.StoredVersion{}, err
	}
	var key *string
	var until *time.Time
	if g != nil {
		key, until = &g.key, &g.until
	}
	if _, err := tx.Exec(ctx, `INSERT INTO incidents (id, source, opened_by, ledger_seq, group_key, group_until) VALUES ($1, $2, $3, $4, $5, $6)`,
		string(v.Incident), string(v.Source), string(actor), int64(recs[0].Seq), key, until); err != nil {
		return audit.StoredVersion{}, err
	}
	return insertVersion(ctx, tx, actor, v, content, digest, recs[0])
}

// OpenFromDetection records an isolation violation or a transfer-verification
// failure reported by the engine (its OnIncident hook calls this through
// cmd) in the register, and returns the entry's id. Detections from one
// cause (d.GroupKey: source, check, model) are grouped: while an entry that
// cause opened is open, holds fewer than audit.MaxGroupedDetections
// detections, and was opened less than Config.DetectionWindow before d, d
// is added to it as a new hashed version (incident.updated) listing its
// requests and ledger events. Otherwise a new entry is opened: period,
// affected tenants, requests and response counts prefilled, the assessment
// pending. Concurrent detections of one cause are serialised by a
// transaction-scoped advisory lock on the key.
func (s *Store) OpenFromDetection(ctx context.Context, actor audit.Name, d audit.Detection) (audit.Name, error) {
	id := NewIncidentID(d.DetectedAt)
	v, err := d.FirstVersion(id, audit.Organization{}, audit.Contact{})
	if err != nil {
		return "", err
	}
	key := d.GroupKey()
	err = s.readWrite(ctx, func(tx pgx.Tx) error {
		if s.cfg.DetectionWindow < 0 {
			_, err := s.openTx(ctx, tx, actor, v, nil)
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.incident_group:' || $1, 0))`, key); err != nil {
			return err
		}
		var open string
		err := tx.QueryRow(ctx, `SELECT i.id FROM incidents i
			WHERE i.group_key = $1 AND i.group_until > $2
			  AND (SELECT v.status FROM incident_versions v WHERE v.incident_id = i.id ORDER BY v.version DESC LIMIT 1) = 'open'
			ORDER BY i.group_until DESC LIMIT 1`, key, d.DetectedAt).Scan(&open)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			latest, err := latestVersionTx(ctx, tx, audit.Name(open))
			if err != nil {
				return err
			}
			if latest.DetectionGroup == key && latest.Detections < audit.MaxGroupedDetections {
				id = audit.Name(open)
				_, err = s.updateTx(ctx, tx, actor, id, latest, func(v *audit.IncidentVersion) error {
					v.AddDetection(d)
					return nil
				})
				return err
			}
		}
		_, err = s.openTx(ctx, tx, actor, v, &openGroup{key: key, until: d.DetectedAt.Add(s.cfg.DetectionWindow)})
		return err
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// insertVersion stores a version chained by rec. What the register shows
// as its recorded time and author is rec's (hashed) occurred_at and actor,
// not the database's recorded_at column.
func insertVersion(ctx context.Context, tx pgx.Tx, actor audit.Name, v audit.IncidentVersion, content []byte, digest audit.Digest, rec audit.Record) (audit.StoredVersion, error) {
	var retain time.Time
	err := tx.QueryRow(ctx, `INSERT INTO incident_versions (incident_id, version, recorded_by, content, content_sha256, ledger_seq)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING retain_until`,
		string(v.Incident), v.Version, string(actor), content, digest[:], int64(rec.Seq)).Scan(&retain)
	if err != nil {
		return audit.StoredVersion{}, err
	}
	sv := audit.StoredVersion{IncidentVersion: v, Content: content, Digest: digest, RecordedAt: rec.OccurredAt.UTC().Truncate(time.Microsecond),
		RecordedBy: actor, LedgerSeq: rec.Seq}
	if sv.RetainUntil, err = v.RetainUntil(); err != nil {
		return sv, err
	}
	if sv.RetainUntil != audit.DayOf(retain) {
		return sv, fmt.Errorf("%w: incident %s version %d: retain_until %s, its content gives %s", ErrSchema, v.Incident, v.Version, audit.DayOf(retain), sv.RetainUntil)
	}
	return sv, nil
}

// UpdateIncident appends a new version: fn edits a copy of the latest
// version (its Version is set for it). The latest version is read and the
// new one written in one transaction; a concurrent update makes it fail with
// ErrConflict rather than lose either edit.
//
// Errors: audit.ErrNotFound, ErrConflict, audit.ErrInvalidIncident, fn's error.
func (s *Store) UpdateIncident(ctx context.Context, actor audit.Name, id audit.Name, fn func(*audit.IncidentVersion) error) (audit.StoredVersion, error) {
	var sv audit.StoredVersion
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		latest, err := latestVersionTx(ctx, tx, id)
		if err != nil {
			return err
		}
		sv, err = s.updateTx(ctx, tx, actor, id, latest, fn)
		return err
	})
	return sv, err
}

func (s *Store) updateTx(ctx context.Context, tx pgx.Tx, actor audit.Name, id audit.Name, latest audit.StoredVersion, fn func(*audit.IncidentVersion) error) (audit.StoredVersion, error) {
	v := latest.IncidentVersion
	if err := fn(&v); err != nil {
		return audit.StoredVersion{}, err
	}
	v.Incident, v.Version, v.Source = id, latest.Version+1, latest.Source
	v.Normalize()
	content, digest, err := v.Canonical()
	if err != nil {
		return audit.StoredVersion{}, err
	}
	tenants, err := entryTenantsTx(ctx, tx, id)
	if err != nil {
		return audit.StoredVersion{}, err
	}
	rec, err := s.events.Prepare(audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.IncidentUpdated{
		Incident: id, Version: v.Version, ContentDigest: digest, Tenants: unionTenants(tenants, v.AffectedTenants),
	}})
	if err != nil {
		return audit.StoredVersion{}, err
	}
	recs := []audit.Record{rec}
	if err := appendInTx(ctx, tx, recs); err != nil {
		return audit.StoredVersion{}, err
	}
	return insertVersion(ctx, tx, actor, v, content, digest, recs[0])
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
		return audit.StoredVersion{}, fmt.Errorf("%w: incident %s", audit.ErrNotFound, id)
	}
	return vs[0], nil
}

// versionQuery reads versions with their ledger event, whose occurred_at
// and actor are what the register shows as recorded at and by.
const versionQuery = `SELECT v.content, v.content_sha256, e.payload, v.recorded_by, v.ledger_seq, v.retain_until
	FROM incident_versions v JOIN audit_events e ON e.seq = v.ledger_seq`

func collectVersions(rows pgx.Rows) ([]audit.StoredVersion, error) {
	defer rows.Close()
	var out []audit.StoredVersion
	for rows.Next() {
		var sv audit.StoredVersion
		var digest, payload []byte
		var by string
		var seq int64
		var retain time.Time
		if err := rows.Scan(&sv.Content, &digest, &payload, &by, &seq, &retain); err != nil {
			return nil, err
		}
		env, err := audit.DecodeEnvelope(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: seq %d: %v", audit.ErrChainBroken, seq, err)
		}
		if env.Actor != audit.Name(by) {
			return nil, fmt.Errorf("%w: seq %d: incident version recorded by %s, its ledger event by %s", audit.ErrChainBroken, seq, by, env.Actor)
		}
		sv.RecordedAt = env.OccurredAt
		copy(sv.Digest[:], digest)
		if audit.Sum(sv.Content) != sv.Digest {
			return nil, fmt.Errorf("%w: incident version content does not match its digest", audit.ErrChainBroken)
		}
		if err := decodeStrict(sv.Content, &sv.IncidentVersion); err != nil {
			return nil, fmt.Errorf("%w: incident version: %v", ErrSchema, err)
		}
		sv.RecordedBy, sv.LedgerSeq = audit.Name(by), uint64(seq)
		if sv.RetainUntil, err = sv.IncidentVersion.RetainUntil(); err != nil || sv.RetainUntil != audit.DayOf(retain) {
			return nil, fmt.Errorf("%w: incident version at seq %d: retain_until %s does not follow from its awareness date", ErrSchema, seq, audit.DayOf(retain))
		}
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
		now := time.Now()
		latest, err := latestVersionTx(ctx, tx, n.Incident)
		if err != nil {
			return err
		}
		if err := latest.CheckNoticeDate(n.SentAt, now); err != nil {
			return err
		}
		record, recordDigest, err := n.Record(actor, now).Canonical()
		if err != nil {
			return err
		}
		p := audit.NoticeSent{Incident: n.Incident, Notice: next, Recipient: n.Recipient, ContentDigest: n.ContentDigest, RecordDigest: &recordDigest}
		if n.Recipient == audit.RecipientTenant {
			p.RecipientID = audit.Name(n.Tenant)
		}
		rec, err := s.events.Prepare(audit.Event{OccurredAt: n.SentAt, Tenant: n.Tenant, Actor: actor, Payload: p})
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
		_, err = tx.Exec(ctx, `INSERT INTO incident_notices (incident_id, notice_no, recipient_kind, recipient, tenant, sent_at, method, content_sha256, recorded_by, ledger_seq, record, record_sha256)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			string(n.Incident), next, string(n.Recipient), n.RecipientName, tenant, n.SentAt, n.Method, n.ContentDigest[:], string(actor), int64(recs[0].Seq),
			record, recordDigest[:])
		if err != nil {
			return err
		}
		sn, err = decodeNoticeRecord(record, recordDigest[:])
		sn.LedgerSeq = recs[0].Seq
		return err
	})
	return sn, err
}

// decodeNoticeRecord returns the notice a stored record describes.
func decodeNoticeRecord(record, digest []byte) (audit.StoredNotice, error) {
	var r audit.NoticeRecord
	if audit.Sum(record) != audit.Digest(digest) {
		return audit.StoredNotice{}, fmt.Errorf("%w: notice record does not match its digest", audit.ErrChainBroken)
	}
	if err := decodeStrict(record, &r); err != nil {
		return audit.StoredNotice{}, fmt.Errorf("%w: notice record: %v", ErrSchema, err)
	}
	sn, err := r.Stored()
	if err != nil {
		return sn, fmt.Errorf("%w: notice record: %v", ErrSchema, err)
	}
	sn.Record, sn.RecordDigest = record, audit.Sum(record)
	return sn, nil
}

// Incident returns a register entry with all its versions and notices.
//
// Errors: audit.ErrNotFound.
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
	var payload []byte
	// Opened at and by are the incident.opened event's (hashed), not the
	// row's opened_at column.
	err := tx.QueryRow(ctx, `SELECT i.source, e.payload, i.opened_by, i.ledger_seq FROM incidents i JOIN audit_events e ON e.seq = i.ledger_seq
		WHERE i.id = $1`, string(id)).Scan(&src, &payload, &by, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("%w: incident %s", audit.ErrNotFound, id)
	}
	if err != nil {
		return f, err
	}
	env, err := audit.DecodeEnvelope(payload)
	if err != nil || env.Actor != audit.Name(by) || env.Kind != audit.KindIncidentOpened {
		return f, fmt.Errorf("%w: incident %s does not match its incident.opened event at seq %d", audit.ErrChainBroken, id, seq)
	}
	f.OpenedAt = env.OccurredAt
	f.Source, f.OpenedBy, f.LedgerSeq = audit.IncidentSource(src), audit.Name(by), uint64(seq)
	rows, err := tx.Query(ctx, versionQuery+` WHERE incident_id = $1 ORDER BY version`, string(id))
	if err != nil {
		return f, err
	}
	if f.Versions, err = collectVersions(rows); err != nil {
		return f, err
	}
	nrows, err := tx.Query(ctx, `SELECT notice_no, recipient_kind, recipient, tenant, sent_at, method, content_sha256, recorded_at, recorded_by, ledger_seq, record, record_sha256
		FROM incident_notices WHERE incident_id = $1 ORDER BY notice_no`, string(id))
	if err != nil {
		return f, err
	}
	defer nrows.Close()
	for nrows.Next() {
		var n audit.StoredNotice
		var kind, nby string
		var tenant *string
		var digest, record, recordDigest []byte
		var nseq int64
		if err := nrows.Scan(&n.Number, &kind, &n.RecipientName, &tenant, &n.SentAt, &n.Method, &digest, &n.RecordedAt, &nby, &nseq, &record, &recordDigest); err != nil {
			return f, err
		}
		if record != nil {
			// What the register shows is the hashed record, not the columns.
			if n, err = decodeNoticeRecord(record, recordDigest); err != nil {
				return f, err
			}
			if n.Incident != id || n.Number < 1 {
				return f, fmt.Errorf("%w: incident %s: a notice record names another incident", audit.ErrChainBroken, id)
			}
			n.LedgerSeq = uint64(nseq)
			f.Notices = append(f.Notices, n)
			continue
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
// the stored content; and every register settings version is the one its
// register.settings_set event names (verifySettingsTx). Run it after
// Verify (which proves the ledger itself). Every disagreement is reported
// (CheckRegister), joined.
//
// Errors: audit.ErrChainBroken (joined, one per disagreement); the
// database's.
func (s *Store) VerifyRegister(ctx context.Context) error {
	problems, err := s.CheckRegister(ctx)
	if err != nil {
		return err
	}
	return errors.Join(problems...)
}

// CheckRegister holds the register (incidents, versions, notices, settings)
// to the ledger in one snapshot and returns every disagreement, each an
// audit.ErrChainBroken naming the entry: a row deleted behind the
// triggers (the ledger records a version or notice the register lacks,
// without an incident.purged event), an entry the ledger never opened, a
// digest or tenant list that differs from its event. err is a database
// error, or a register row that does not even read back (incidentTx).
func (s *Store) CheckRegister(ctx context.Context) (problems []error, err error) {
	err = s.readOnly(ctx, func(tx pgx.Tx) error {
		problems, err = checkRegisterTx(ctx, tx)
		return err
	})
	return problems, err
}

// checkRegisterTx is CheckRegister in tx (an export's snapshot runs it
// too).
func checkRegisterTx(ctx context.Context, tx pgx.Tx) ([]error, error) {
	var problems []error
	broken := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%w: "+format, append([]any{audit.ErrChainBroken}, args...)...))
	}
	idRows, err := tx.Query(ctx, `SELECT id FROM incidents ORDER BY opened_at, id`)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(idRows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var files []audit.IncidentFile
	for _, id := range ids {
		f, err := incidentTx(ctx, tx, audit.Name(id))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	// The ledger says which versions and notices must exist: a row
	// deleted from the register (even by a superuser who disabled the
	// triggers) without an incident.purged event is missing here.
	rows, err := tx.Query(ctx, `SELECT seq, payload FROM audit_events
		WHERE kind IN ('incident.opened', 'incident.updated', 'incident.purged', 'notice.sent') ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	wantVersions, wantNotices := map[audit.Name]int{}, map[audit.Name]int{}
	var tenantsSince legacyTenants
	for rows.Next() {
		var seq int64
		var payload []byte
		if err := rows.Scan(&seq, &payload); err != nil {
			rows.Close()
			return nil, err
		}
		env, err := audit.DecodeEnvelope(payload)
		var p audit.Payload
		if err == nil {
			p, err = env.DecodePayload()
		}
		if err != nil {
			broken("seq %d: %v", seq, err)
			continue
		}
		switch e := p.(type) {
		case *audit.IncidentOpened:
			wantVersions[e.Incident]++
			tenantsSince.see(seq, e.Tenants)
		case *audit.IncidentUpdated:
			wantVersions[e.Incident]++
			tenantsSince.see(seq, e.Tenants)
		case *audit.NoticeSent:
			wantNotices[e.Incident]++
		case *audit.IncidentPurged:
			delete(wantVersions, e.Incident)
			delete(wantNotices, e.Incident)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	have := map[audit.Name]audit.IncidentFile{}
	for _, f := range files {
		have[f.ID] = f
	}
	wanted := make([]audit.Name, 0, len(wantVersions))
	for id := range wantVersions {
		wanted = append(wanted, id)
	}
	slices.Sort(wanted)
	for _, id := range wanted {
		n := wantVersions[id]
		f, ok := have[id]
		switch {
		case !ok:
			broken("incident %s: the ledger records %d versions and %d notices, the register holds no such entry (deleted without incident.purged)",
				id, n, wantNotices[id])
		case len(f.Versions) != n || len(f.Notices) != wantNotices[id]:
			broken("incident %s: the ledger records %d versions and %d notices, the register holds %d and %d",
				id, n, wantNotices[id], len(f.Versions), len(f.Notices))
		}
	}
	for _, f := range files {
		if _, ok := wantVersions[f.ID]; !ok {
			broken("incident %s is in the register but not in the ledger", f.ID)
		}
	}
	for _, f := range files {
		var affected []cloison.TenantID
		for _, v := range f.Versions {
			p, err := ledgerPayload(ctx, tx, v.LedgerSeq)
			if errors.Is(err, pgx.ErrNoRows) {
				broken("incident %s: ledger seq %d, which the register names, is missing", f.ID, v.LedgerSeq)
				continue
			}
			if err != nil {
				return nil, err
			}
			var got audit.Digest
			var tenants []cloison.TenantID
			switch e := p.(type) {
			case *audit.IncidentOpened:
				got, tenants = e.ContentDigest, e.Tenants
			case *audit.IncidentUpdated:
				got, tenants = e.ContentDigest, e.Tenants
			}
			if got != v.Digest {
				broken("incident %s version %d: ledger seq %d names digest %s, stored content %s", f.ID, v.Version, v.LedgerSeq, got, v.Digest)
			}
			// The event names every tenant the entry has named so far:
			// that is what puts it in their tenant logs.
			affected = unionTenants(affected, v.AffectedTenants)
			if !sameTenants(tenants, affected) && !tenantsSince.legacy(v.LedgerSeq, tenants) {
				broken("incident %s version %d: ledger seq %d names tenants %v, the register %v", f.ID, v.Version, v.LedgerSeq, tenants, affected)
			}
		}
		for _, n := range f.Notices {
			p, err := ledgerPayload(ctx, tx, n.LedgerSeq)
			if errors.Is(err, pgx.ErrNoRows) {
				broken("incident %s: ledger seq %d, which the register names, is missing", f.ID, n.LedgerSeq)
				continue
			}
			if err != nil {
				return nil, err
			}
			e, ok := p.(*audit.NoticeSent)
			if !ok || e.ContentDigest != n.ContentDigest || e.Notice != n.Number || audit.Name(e.Incident) != f.ID ||
				(e.RecordDigest == nil) != (n.Record == nil) || (e.RecordDigest != nil && *e.RecordDigest != n.RecordDigest) {
				broken("incident %s notice %d does not match ledger seq %d", f.ID, n.Number, n.LedgerSeq)
			}
		}
	}
	if err := verifySettingsTx(ctx, tx); err != nil {
		if !errors.Is(err, audit.ErrChainBroken) {
			return nil, err
		}
		problems = append(problems, err)
	}
	return problems, nil
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
		rec, err := s.events.Prepare(audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.IncidentPurged{
			Incident: id, Versions: int64(len(f.Versions)), Notices: int64(len(f.Notices)),
			LastContentDigest: latest.Digest, RetainUntil: audit.DayOf(retain), Tenants: fileTenants(f),
		}})
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

// SetRegisterSettings records a new version of the organisation and privacy
// officer that entries opened from now on name, with its
// register.settings_set ledger event (version and digest only) in the same
// transaction. The cloisond flags (Config.Organization, Config.Contact) are
// what entries name before any version is set.
//
// Errors: audit.ErrInvalidIncident for invalid settings; ErrConflict when
// another version was set at the same time.
func (s *Store) SetRegisterSettings(ctx context.Context, actor audit.Name, org audit.Organization, contact audit.Contact) (audit.RegisterSettings, error) {
	var out audit.RegisterSettings
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		var next int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) + 1 FROM register_settings`).Scan(&next); err != nil {
			return err
		}
		r := audit.RegisterSettings{Version: next, Organization: org, Contact: contact}
		content, digest, err := r.Canonical()
		if err != nil {
			return err
		}
		rec, err := s.events.Prepare(audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.RegisterSettingsSet{Version: next, ContentDigest: digest}})
		if err != nil {
			return err
		}
		recs := []audit.Record{rec}
		if err := appendInTx(ctx, tx, recs); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO register_settings (version, content, content_sha256, recorded_by, ledger_seq) VALUES ($1, $2, $3, $4, $5)`,
			next, content, digest[:], string(actor), int64(recs[0].Seq)); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

// RegisterSettings returns the organisation and privacy officer new entries
// name: the latest version set through SetRegisterSettings, or version 0
// from the store's Config.
func (s *Store) RegisterSettings(ctx context.Context) (audit.RegisterSettings, error) {
	var out audit.RegisterSettings
	err := s.readOnly(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.settingsTx(ctx, tx)
		return err
	})
	return out, err
}

// settingsTx reads the latest settings version, checking its content
// against its digest and its ledger event.
func (s *Store) settingsTx(ctx context.Context, tx pgx.Tx) (audit.RegisterSettings, error) {
	var content, digest []byte
	var version, seq int64
	err := tx.QueryRow(ctx, `SELECT version, content, content_sha256, ledger_seq FROM register_settings ORDER BY version DESC LIMIT 1`).Scan(&version, &content, &digest, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit.RegisterSettings{Organization: s.cfg.Organization, Contact: s.cfg.Contact}, nil
	}
	if err != nil {
		return audit.RegisterSettings{}, err
	}
	p, err := ledgerPayload(ctx, tx, uint64(seq))
	if err != nil {
		return audit.RegisterSettings{}, err
	}
	e, ok := p.(*audit.RegisterSettingsSet)
	if !ok || e.Version != version || e.ContentDigest != audit.Digest(digest) || audit.Sum(content) != audit.Digest(digest) {
		return audit.RegisterSettings{}, fmt.Errorf("%w: register settings version %d do not match ledger seq %d", audit.ErrChainBroken, version, seq)
	}
	var r audit.RegisterSettings
	if err := decodeStrict(content, &r); err != nil || r.Version != version {
		return audit.RegisterSettings{}, fmt.Errorf("%w: register settings version %d: %v", ErrSchema, version, err)
	}
	return r, nil
}
