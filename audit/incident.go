package audit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cloison/cloison"
)

// NewIncidentID returns a fresh incident identifier: inc-YYYYMMDD-<8 hex>,
// the day of now in UTC and four random bytes, so identifiers sort by day
// and two opened the same day do not collide.
func NewIncidentID(now time.Time) Name {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return Name(fmt.Sprintf("inc-%s-%s", now.UTC().Format("20060102"), hex.EncodeToString(b[:])))
}

// IncidentSource says how an incident entered the register.
type IncidentSource string

// Incident sources.
const (
	SourceIsolationViolation IncidentSource = "isolation_violation"
	SourceTransferFailure    IncidentSource = "transfer_verification_failed"
	SourceAdmin              IncidentSource = "admin"
	// SourceTenantReport: a tenant reported a suspicious response
	// (POST /v1/reports); the entry is a potential incident until a replay
	// or the privacy officer decides.
	SourceTenantReport IncidentSource = "tenant_report"
)

func (s IncidentSource) check() error {
	switch s {
	case SourceIsolationViolation, SourceTransferFailure, SourceAdmin, SourceTenantReport:
		return nil
	}
	return fmt.Errorf("%w: source %q", ErrInvalidIncident, s)
}

// AssessmentStatus tracks the serious-injury assessment (Loi 25, art. 3.7).
type AssessmentStatus string

// Assessment states.
const (
	AssessmentPending   AssessmentStatus = "pending"
	AssessmentCompleted AssessmentStatus = "completed"
)

// IncidentStatus is open until the organisation closes the file.
type IncidentStatus string

// Incident states.
const (
	IncidentOpen   IncidentStatus = "open"
	IncidentClosed IncidentStatus = "closed"
	// IncidentUnderAssessment: a potential incident (a tenant's report)
	// not yet confirmed or dismissed.
	IncidentUnderAssessment IncidentStatus = "under_assessment"
)

// RecipientKind says to whom a notice was sent.
type RecipientKind string

// Notice recipients: the Commission d'accès à l'information (art. 3.5), the
// persons concerned (art. 3.5), the public (a public notice, recorded in the
// register under s. 7(7)), an authority outside Québec (s. 3(11)), and each
// affected tenant (the provider notifies its client without delay, art.
// 18.3). Citations lists every number cited.
const (
	RecipientCAI              RecipientKind = "cai"
	RecipientPersons          RecipientKind = "persons"
	RecipientPublic           RecipientKind = "public"
	RecipientForeignAuthority RecipientKind = "foreign_authority"
	RecipientTenant           RecipientKind = "tenant"
)

// RecipientKinds lists every recipient kind.
var RecipientKinds = []RecipientKind{RecipientCAI, RecipientPersons, RecipientPublic, RecipientForeignAuthority, RecipientTenant}

func (r RecipientKind) check() error {
	if slices.Contains(RecipientKinds, r) {
		return nil
	}
	return fmt.Errorf("%w: recipient kind %q", ErrInvalidEvent, r)
}

// Period is a date or a period, possibly approximate (Règlement s. 7(3)-(4)).
type Period struct {
	Start       Day  `json:"start"`
	End         Day  `json:"end,omitempty"` // empty: a single date
	Approximate bool `json:"approximate"`
}

// Last returns the end of the period, or its start for a single date.
func (p Period) Last() Day {
	if p.End != "" {
		return p.End
	}
	return p.Start
}

func (p Period) check(field string) error {
	if err := checkDay(field+".start", p.Start, false); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	if err := checkDay(field+".end", p.End, true); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	if p.End != "" && p.End < p.Start {
		return fmt.Errorf("%w: %s ends before it starts", ErrInvalidIncident, field)
	}
	return nil
}

// Assessment holds the elements of the serious-injury assessment
// (Règlement s. 7(6); Loi 25 art. 3.7).
type Assessment struct {
	Status              AssessmentStatus `json:"status"`
	Sensitivity         string           `json:"sensitivity,omitempty"`    // sensibilité des renseignements
	MaliciousUses       string           `json:"malicious_uses,omitempty"` // utilisations malveillantes possibles
	Consequences        string           `json:"consequences,omitempty"`   // conséquences appréhendées
	Likelihood          string           `json:"likelihood,omitempty"`     // probabilité
	RiskOfSeriousInjury *bool            `json:"risk_of_serious_injury"`   // nil while pending
	CompletedOn         Day              `json:"completed_on,omitempty"`
	Consulted           []Consultation   `json:"consulted,omitempty"` // art. 3.7: who was consulted, when
}

// Consultation records who was consulted for the assessment and when.
type Consultation struct {
	Who  string `json:"who"`
	Date Day    `json:"date"`
}

// Measure is an action taken or planned, with its date.
type Measure struct {
	What string `json:"what"`
	Date Day    `json:"date,omitempty"`
}

// Contact is the person to contact about the incident (Règlement s. 3).
type Contact struct {
	Name  string `json:"name"`
	Title string `json:"title,omitempty"`
	Phone string `json:"phone,omitempty"`
	Email string `json:"email,omitempty"`
}

// Organization identifies the enterprise keeping the register (s. 3(1)).
type Organization struct {
	Name string `json:"name"`
	NEQ  string `json:"neq,omitempty"` // Québec enterprise number
}

// RegisterSettings is one version of the organisation keeping the register
// and its privacy officer, as set through the admin API (the cloisond flags
// are the default before any is set). New entries copy the latest version.
// Its canonical JSON is stored verbatim in the register and its SHA-256
// chained into the ledger (register.settings_set), so the names and phone
// numbers stay out of the ledger's text.
type RegisterSettings struct {
	Version      int64        `json:"version"`
	Organization Organization `json:"organization"`
	Contact      Contact      `json:"contact"`
}

// MaxSettingLen bounds each element of RegisterSettings.
const MaxSettingLen = 200

// Validate checks that the organisation and the privacy officer are named,
// that a NEQ is ten digits, an e-mail address has an @, and every element
// is printable UTF-8 of at most MaxSettingLen bytes.
func (r RegisterSettings) Validate() error {
	if r.Version < 1 {
		return fmt.Errorf("%w: settings version %d", ErrInvalidIncident, r.Version)
	}
	fields := []struct{ name, v string }{
		{"organization.name", r.Organization.Name}, {"organization.neq", r.Organization.NEQ},
		{"contact.name", r.Contact.Name}, {"contact.title", r.Contact.Title},
		{"contact.phone", r.Contact.Phone}, {"contact.email", r.Contact.Email},
	}
	for _, f := range fields {
		if len(f.v) > MaxSettingLen || !utf8.ValidString(f.v) || strings.ContainsFunc(f.v, unicode.IsControl) || strings.TrimSpace(f.v) != f.v {
			return fmt.Errorf("%w: %s must be printable UTF-8 of at most %d bytes, without surrounding spaces", ErrInvalidIncident, f.name, MaxSettingLen)
		}
	}
	if r.Organization.Name == "" || r.Contact.Name == "" {
		return fmt.Errorf("%w: organization.name and contact.name are required (Règlement s. 3(1)-(2))", ErrInvalidIncident)
	}
	if n := r.Organization.NEQ; n != "" && (len(n) != 10 || strings.Trim(n, "0123456789") != "") {
		return fmt.Errorf("%w: organization.neq is ten digits", ErrInvalidIncident)
	}
	if e := r.Contact.Email; e != "" && (strings.Count(e, "@") != 1 || strings.HasPrefix(e, "@") || strings.HasSuffix(e, "@") || strings.ContainsRune(e, ' ')) {
		return fmt.Errorf("%w: contact.email is not an e-mail address", ErrInvalidIncident)
	}
	return nil
}

// Canonical returns r's RFC 8785 JSON and its SHA-256, after Validate.
func (r RegisterSettings) Canonical() ([]byte, Digest, error) {
	if err := r.Validate(); err != nil {
		return nil, Digest{}, err
	}
	b, err := MarshalCanonical(r)
	if err != nil {
		return nil, Digest{}, err
	}
	return b, Sum(b), nil
}

// IncidentType is the kind of confidentiality incident (Loi 25 art. 3.6:
// access, use or communication not authorized by law, loss, or any other
// breach of the protection of the information).
type IncidentType string

// Incident types.
const (
	TypeUnauthorizedAccess        IncidentType = "unauthorized_access"
	TypeUnauthorizedUse           IncidentType = "unauthorized_use"
	TypeUnauthorizedCommunication IncidentType = "unauthorized_communication"
	TypeLoss                      IncidentType = "loss"
	TypeOther                     IncidentType = "other"
)

// IncidentTypes lists every incident type.
var IncidentTypes = []IncidentType{TypeUnauthorizedAccess, TypeUnauthorizedUse, TypeUnauthorizedCommunication, TypeLoss, TypeOther}

// Communication records a communication of personal information made
// without consent to someone who can reduce the risk of injury (Loi 25 art.
// 3.5 al. 2, CiteActCommunications): to whom, what, why, and when.
type Communication struct {
	To     string `json:"to"`
	What   string `json:"what"`
	Reason string `json:"reason"`
	Date   Day    `json:"date"`
}

// Deferral records that notice to the persons concerned was deferred
// because it could hamper an investigation (Loi 25 art. 3.5 al. 3,
// CiteActDeferral).
type Deferral struct {
	Reason string `json:"reason"`
	Until  Day    `json:"until,omitempty"`
}

// EarlyAwarenessDays is how far before the entry's opening an awareness
// date may be without the export flagging it.
const EarlyAwarenessDays = 30

// IncidentVersion is one complete state of a register entry. The register
// is kept up to date by appending versions, never by editing one. Its
// canonical JSON (RFC 8785) is stored verbatim and its SHA-256 is chained
// into the ledger (incident.opened / incident.updated).
//
// Field comments cite the Règlement sur les incidents de confidentialité
// (RLRQ c., r. 3.1): s. 7 lists the register's content, s. 3 what a
// notice to the Commission d'accès à l'information adds.
type IncidentVersion struct {
	Incident Name           `json:"incident"`
	Version  int64          `json:"version"`
	Status   IncidentStatus `json:"status"`
	Source   IncidentSource `json:"source"`

	PersonalInfo            string     `json:"personal_info,omitempty"`             // s. 7(1) description of the personal information
	PersonalInfoUndescribed string     `json:"personal_info_undescribed,omitempty"` // s. 7(1) or why it cannot be described
	Circumstances           string     `json:"circumstances"`                       // s. 7(2) brief description of the circumstances
	Occurred                Period     `json:"occurred"`                            // s. 7(3) date or period of the incident
	Awareness               Period     `json:"awareness"`                           // s. 7(4) date or period of awareness
	PersonsConcerned        int64      `json:"persons_concerned"`                   // s. 7(5) number of persons concerned
	PersonsApproximate      bool       `json:"persons_approximate"`                 // s. 7(5) or an approximation
	Assessment              Assessment `json:"assessment"`                          // s. 7(6) serious-injury assessment
	PublicNotice            bool       `json:"public_notice"`                       // s. 7(7) whether public notice was given
	PublicNoticeReason      string     `json:"public_notice_reason,omitempty"`      // s. 7(7) and why
	MeasuresTaken           []Measure  `json:"measures_taken"`                      // s. 7(8) measures to reduce the risk of injury

	Organization       Organization `json:"organization"`                  // s. 3(1) name and NEQ
	Contact            Contact      `json:"contact"`                       // s. 3(2) person to contact
	Cause              string       `json:"cause,omitempty"`               // s. 3(4) cause, if known
	PersonsInQuebec    int64        `json:"persons_in_quebec"`             // s. 3(7) persons residing in Québec
	NotificationMethod string       `json:"notification_method,omitempty"` // s. 3(9) how persons are notified
	NotificationDate   Day          `json:"notification_date,omitempty"`   // s. 3(9) when
	MeasuresPlanned    []Measure    `json:"measures_planned"`              // s. 3(10) measures planned, with dates
	ForeignAuthorities []string     `json:"foreign_authorities"`           // s. 3(11) authorities outside Québec notified

	AffectedTenants   []cloison.TenantID `json:"affected_tenants"`
	AffectedResponses int64              `json:"affected_responses"` // responses withheld or exposed
	LedgerEvents      []int64            `json:"ledger_events"`      // seqs of the detection events

	// The Règlement's detailed elements, added after the first versions
	// were written; omitted when empty, so older versions keep
	// their canonical bytes and digests.
	Type                    IncidentType    `json:"type,omitempty"`                      // Act s. 3.6 unauthorized access, use or communication; loss; other
	InfoCategories          []string        `json:"info_categories,omitempty"`           // s. 3(3) categories of personal information
	PersonsUnknown          bool            `json:"persons_unknown,omitempty"`           // s. 7(5) the number is not known (not 0)
	PersonsInQuebecApprox   bool            `json:"persons_in_quebec_approx,omitempty"`  // s. 3(7) or an approximation
	PersonsInQuebecUnknown  bool            `json:"persons_in_quebec_unknown,omitempty"` // s. 3(7) not known (not 0)
	MeasuresSuggested       []Measure       `json:"measures_suggested,omitempty"`        // s. 4(5) measures suggested to persons
	Communications          []Communication `json:"communications,omitempty"`            // Act s. 3.5 para. 2
	PersonsNoticeDeferral   *Deferral       `json:"persons_notice_deferral,omitempty"`   // Act s. 3.5 para. 3
	PrivacyOfficerConsulted *Consultation   `json:"privacy_officer_consulted,omitempty"` // Act s. 3.7: required for a completed assessment

	// Grouped automatic incidents: the cause's key
	// (Detection.GroupKey), how many detections the entry holds, and the
	// requests they withheld (identifiers only). Omitted when empty.
	DetectionGroup   string              `json:"detection_group,omitempty"`
	Detections       int64               `json:"detections,omitempty"`
	AffectedRequests []cloison.RequestID `json:"affected_requests,omitempty"`
}

// MaxTextLen bounds each free-text element of the register.
const MaxTextLen = 20000

// Validate checks that every element the register requires is present and
// consistent.
func (v IncidentVersion) Validate() error {
	if err := CheckName("incident", string(v.Incident)); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	if v.Version < 1 {
		return fmt.Errorf("%w: version %d", ErrInvalidIncident, v.Version)
	}
	if v.Status != IncidentOpen && v.Status != IncidentClosed && v.Status != IncidentUnderAssessment {
		return fmt.Errorf("%w: status %q", ErrInvalidIncident, v.Status)
	}
	if err := v.Source.check(); err != nil {
		return err
	}
	texts := map[string]string{
		"personal_info": v.PersonalInfo, "personal_info_undescribed": v.PersonalInfoUndescribed,
		"circumstances": v.Circumstances, "public_notice_reason": v.PublicNoticeReason,
		"sensitivity": v.Assessment.Sensitivity, "malicious_uses": v.Assessment.MaliciousUses,
		"consequences": v.Assessment.Consequences, "likelihood": v.Assessment.Likelihood,
		"cause": v.Cause, "notification_method": v.NotificationMethod,
		"organization.name": v.Organization.Name, "contact.name": v.Contact.Name,
	}
	for field, s := range texts {
		if len(s) > MaxTextLen || !utf8.ValidString(s) {
			return fmt.Errorf("%w: %s is not valid UTF-8 of at most %d bytes", ErrInvalidIncident, field, MaxTextLen)
		}
	}
	if strings.TrimSpace(v.PersonalInfo) == "" && strings.TrimSpace(v.PersonalInfoUndescribed) == "" {
		return fmt.Errorf("%w: describe the personal information or say why it cannot be described (s. 7(1))", ErrInvalidIncident)
	}
	if strings.TrimSpace(v.Circumstances) == "" {
		return fmt.Errorf("%w: circumstances are required (s. 7(2))", ErrInvalidIncident)
	}
	if err := v.Occurred.check("occurred"); err != nil {
		return err
	}
	if err := v.Awareness.check("awareness"); err != nil {
		return err
	}
	if v.PersonsConcerned < 0 || v.PersonsInQuebec < 0 || v.AffectedResponses < 0 {
		return fmt.Errorf("%w: negative count", ErrInvalidIncident)
	}
	if v.PersonsUnknown && v.PersonsConcerned != 0 || v.PersonsInQuebecUnknown && v.PersonsInQuebec != 0 {
		return fmt.Errorf("%w: a number of persons is either given or unknown, not both", ErrInvalidIncident)
	}
	if err := v.checkDates(time.Now()); err != nil {
		return err
	}
	if v.Type != "" && !slices.Contains(IncidentTypes, v.Type) {
		return fmt.Errorf("%w: type %q (want one of %v)", ErrInvalidIncident, v.Type, IncidentTypes)
	}
	if len(v.InfoCategories) > 64 {
		return fmt.Errorf("%w: more than 64 categories of personal information", ErrInvalidIncident)
	}
	for _, c := range v.InfoCategories {
		if strings.TrimSpace(c) == "" || len(c) > 200 || !utf8.ValidString(c) {
			return fmt.Errorf("%w: a category of personal information is empty, too long or not UTF-8", ErrInvalidIncident)
		}
	}
	for i, c := range v.Communications {
		if strings.TrimSpace(c.To) == "" || strings.TrimSpace(c.What) == "" || strings.TrimSpace(c.Reason) == "" || checkDay("communication.date", c.Date, false) != nil {
			return fmt.Errorf("%w: communications[%d] needs to whom, what, why and a date (%s)", ErrInvalidIncident, i, CiteActCommunications.EN())
		}
		if len(c.To)+len(c.What)+len(c.Reason) > MaxTextLen || !utf8.ValidString(c.To+c.What+c.Reason) {
			return fmt.Errorf("%w: communications[%d] is too long or not UTF-8", ErrInvalidIncident, i)
		}
	}
	if d := v.PersonsNoticeDeferral; d != nil {
		if strings.TrimSpace(d.Reason) == "" || len(d.Reason) > MaxTextLen || !utf8.ValidString(d.Reason) || checkDay("persons_notice_deferral.until", d.Until, true) != nil {
			return fmt.Errorf("%w: a deferral of notice to persons states its reason (%s)", ErrInvalidIncident, CiteActDeferral.EN())
		}
	}
	if c := v.PrivacyOfficerConsulted; c != nil && (strings.TrimSpace(c.Who) == "" || checkDay("privacy_officer_consulted.date", c.Date, false) != nil) {
		return fmt.Errorf("%w: privacy_officer_consulted needs who and a date", ErrInvalidIncident)
	}
	a := v.Assessment
	switch a.Status {
	case AssessmentPending:
	case AssessmentCompleted:
		if a.RiskOfSeriousInjury == nil || a.Sensitivity == "" || a.MaliciousUses == "" || a.Consequences == "" || a.Likelihood == "" {
			return fmt.Errorf("%w: a completed assessment states sensitivity, malicious uses, consequences, likelihood and the risk (s. 7(6))", ErrInvalidIncident)
		}
		if err := checkDay("assessment.completed_on", a.CompletedOn, false); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
		}
		if v.Type != "" && v.PrivacyOfficerConsulted == nil && len(a.Consulted) == 0 {
			// Entries that state their type follow the current form: the
			// privacy officer's consultation is mandatory (art. 3.7).
			return fmt.Errorf("%w: a completed assessment records the consultation of the privacy officer (art. 3.7)", ErrInvalidIncident)
		}
	default:
		return fmt.Errorf("%w: assessment status %q", ErrInvalidIncident, a.Status)
	}
	for i, c := range a.Consulted {
		if strings.TrimSpace(c.Who) == "" || checkDay("consulted.date", c.Date, false) != nil {
			return fmt.Errorf("%w: consulted[%d] needs who and a date", ErrInvalidIncident, i)
		}
	}
	if v.PublicNotice && strings.TrimSpace(v.PublicNoticeReason) == "" {
		return fmt.Errorf("%w: a public notice needs its reason (s. 7(7))", ErrInvalidIncident)
	}
	if err := checkDay("notification_date", v.NotificationDate, true); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	for _, ms := range [][]Measure{v.MeasuresTaken, v.MeasuresPlanned} {
		for _, m := range ms {
			if strings.TrimSpace(m.What) == "" || checkDay("measure.date", m.Date, true) != nil {
				return fmt.Errorf("%w: a measure needs a description and a valid date", ErrInvalidIncident)
			}
		}
	}
	if err := checkNames("affected_tenants", v.AffectedTenants); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	return nil
}

// Normalize clears an "unknown" flag whose number has since been given
// (an edit that sets persons_concerned to 12 on an entry opened with the
// number unknown).
func (v *IncidentVersion) Normalize() {
	if v.PersonsConcerned > 0 {
		v.PersonsUnknown = false
	}
	if v.PersonsInQuebec > 0 {
		v.PersonsInQuebecUnknown = false
	}
}

// checkDates holds the dates to their order: the incident starts no later
// than awareness, awareness is not in the future, and neither is any date
// the register records as done.
func (v IncidentVersion) checkDates(now time.Time) error {
	today := DayOf(now)
	if v.Occurred.Start != "" && v.Awareness.Start != "" && v.Occurred.Start > v.Awareness.Last() {
		return fmt.Errorf("%w: the incident (occurred %s) cannot start after awareness (%s)", ErrInvalidIncident, v.Occurred.Start, v.Awareness.Last())
	}
	for field, d := range map[string]Day{"occurred.start": v.Occurred.Start, "awareness.start": v.Awareness.Start,
		"awareness.end": v.Awareness.End, "assessment.completed_on": v.Assessment.CompletedOn} {
		if d > today {
			return fmt.Errorf("%w: %s %s is in the future", ErrInvalidIncident, field, d)
		}
	}
	for _, c := range v.Communications {
		if c.Date > today || c.Date < v.Awareness.Start {
			return fmt.Errorf("%w: communication date %s is not between awareness (%s) and today", ErrInvalidIncident, c.Date, v.Awareness.Start)
		}
	}
	if c := v.PrivacyOfficerConsulted; c != nil && (c.Date > today || c.Date < v.Awareness.Start) {
		return fmt.Errorf("%w: privacy officer consultation date %s is not between awareness (%s) and today", ErrInvalidIncident, c.Date, v.Awareness.Start)
	}
	return nil
}

// EarlyAwareness reports whether v's awareness date is more than
// EarlyAwarenessDays before opened (accepted, but flagged in exports).
func (v IncidentVersion) EarlyAwareness(opened time.Time) bool {
	t, err := v.Awareness.Start.Time()
	return err == nil && !opened.IsZero() && t.AddDate(0, 0, EarlyAwarenessDays).Before(opened)
}

// CheckNoticeDate checks that a notice about v was sent between awareness
// and now (a minute of clock skew allowed).
func (v IncidentVersion) CheckNoticeDate(sent, now time.Time) error {
	aware, err := v.Awareness.Start.Time()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	if sent.Before(aware) || sent.After(now.Add(time.Minute)) {
		return fmt.Errorf("%w: a notice's sent_at (%s) must be between awareness (%s) and now", ErrInvalidIncident, sent.UTC().Format(time.RFC3339), v.Awareness.Start)
	}
	return nil
}

// Canonical validates v and returns its canonical JSON and digest.
func (v IncidentVersion) Canonical() ([]byte, Digest, error) {
	if err := v.Validate(); err != nil {
		return nil, Digest{}, err
	}
	// Empty lists as [] rather than null, so a version reads the same
	// whether it was built in Go or decoded.
	if v.MeasuresTaken == nil {
		v.MeasuresTaken = []Measure{}
	}
	if v.MeasuresPlanned == nil {
		v.MeasuresPlanned = []Measure{}
	}
	if v.ForeignAuthorities == nil {
		v.ForeignAuthorities = []string{}
	}
	if v.AffectedTenants == nil {
		v.AffectedTenants = []cloison.TenantID{}
	}
	if v.LedgerEvents == nil {
		v.LedgerEvents = []int64{}
	}
	b, err := MarshalCanonical(v)
	if err != nil {
		return nil, Digest{}, err
	}
	return b, Sum(b), nil
}

// RetainUntil is the first day a version may be purged: five years after
// the date, or the end of the period, of awareness (Règlement s. 8).
func (v IncidentVersion) RetainUntil() (Day, error) {
	t, err := v.Awareness.Last().Time()
	if err != nil {
		return "", err
	}
	return DayOf(t.AddDate(5, 0, 0)), nil
}

// Detection is what the engine reports when it fails closed: an isolation
// violation or a refused transfer. OpenFromDetection turns it into version 1
// of a register entry.
type Detection struct {
	Source            IncidentSource // isolation_violation or transfer_verification_failed
	Invariant         Name           // which check failed
	DetectedAt        time.Time
	PeriodStart       time.Time // first affected request's start
	PeriodEnd         time.Time // detection time, or last affected response
	AffectedTenants   []cloison.TenantID
	AffectedRequests  []cloison.RequestID
	AffectedResponses int64   // responses withheld or possibly exposed
	LedgerEvents      []int64 // seqs of the violation events already in the ledger
	Model             Name    // the model served when it was detected ("" when not known)
}

// MaxGroupedDetections bounds the detections one automatic entry holds;
// the next detection of the cause opens a new entry.
const MaxGroupedDetections = 1000

// GroupKey names d's cause: source, check (invariant) and model.
// Detections with one key within the grouping window share one entry.
func (d Detection) GroupKey() string {
	return string(d.Source) + "/" + string(d.Invariant) + "/" + string(d.Model)
}

// AddDetection adds a later detection of the same cause to an automatic
// entry (a copy of its latest version): its requests, tenants and ledger
// events are appended (each once), its withheld responses counted, and the
// period of the incident extended to cover it. The circumstances, the
// assessment and everything an administrator wrote are kept.
func (v *IncidentVersion) AddDetection(d Detection) {
	for _, r := range d.AffectedRequests {
		if !slices.Contains(v.AffectedRequests, r) {
			v.AffectedRequests = append(v.AffectedRequests, r)
		}
	}
	for _, t := range d.AffectedTenants {
		if !slices.Contains(v.AffectedTenants, t) {
			v.AffectedTenants = append(v.AffectedTenants, t)
		}
	}
	for _, e := range d.LedgerEvents {
		if !slices.Contains(v.LedgerEvents, e) {
			v.LedgerEvents = append(v.LedgerEvents, e)
		}
	}
	v.AffectedResponses += d.AffectedResponses
	v.Detections++
	end := d.PeriodEnd
	if end.IsZero() {
		end = d.DetectedAt
	}
	if day := DayOf(end); day > v.Occurred.Last() {
		v.Occurred.End = day
	}
}

// FirstVersion returns version 1 of the entry for d, prefilled with what the
// engine knows and with the assessment pending.
func (d Detection) FirstVersion(id Name, org Organization, contact Contact) (IncidentVersion, error) {
	if d.Source != SourceIsolationViolation && d.Source != SourceTransferFailure {
		return IncidentVersion{}, fmt.Errorf("%w: detection source %q", ErrInvalidIncident, d.Source)
	}
	if d.DetectedAt.IsZero() {
		return IncidentVersion{}, fmt.Errorf("%w: detection time is zero", ErrInvalidIncident)
	}
	start, end := d.PeriodStart, d.PeriodEnd
	if start.IsZero() {
		start = d.DetectedAt
	}
	if end.IsZero() || end.Before(start) {
		end = d.DetectedAt
	}
	what := map[IncidentSource]string{
		SourceIsolationViolation: "Violation d'isolation détectée automatiquement (invariant %s) : %d réponse(s) retenue(s), %d locataire(s) touché(s). / Isolation violation detected automatically (invariant %s): %d response(s) withheld, %d tenant(s) affected.",
		SourceTransferFailure:    "Échec de vérification d'un transfert KV détecté automatiquement (contrôle %s) : %d réponse(s) retenue(s), %d locataire(s) touché(s). / KV transfer verification failure detected automatically (check %s): %d response(s) withheld, %d tenant(s) affected.",
	}[d.Source]
	n := len(d.AffectedTenants)
	v := IncidentVersion{
		Incident:                id,
		Version:                 1,
		Status:                  IncidentOpen,
		Source:                  d.Source,
		PersonalInfoUndescribed: "Évaluation en cours : contenu de cache KV (représentations de requêtes) possiblement exposé entre locataires. / Assessment pending: KV-cache contents (representations of prompts) possibly exposed across tenants.",
		Circumstances:           fmt.Sprintf(what, d.Invariant, d.AffectedResponses, n, d.Invariant, d.AffectedResponses, n),
		Occurred:                Period{Start: DayOf(start), End: DayOf(end), Approximate: true},
		Awareness:               Period{Start: DayOf(d.DetectedAt)},
		PersonsApproximate:      true,
		PersonsUnknown:          true,
		PersonsInQuebecUnknown:  true,
		Type:                    TypeUnauthorizedCommunication,
		Assessment:              Assessment{Status: AssessmentPending},
		MeasuresTaken: []Measure{{
			What: "Requêtes touchées interrompues et réponses retenues (échec fermé). / Affected requests aborted and responses withheld (fail closed).",
			Date: DayOf(d.DetectedAt),
		}},
		Organization:      org,
		Contact:           contact,
		AffectedTenants:   slices.Clone(d.AffectedTenants),
		AffectedResponses: d.AffectedResponses,
		LedgerEvents:      slices.Clone(d.LedgerEvents),
		DetectionGroup:    d.GroupKey(),
		Detections:        1,
		AffectedRequests:  slices.Clone(d.AffectedRequests),
	}
	return v, v.Validate()
}

// Notice is a child record of an incident: one notice sent to one recipient.
type Notice struct {
	Incident      Name
	Number        int64 // assigned by the register, 1, 2, ...
	Recipient     RecipientKind
	RecipientName string // tenant id, authority name, "public"; free text, kept in the register only
	Tenant        cloison.TenantID
	SentAt        time.Time
	Method        string // e-mail, letter, portal, press release
	ContentDigest Digest // SHA-256 of the notice as sent
	// Text is the notice as sent (kept in the register row, never in the
	// ledger, which holds only ContentDigest). Empty when only its digest
	// was given; when set, ContentDigest is its SHA-256.
	Text string
}

// Validate checks a notice before it is recorded.
func (n Notice) Validate() error {
	if err := CheckName("incident", string(n.Incident)); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	if err := n.Recipient.check(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidIncident, err)
	}
	if n.Recipient == RecipientTenant {
		if err := CheckName("tenant", string(n.Tenant)); err != nil {
			return fmt.Errorf("%w: a tenant notice names the tenant: %v", ErrInvalidIncident, err)
		}
	}
	if n.SentAt.IsZero() || strings.TrimSpace(n.Method) == "" {
		return fmt.Errorf("%w: a notice needs its date and method", ErrInvalidIncident)
	}
	if len(n.RecipientName) > MaxTextLen || len(n.Method) > MaxTextLen || !utf8.ValidString(n.RecipientName) || !utf8.ValidString(n.Method) {
		return fmt.Errorf("%w: notice text too long or not UTF-8", ErrInvalidIncident)
	}
	if len(n.Text) > MaxNoticeTextLen || !utf8.ValidString(n.Text) {
		return fmt.Errorf("%w: notice text is not valid UTF-8 of at most %d bytes", ErrInvalidIncident, MaxNoticeTextLen)
	}
	if n.Text != "" && Sum([]byte(n.Text)) != n.ContentDigest {
		return fmt.Errorf("%w: content_digest is not the SHA-256 of the notice text", ErrInvalidIncident)
	}
	return nil
}

// StoredVersion is a register version as stored: its exact canonical bytes,
// their digest and where the ledger chained them.
type StoredVersion struct {
	IncidentVersion
	Content     []byte
	Digest      Digest
	RecordedAt  time.Time
	RecordedBy  Name
	LedgerSeq   uint64
	RetainUntil Day
}

// StoredNotice is a notice as stored. Record is its canonical register
// record (NoticeRecord) and RecordDigest its SHA-256, which the ledger's
// notice.sent event names; both are empty for a notice written before
// migration 00009, whose recipient, method and dates are under no hash.
type StoredNotice struct {
	Notice
	RecordedAt   time.Time
	RecordedBy   Name
	LedgerSeq    uint64
	Record       []byte
	RecordDigest Digest
}

// IncidentFile is a register entry with every version and notice, oldest
// first.
type IncidentFile struct {
	ID        Name
	Source    IncidentSource
	OpenedAt  time.Time
	OpenedBy  Name
	LedgerSeq uint64
	Versions  []StoredVersion
	Notices   []StoredNotice
}

// Latest returns the current version (the last appended).
func (f IncidentFile) Latest() StoredVersion {
	if len(f.Versions) == 0 {
		return StoredVersion{}
	}
	return f.Versions[len(f.Versions)-1]
}

// TenantIncident is what a tenant sees of a register entry that affects it
// (IncidentFile.ForTenant): the register's elements, but no other tenant's
// identity, notices or contact, and no ledger sequence number, since the
// global sequence would count other tenants' requests between its own rows.
type TenantIncident struct {
	ID       Name
	Source   IncidentSource
	OpenedAt time.Time
	OpenedBy Name
	Versions []TenantVersion
	Notices  []TenantNotice
}

// TenantVersion is a register version as a tenant sees it: AffectedTenants
// holds the tenant itself or nothing, OtherTenants counts the rest, and
// LedgerEvents is empty. The stored canonical bytes and their digest are
// left out: they name the other tenants, and a digest over a short list of
// guessable tenant ids would confirm a guess.
type TenantVersion struct {
	IncidentVersion
	OtherTenants int64 `json:"other_tenants"`
	RecordedAt   time.Time
	RecordedBy   Name
	RetainUntil  Day
}

// TenantNotice is a notice sent to the tenant itself, without its ledger
// sequence number.
type TenantNotice struct {
	Notice
	RecordedAt time.Time
	RecordedBy Name
}

// ForTenant returns f as tenant t may see it: other affected tenants
// counted, not named; only the notices addressed to t (not those to other
// tenants, the Commission, persons concerned or the public, whose recipient
// and method may name someone else); no ledger sequence numbers. The
// caller decides first whether t may see f at all (t is among some
// version's AffectedTenants).
func (f IncidentFile) ForTenant(t cloison.TenantID) TenantIncident {
	out := TenantIncident{ID: f.ID, Source: f.Source, OpenedAt: f.OpenedAt, OpenedBy: f.OpenedBy,
		Versions: make([]TenantVersion, 0, len(f.Versions)), Notices: []TenantNotice{}}
	for _, v := range f.Versions {
		iv := v.IncidentVersion
		own, seen := false, map[cloison.TenantID]bool{}
		for _, a := range iv.AffectedTenants {
			own = own || a == t
			seen[a] = a != t
		}
		var others int64
		for _, other := range seen {
			if other {
				others++
			}
		}
		iv.AffectedTenants = []cloison.TenantID{}
		if own {
			iv.AffectedTenants = []cloison.TenantID{t}
		}
		iv.LedgerEvents = []int64{}
		// A grouped entry lists every tenant's requests: none in a tenant's
		// view (the ids are not tied to tenants in the version).
		iv.AffectedRequests = nil
		out.Versions = append(out.Versions, TenantVersion{IncidentVersion: iv, OtherTenants: others,
			RecordedAt: v.RecordedAt, RecordedBy: v.RecordedBy, RetainUntil: v.RetainUntil})
	}
	for _, n := range f.Notices {
		if n.Recipient == RecipientTenant && n.Tenant == t {
			out.Notices = append(out.Notices, TenantNotice{Notice: n.Notice, RecordedAt: n.RecordedAt, RecordedBy: n.RecordedBy})
		}
	}
	return out
}
