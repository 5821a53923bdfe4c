package audit

import (
	"fmt"

	"github.com/cloison/cloison"
)

// Reports of suspicious responses and their replays (issue 17 §2–§3).
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
