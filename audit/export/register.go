package export

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// RegisterJSONL is the register as canonical JSON Lines: every element the
// CSV and PDF files show, each record with the ledger entry that hashes it.
const RegisterJSONL = "register.jsonl"

// Register line types.
const (
	lineRegister = "register"
	lineIncident = "incident"
	lineVersion  = "version"
	lineNotice   = "notice"
)

// registerLine is one line of register.jsonl (canonical JSON, RFC 8785).
//
//	register: the first line: the regime the register is kept under, the
//	          PDF renderer (PDFRenderer) and, when one is set, the
//	          register settings in force at the export's end (their exact
//	          canonical content, SHA-256, version and register.settings_set
//	          seq): what register.pdf's header shows
//	incident: id, source, opened_at, opened_by and the incident.opened seq
//	version:  the version's exact stored canonical content, its SHA-256,
//	          recorded_at and recorded_by (its ledger event's), retain_until
//	          (derived from the content) and the incident.opened/updated seq
//	notice:   the notice's exact canonical record (audit.NoticeRecord) and
//	          the notice.sent seq; unhashed marks a notice written before
//	          its record existed (a verifier refuses it)
type registerLine struct {
	Type     string          `json:"type"`
	Incident audit.Name      `json:"incident,omitempty"`
	Regime   Regime          `json:"regime,omitempty"`
	Renderer string          `json:"renderer,omitempty"`
	Settings json.RawMessage `json:"settings,omitempty"`
	// The settings' register.settings_set event when it precedes the
	// range: its exact payload and its inclusion proof in the tree of
	// the export's checkpoint.
	SettingsEvent json.RawMessage `json:"settings_event,omitempty"`
	SettingsProof []string        `json:"settings_proof,omitempty"`
	LedgerSeq     uint64          `json:"ledger_seq"`
	Source        string          `json:"source,omitempty"`
	OpenedAt      string          `json:"opened_at,omitempty"`
	OpenedBy      audit.Name      `json:"opened_by,omitempty"`
	Version       int64           `json:"version,omitempty"`
	Content       json.RawMessage `json:"content,omitempty"`
	SHA256        *audit.Digest   `json:"sha256,omitempty"`
	RecordedAt    string          `json:"recorded_at,omitempty"`
	RecordedBy    audit.Name      `json:"recorded_by,omitempty"`
	RetainUntil   audit.Day       `json:"retain_until,omitempty"`
	Notice        int64           `json:"notice,omitempty"`
	Record        json.RawMessage `json:"record,omitempty"`
	Unhashed      bool            `json:"unhashed,omitempty"`
}

func ts(t time.Time) string { return t.UTC().Format(audit.TimeFormat) }

// RegisterHead is what register.jsonl's first line states about the
// register as a whole: what the PDF's header shows.
type RegisterHead struct {
	// Regime is the act the register is kept under (empty: private).
	Regime Regime
	// Settings is the exact canonical content of the register settings
	// (audit.RegisterSettings) in force at the export's end, nil when none
	// was ever set; SettingsSeq is its register.settings_set event.
	Settings    []byte
	SettingsSeq uint64
	// SettingsEvent and SettingsProof, when the event precedes the
	// exported range: its payload and its inclusion proof (tlog record
	// proof) in the tree of the export's end.
	SettingsEvent []byte
	SettingsProof []tlog.Hash
}

// Organization is the organisation the settings name (zero when none).
func (h RegisterHead) Organization() (audit.Organization, error) {
	if h.Settings == nil {
		return audit.Organization{}, nil
	}
	var r audit.RegisterSettings
	dec := json.NewDecoder(bytes.NewReader(h.Settings))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return audit.Organization{}, err
	}
	return r.Organization, nil
}

// WriteRegisterJSONL writes head and files as register.jsonl: the register
// line, then per incident its incident line, its versions and its notices.
func WriteRegisterJSONL(w io.Writer, head RegisterHead, files []audit.IncidentFile) error {
	bw := bufio.NewWriter(w)
	put := func(l registerLine) error {
		b, err := audit.MarshalCanonical(l)
		if err != nil {
			return err
		}
		bw.Write(b)
		return bw.WriteByte('\n')
	}
	hl := registerLine{Type: lineRegister, Regime: Regime(head.Regime.String()), Renderer: PDFRenderer}
	if head.Settings != nil {
		var r audit.RegisterSettings
		if err := json.Unmarshal(head.Settings, &r); err != nil {
			return fmt.Errorf("export: register settings: %w", err)
		}
		d := audit.Sum(head.Settings)
		hl.Settings, hl.SHA256, hl.Version, hl.LedgerSeq = head.Settings, &d, r.Version, head.SettingsSeq
		if head.SettingsEvent != nil {
			hl.SettingsEvent = head.SettingsEvent
			for _, h := range head.SettingsProof {
				hl.SettingsProof = append(hl.SettingsProof, base64.StdEncoding.EncodeToString(h[:]))
			}
		}
	}
	if err := put(hl); err != nil {
		return err
	}
	for _, f := range files {
		if err := put(registerLine{Type: lineIncident, Incident: f.ID, LedgerSeq: f.LedgerSeq, Source: string(f.Source),
			OpenedAt: ts(f.OpenedAt), OpenedBy: f.OpenedBy}); err != nil {
			return err
		}
		for _, v := range f.Versions {
			d := v.Digest
			if err := put(registerLine{Type: lineVersion, Incident: f.ID, LedgerSeq: v.LedgerSeq, Version: v.Version, Content: v.Content,
				SHA256: &d, RecordedAt: ts(v.RecordedAt), RecordedBy: v.RecordedBy, RetainUntil: v.RetainUntil}); err != nil {
				return err
			}
		}
		for _, n := range f.Notices {
			l := registerLine{Type: lineNotice, Incident: f.ID, LedgerSeq: n.LedgerSeq, Notice: n.Number, Record: n.Record}
			if n.Record == nil {
				b, err := audit.MarshalCanonical(n.Notice.Record(n.RecordedBy, n.RecordedAt))
				if err != nil {
					return err
				}
				l.Record, l.Unhashed = b, true
			}
			if err := put(l); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// checkSettingsEvent holds a register line's settings to their
// register.settings_set event outside the range: the event is in the tree
// of the export's checkpoint at its seq (a record proof), and names the
// settings' version and digest.
func checkSettingsEvent(l registerLine, tree audit.TreeHead, digest audit.Digest) error {
	if l.LedgerSeq == 0 || l.LedgerSeq > tree.Size {
		return fmt.Errorf("ledger seq %d is outside the tree of size %d", l.LedgerSeq, tree.Size)
	}
	proof := make(tlog.RecordProof, len(l.SettingsProof))
	for i, s := range l.SettingsProof {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			return fmt.Errorf("proof hash %d does not decode", i)
		}
		copy(proof[i][:], b)
	}
	if err := tlog.CheckRecord(proof, int64(tree.Size), tree.Root, int64(l.LedgerSeq-1), tlog.RecordHash(l.SettingsEvent)); err != nil {
		return fmt.Errorf("its event at seq %d is not in the checkpoint's tree: %v", l.LedgerSeq, err)
	}
	env, err := audit.DecodeEnvelope(l.SettingsEvent)
	var p audit.Payload
	if err == nil {
		p, err = env.DecodePayload()
	}
	e, ok := p.(*audit.RegisterSettingsSet)
	if err != nil || !ok || e.Version != l.Version || e.ContentDigest != digest {
		return fmt.Errorf("the event at seq %d does not set this version and digest", l.LedgerSeq)
	}
	return nil
}

// IsRegisterKind reports whether k is a ledger event the register's
// records are checked against.
func IsRegisterKind(k audit.Kind) bool {
	switch k {
	case audit.KindIncidentOpened, audit.KindIncidentUpdated, audit.KindNoticeSent, audit.KindIncidentPurged, audit.KindRegisterSettings:
		return true
	}
	return false
}

type ledgerEvent struct {
	env audit.Envelope
	p   audit.Payload
}

// VerifyRegisterJSONL reads register.jsonl and holds every record to the
// exported ledger: events maps each register event of the exported range
// (IsRegisterKind) by seq. Every version's SHA-256 is recomputed from its
// content and compared with its ledger event's digest, every notice
// record's with notice.sent's record_digest; recorded and opened times and
// actors must be their events'; retain_until must follow from the
// content. Every register event of an incident opened in the range must
// have its record unless the incident was purged in the range.
//
// The first line must be the register line, of this renderer
// (PDFRenderer) and a known regime. Its settings must be the latest
// register.settings_set of the range when the range sets any (content
// digest and version those of the event); settings whose event precedes
// the range (from) are held to it by its payload and inclusion proof in
// tree, the export's checkpoint, which the line must carry. It returns the register as read, for the CSV and PDF
// files to be compared with.
//
// Errors: ErrVerify naming the incident, record and reason.
func VerifyRegisterJSONL(r io.Reader, events map[uint64]audit.Record, from uint64, tree audit.TreeHead) (VerifiedHead, []audit.IncidentFile, error) {
	head, files, err := verifyRegisterJSONL(r, events, from, tree)
	if err != nil {
		return VerifiedHead{}, nil, err
	}
	return head, files, nil
}

// VerifiedHead is a register line as VerifyRegisterJSONL checked it.
type VerifiedHead struct {
	RegisterHead
	// SettingsChecked: the settings' event is in the exported range and
	// names their digest (false when no settings are set, or their event
	// precedes the range: then only the manifest's signer vouches for
	// them).
	SettingsChecked bool
}

func verifyRegisterJSONL(r io.Reader, events map[uint64]audit.Record, from uint64, tree audit.TreeHead) (VerifiedHead, []audit.IncidentFile, error) {
	var head VerifiedHead
	var latestSettings *audit.RegisterSettingsSet
	var latestSettingsSeq uint64
	decoded := map[uint64]ledgerEvent{}
	purged := map[audit.Name]uint64{}
	opened := map[audit.Name]bool{}
	for seq, rec := range events {
		env, err := audit.DecodeEnvelope(rec.Payload)
		if err != nil {
			return head, nil, fmt.Errorf("%w: ledger seq %d: %v", ErrVerify, seq, err)
		}
		p, err := env.DecodePayload()
		if err != nil {
			return head, nil, fmt.Errorf("%w: ledger seq %d: %v", ErrVerify, seq, err)
		}
		decoded[seq] = ledgerEvent{env, p}
		switch e := p.(type) {
		case *audit.IncidentPurged:
			purged[e.Incident] = seq
		case *audit.IncidentOpened:
			opened[e.Incident] = true
		case *audit.RegisterSettingsSet:
			if latestSettings == nil || e.Version > latestSettings.Version {
				latestSettings, latestSettingsSeq = e, seq
			}
		}
	}
	used := map[uint64]bool{}
	type claim struct {
		seq uint64
		typ string
	}
	claimed := map[claim]bool{}
	var files []audit.IncidentFile
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 32<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s line %d: %s", ErrVerify, RegisterJSONL, n, fmt.Sprintf(format, args...))
		}
		if !audit.IsCanonical(line) {
			return head, nil, bad("not canonical JSON")
		}
		var l registerLine
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return head, nil, bad("%v", err)
		}
		if (n == 1) != (l.Type == lineRegister) {
			return head, nil, bad("the register line must come first, once (an export made before the PDF was rendered from %s)", RegisterJSONL)
		}
		if l.Type == lineRegister {
			if l.Renderer != PDFRenderer {
				return head, nil, bad("register.pdf was rendered by %q; this verifier renders %q and cannot compare it: verify with the cloisonctl that made the export", l.Renderer, PDFRenderer)
			}
			if err := new(Regime).Set(string(l.Regime)); err != nil || l.Incident != "" {
				return head, nil, bad("register line: %v", err)
			}
			head.Regime = l.Regime
			if l.Settings == nil {
				if latestSettings != nil {
					return head, nil, bad("the register names no settings, ledger seq %d sets version %d", latestSettingsSeq, latestSettings.Version)
				}
				continue
			}
			var rs audit.RegisterSettings
			sdec := json.NewDecoder(bytes.NewReader(l.Settings))
			sdec.DisallowUnknownFields()
			d := audit.Sum(l.Settings)
			if err := sdec.Decode(&rs); err != nil || !audit.IsCanonical(l.Settings) || rs.Version != l.Version || l.SHA256 == nil || *l.SHA256 != d {
				return head, nil, bad("register settings do not decode to their version and digest")
			}
			head.Settings, head.SettingsSeq = l.Settings, l.LedgerSeq
			switch {
			case latestSettings != nil:
				if latestSettingsSeq != l.LedgerSeq || latestSettings.Version != rs.Version || latestSettings.ContentDigest != d {
					return head, nil, bad("register settings version %d (seq %d) are not the latest the range sets: version %d at seq %d", rs.Version, l.LedgerSeq, latestSettings.Version, latestSettingsSeq)
				}
				head.SettingsChecked = true
			case l.LedgerSeq >= from:
				return head, nil, bad("register settings name ledger seq %d, which sets no settings in the exported range", l.LedgerSeq)
			case l.SettingsEvent != nil:
				if err := checkSettingsEvent(l, tree, d); err != nil {
					return head, nil, bad("register settings version %d: %v", rs.Version, err)
				}
				head.SettingsChecked = true
			}
			if !head.SettingsChecked {
				return head, nil, bad("register settings version %d (seq %d, before the range) come without their event's inclusion proof", rs.Version, l.LedgerSeq)
			}
			continue
		}
		ev, ok := decoded[l.LedgerSeq]
		if !ok {
			return head, nil, bad("incident %s: ledger seq %d is not a register event of the exported range", l.Incident, l.LedgerSeq)
		}
		// An incident line and its version 1 share incident.opened.
		if claimed[claim{l.LedgerSeq, l.Type}] {
			return head, nil, bad("ledger seq %d is claimed by two records", l.LedgerSeq)
		}
		claimed[claim{l.LedgerSeq, l.Type}] = true
		used[l.LedgerSeq] = true
		if ps, ok := purged[l.Incident]; ok {
			return head, nil, bad("incident %s is in the register but was purged at seq %d", l.Incident, ps)
		}
		var cur *audit.IncidentFile
		if len(files) > 0 && files[len(files)-1].ID == l.Incident {
			cur = &files[len(files)-1]
		}
		switch l.Type {
		case lineIncident:
			e, ok := ev.p.(*audit.IncidentOpened)
			if !ok || e.Incident != l.Incident || string(e.Source) != l.Source {
				return head, nil, bad("incident %s does not match its incident.opened event at seq %d", l.Incident, l.LedgerSeq)
			}
			if l.OpenedAt != ts(ev.env.OccurredAt) || l.OpenedBy != ev.env.Actor {
				return head, nil, bad("incident %s: opened at/by differ from its ledger event", l.Incident)
			}
			if cur != nil {
				return head, nil, bad("incident %s appears twice", l.Incident)
			}
			files = append(files, audit.IncidentFile{ID: l.Incident, Source: audit.IncidentSource(l.Source), OpenedAt: ev.env.OccurredAt,
				OpenedBy: l.OpenedBy, LedgerSeq: l.LedgerSeq})
		case lineVersion:
			if cur == nil || len(cur.Notices) > 0 || l.Version != int64(len(cur.Versions))+1 {
				return head, nil, bad("incident %s version %d is out of order", l.Incident, l.Version)
			}
			d := audit.Sum(l.Content)
			if l.SHA256 == nil || *l.SHA256 != d {
				return head, nil, bad("incident %s version %d: content SHA-256 is %s, the record says another", l.Incident, l.Version, d)
			}
			var want audit.Digest
			switch e := ev.p.(type) {
			case *audit.IncidentOpened:
				if e.Incident != l.Incident || e.Version != l.Version || l.Version != 1 {
					return head, nil, bad("incident %s version %d does not match ledger seq %d", l.Incident, l.Version, l.LedgerSeq)
				}
				want = e.ContentDigest
			case *audit.IncidentUpdated:
				if e.Incident != l.Incident || e.Version != l.Version {
					return head, nil, bad("incident %s version %d does not match ledger seq %d", l.Incident, l.Version, l.LedgerSeq)
				}
				want = e.ContentDigest
			default:
				return head, nil, bad("incident %s version %d: ledger seq %d is a %s event", l.Incident, l.Version, l.LedgerSeq, ev.env.Kind)
			}
			if want != d {
				return head, nil, bad("incident %s version %d: content digest %s, ledger seq %d names %s", l.Incident, l.Version, d, l.LedgerSeq, want)
			}
			var iv audit.IncidentVersion
			vdec := json.NewDecoder(bytes.NewReader(l.Content))
			vdec.DisallowUnknownFields()
			if err := vdec.Decode(&iv); err != nil {
				return head, nil, bad("incident %s version %d: %v", l.Incident, l.Version, err)
			}
			if iv.Incident != l.Incident || iv.Version != l.Version {
				return head, nil, bad("incident %s version %d: content names %s version %d", l.Incident, l.Version, iv.Incident, iv.Version)
			}
			retain, err := iv.RetainUntil()
			if err != nil || retain != l.RetainUntil {
				return head, nil, bad("incident %s version %d: retain_until %s does not follow from the awareness date (%s)", l.Incident, l.Version, l.RetainUntil, retain)
			}
			if l.RecordedAt != ts(ev.env.OccurredAt) || l.RecordedBy != ev.env.Actor {
				return head, nil, bad("incident %s version %d: recorded at/by differ from its ledger event", l.Incident, l.Version)
			}
			cur.Versions = append(cur.Versions, audit.StoredVersion{IncidentVersion: iv, Content: l.Content, Digest: d,
				RecordedAt: ev.env.OccurredAt, RecordedBy: l.RecordedBy, LedgerSeq: l.LedgerSeq, RetainUntil: retain})
		case lineNotice:
			if cur == nil || len(cur.Versions) == 0 || l.Notice != int64(len(cur.Notices))+1 {
				return head, nil, bad("incident %s notice %d is out of order", l.Incident, l.Notice)
			}
			if l.Unhashed {
				return head, nil, bad("incident %s notice %d was recorded before notices had a hashed record: its recipient, method and dates are under no hash", l.Incident, l.Notice)
			}
			e, ok := ev.p.(*audit.NoticeSent)
			if !ok || e.Incident != l.Incident || e.Notice != l.Notice {
				return head, nil, bad("incident %s notice %d does not match ledger seq %d", l.Incident, l.Notice, l.LedgerSeq)
			}
			d := audit.Sum(l.Record)
			if e.RecordDigest == nil || *e.RecordDigest != d {
				return head, nil, bad("incident %s notice %d: record SHA-256 %s is not the one ledger seq %d names", l.Incident, l.Notice, d, l.LedgerSeq)
			}
			var nr audit.NoticeRecord
			ndec := json.NewDecoder(bytes.NewReader(l.Record))
			ndec.DisallowUnknownFields()
			if err := ndec.Decode(&nr); err != nil {
				return head, nil, bad("incident %s notice %d: %v", l.Incident, l.Notice, err)
			}
			sn, err := nr.Stored()
			if err != nil {
				return head, nil, bad("incident %s notice %d: %v", l.Incident, l.Notice, err)
			}
			if sn.Incident != l.Incident || sn.Number != l.Notice || sn.Recipient != e.Recipient || sn.ContentDigest != e.ContentDigest ||
				ts(sn.SentAt) != ts(ev.env.OccurredAt) || sn.Tenant != ev.env.Tenant || sn.RecordedBy != ev.env.Actor {
				return head, nil, bad("incident %s notice %d: record differs from its ledger event at seq %d", l.Incident, l.Notice, l.LedgerSeq)
			}
			sn.LedgerSeq, sn.Record, sn.RecordDigest = l.LedgerSeq, l.Record, d
			cur.Notices = append(cur.Notices, sn)
		default:
			return head, nil, bad("unknown record type %q", l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return head, nil, fmt.Errorf("%w: %s: %v", ErrVerify, RegisterJSONL, err)
	}
	for seq, ev := range decoded {
		if used[seq] {
			continue
		}
		var id audit.Name
		switch e := ev.p.(type) {
		case *audit.IncidentOpened:
			id = e.Incident
		case *audit.IncidentUpdated:
			id = e.Incident
		case *audit.NoticeSent:
			id = e.Incident
		default:
			continue
		}
		if _, gone := purged[id]; gone || !opened[id] {
			continue // purged in the range, or opened before it
		}
		return head, nil, fmt.Errorf("%w: %s: ledger seq %d (%s of incident %s) has no register record", ErrVerify, RegisterJSONL, seq, ev.env.Kind, id)
	}
	return head, files, nil
}
