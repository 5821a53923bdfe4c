package audit

import (
	"fmt"
	"time"

	"github.com/cloison/cloison"
)

// Reports of suspicious responses and their replays.
// Identifiers and digests only: the reason is one of ReportReasons, and the
// text a tenant found foreign is sealed in the register database, never
// here.

// ReportReasons are the reasons a tenant may give for a report.
var ReportReasons = []Name{
	"foreign-content", // the response holds text that is not the request's own
	"other-tenant-data",
	"unexpected-response",
	"other",
}

// ReportReceived records a tenant's report of one of its own responses and
// the potential incident it opened.
type ReportReceived struct {
	Report   Name              `json:"report"`
	Request  cloison.RequestID `json:"request"`
	Reason   Name              `json:"reason"`
	Sealed   bool              `json:"sealed"` // text was attached (kept sealed outside the ledger)
	Incident Name              `json:"incident"`
}

func (ReportReceived) Kind() Kind { return KindReportReceived }
func (p ReportReceived) validate() error {
	if err := firstErr(CheckName("report", string(p.Report)), CheckName("request", string(p.Request)),
		CheckName("reason", string(p.Reason)), CheckName("incident", string(p.Incident))); err != nil {
		return err
	}
	return checkReason(p.Reason)
}

func checkReason(r Name) error {
	for _, x := range ReportReasons {
		if r == x {
			return nil
		}
	}
	return fmt.Errorf("%w: report reason %q", ErrInvalidEvent, r)
}

// Replay verdicts.
const (
	// VerdictNotIsolationFailure: the replay, alone on a fresh lease,
	// produced exactly what was served.
	VerdictNotIsolationFailure Name = "not-isolation-failure"
	// VerdictConfirmed: on a deterministic path the replay produced
	// something else: what was served was not the prompt's own output.
	VerdictConfirmed Name = "confirmed"
	// VerdictInconclusive: replay cannot be exact (ReplayReason says why).
	VerdictInconclusive Name = "inconclusive"
)

// RequestReplayed records the replay of a request: its verdict, the keyed
// digest of the replayed completion and the cost.
type RequestReplayed struct {
	Request        cloison.RequestID `json:"request"`
	Report         Name              `json:"report,omitempty"`   // the report it answers, if any
	Incident       Name              `json:"incident,omitempty"` // the register entry it updated, if any
	By             Name              `json:"by"`                 // tenant or operator:<subject>
	Verdict        Name              `json:"verdict"`
	Reason         Name              `json:"reason,omitempty"` // why inconclusive
	Key            Name              `json:"key,omitempty"`
	Completion     *Digest           `json:"completion,omitempty"` // keyed digest of the replayed completion ids
	ReplayMicros   int64             `json:"replay_micros"`
	OriginalMicros int64             `json:"original_micros"`
}

func (RequestReplayed) Kind() Kind { return KindRequestReplayed }
func (p RequestReplayed) validate() error {
	err := firstErr(CheckName("request", string(p.Request)), checkOptName("report", string(p.Report)),
		checkOptName("incident", string(p.Incident)), CheckName("by", string(p.By)),
		CheckName("verdict", string(p.Verdict)), checkOptName("reason", string(p.Reason)),
		checkOptName("key", string(p.Key)), checkCount("replay_micros", p.ReplayMicros),
		checkCount("original_micros", p.OriginalMicros))
	if err != nil {
		return err
	}
	switch p.Verdict {
	case VerdictNotIsolationFailure, VerdictConfirmed:
		if p.Completion == nil {
			return fmt.Errorf("%w: a %s verdict needs the replayed completion's digest", ErrInvalidEvent, p.Verdict)
		}
	case VerdictInconclusive:
		if p.Reason == "" {
			return fmt.Errorf("%w: an inconclusive verdict needs its reason", ErrInvalidEvent)
		}
	default:
		return fmt.Errorf("%w: verdict %q", ErrInvalidEvent, p.Verdict)
	}
	return nil
}

// ReportVersion returns version 1 of the potential incident a tenant's
// report opens: status under assessment, source tenant_report, the request
// and its period (requestAt: when it was served) prefilled, one response
// affected, the assessment pending. seq is the global ledger seq of the
// request's request.completed entry.
func ReportVersion(id Name, t cloison.TenantID, req cloison.RequestID, reason Name, requestAt, now time.Time, seq int64) (IncidentVersion, error) {
	if err := checkReason(reason); err != nil {
		return IncidentVersion{}, err
	}
	start := DayOf(requestAt)
	v := IncidentVersion{
		Incident:                id,
		Version:                 1,
		Status:                  IncidentUnderAssessment,
		Source:                  SourceTenantReport,
		PersonalInfoUndescribed: "Évaluation en cours : le locataire signale une réponse qui contiendrait du contenu étranger à sa requête. / Under assessment: the tenant reports a response that may hold content foreign to its request.",
		Circumstances: fmt.Sprintf("Signalement du locataire %s pour la requête %s (motif %s) ; rejeu à faire. / Report by tenant %s on request %s (reason %s); replay pending.",
			t, req, reason, t, req, reason),
		Occurred:               Period{Start: start},
		Awareness:              Period{Start: DayOf(now)},
		PersonsApproximate:     true,
		PersonsUnknown:         true,
		PersonsInQuebecUnknown: true,
		Type:                   TypeUnauthorizedCommunication,
		Assessment:             Assessment{Status: AssessmentPending},
		AffectedTenants:        []cloison.TenantID{t},
		AffectedResponses:      1,
		LedgerEvents:           []int64{seq},
		AffectedRequests:       []cloison.RequestID{req},
	}
	return v, v.Validate()
}

// ApplyReplay edits a report's register entry after a replay: a
// not-isolation-failure verdict closes it with the evidence, a confirmed
// one makes it an open incident with the assessment's facts prefilled, an
// inconclusive one leaves it under assessment and says why. evidence is the
// replay's ledger seq.
func ApplyReplay(v *IncidentVersion, verdict, reason Name, evidence int64, now time.Time) {
	v.LedgerEvents = append(v.LedgerEvents, evidence)
	day := DayOf(now)
	switch verdict {
	case VerdictNotIsolationFailure:
		v.Status = IncidentClosed
		v.Circumstances += fmt.Sprintf(" Rejeu seul sur un bail isolé : sortie identique à celle servie (événement %d) ; pas une défaillance d'isolation. / Replayed alone on an isolated lease: output identical to what was served (event %d); not an isolation failure.", evidence, evidence)
		v.AffectedResponses = 0
		v.MeasuresTaken = append(v.MeasuresTaken, Measure{What: "Rejeu déterministe comparé aux empreintes enregistrées. / Deterministic replay compared with the recorded digests.", Date: day})
	case VerdictConfirmed:
		v.Status = IncidentOpen
		v.Circumstances += fmt.Sprintf(" Rejeu seul sur un bail isolé, chemin déterministe : la sortie diffère de celle servie (événement %d) ; la réponse n'était pas celle de la requête seule. / Replayed alone on an isolated lease on a deterministic path: the output differs from what was served (event %d); the response was not the request's own.", evidence, evidence)
		v.Assessment.Sensitivity = "À évaluer : la réponse servie contenait du contenu issu d'un autre contexte (possiblement d'un autre locataire). / To assess: the response served held content from another context (possibly another tenant's)."
		v.Assessment.Likelihood = "Avérée pour cette réponse (rejeu déterministe). / Established for this response (deterministic replay)."
	default:
		v.Circumstances += fmt.Sprintf(" Rejeu non concluant (%s, événement %d). / Replay inconclusive (%s, event %d).", reason, evidence, reason, evidence)
	}
}

// ErrReportRate: the tenant sent more reports in the window than
// ReportLimit allows.
var ErrReportRate = cloison.NewError(cloison.CodeRateLimited, "too many reports from this tenant; try again later")

// Report is a stored report of a suspicious response.
type Report struct {
	ID         Name
	Tenant     cloison.TenantID
	Request    cloison.RequestID
	Reason     Name
	Sealed     []byte // nonce ‖ AES-256-GCM ciphertext; nil when no text was sent
	Incident   Name
	ReceivedAt time.Time
	Seq        uint64
	Verdict    Name // "" before any replay
}

// ReportLimit bounds the reports of one tenant: at most N per Window.
type ReportLimit struct {
	N      int
	Window time.Duration
}

// NewReport is what a ledger records for a tenant's report.
type NewReport struct {
	Tenant    cloison.TenantID
	Request   cloison.RequestID
	Reason    Name
	Sealed    []byte
	RequestAt time.Time // when the request was served (its request.completed entry)
	EntrySeq  uint64    // that entry's ledger seq
}
