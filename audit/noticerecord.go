package audit

import (
	"fmt"
	"time"

	"github.com/cloison/cloison"
)

// MaxNoticeTextLen bounds the text of one notice kept in the register.
const MaxNoticeTextLen = 200000

// NoticeRecord is the canonical register record of one notice: every
// element the register shows for it. Its canonical JSON is stored verbatim
// in incident_notices.record and its SHA-256 is named by the notice.sent
// event (NoticeSent.RecordDigest), so recipient, method, dates and text are
// all under the ledger's hash. RecordedAt is the writer's clock when it
// recorded the notice (the database's own recorded_at column is not shown).
type NoticeRecord struct {
	Incident      Name             `json:"incident"`
	Notice        int64            `json:"notice"`
	Recipient     RecipientKind    `json:"recipient"`
	RecipientName string           `json:"recipient_name"`
	Tenant        cloison.TenantID `json:"tenant,omitempty"`
	SentAt        string           `json:"sent_at"` // TimeFormat
	Method        string           `json:"method"`
	ContentDigest Digest           `json:"content_digest"`
	Text          string           `json:"text,omitempty"`
	RecordedAt    string           `json:"recorded_at"` // TimeFormat
	RecordedBy    Name             `json:"recorded_by"`
}

// Record returns n's register record, recorded by actor at recordedAt.
func (n Notice) Record(actor Name, recordedAt time.Time) NoticeRecord {
	return NoticeRecord{Incident: n.Incident, Notice: n.Number, Recipient: n.Recipient, RecipientName: n.RecipientName,
		Tenant: n.Tenant, SentAt: n.SentAt.UTC().Format(TimeFormat), Method: n.Method, ContentDigest: n.ContentDigest,
		Text: n.Text, RecordedAt: recordedAt.UTC().Format(TimeFormat), RecordedBy: actor}
}

// Canonical returns r's canonical JSON and its SHA-256.
func (r NoticeRecord) Canonical() ([]byte, Digest, error) {
	b, err := MarshalCanonical(r)
	if err != nil {
		return nil, Digest{}, err
	}
	return b, Sum(b), nil
}

// Stored returns the notice r describes and the time and actor it names.
//
// Errors: ErrInvalidIncident for a record whose times do not parse or
// whose notice does not validate.
func (r NoticeRecord) Stored() (StoredNotice, error) {
	sent, err := time.Parse(TimeFormat, r.SentAt)
	if err != nil {
		return StoredNotice{}, fmt.Errorf("%w: notice sent_at: %v", ErrInvalidIncident, err)
	}
	rec, err := time.Parse(TimeFormat, r.RecordedAt)
	if err != nil {
		return StoredNotice{}, fmt.Errorf("%w: notice recorded_at: %v", ErrInvalidIncident, err)
	}
	n := Notice{Incident: r.Incident, Number: r.Notice, Recipient: r.Recipient, RecipientName: r.RecipientName,
		Tenant: r.Tenant, SentAt: sent, Method: r.Method, ContentDigest: r.ContentDigest, Text: r.Text}
	if err := n.Validate(); err != nil {
		return StoredNotice{}, err
	}
	return StoredNotice{Notice: n, RecordedAt: rec, RecordedBy: r.RecordedBy}, nil
}
