package audit

import (
	"time"

	"github.com/cloison/cloison"
)

// NoticeStatus is where a tenant's art. 18.3 notice stands against the
// notice deadline of its contract, counted from awareness (NoticeDue).
type NoticeStatus string

// Notice statuses. A tenant whose contract sets no deadline is still
// listed (NoticeNoDeadline), so the register never hides that a notice is
// owed.
const (
	NoticeOnTime     NoticeStatus = "sent_on_time" // first notice to the tenant sent by the due time
	NoticeLate       NoticeStatus = "sent_late"    // first notice sent after the due time
	NoticeOverdue    NoticeStatus = "overdue"      // none sent, the due time has passed
	NoticePending    NoticeStatus = "pending"      // none sent, the due time is still ahead
	NoticeNoDeadline NoticeStatus = "no_deadline"  // the tenant's contract sets no deadline
)

// NoticeDue is one affected tenant's notice against its deadline. The
// clock starts when the provider became aware of the incident (art. 18.3:
// the provider notifies its client without delay of any breach it knows
// of), not when the register recorded it. The register states the
// awareness day (of the entry's latest version), not its hour: ClockFrom
// is the start (00:00 UTC) of that day, or, when the entry was opened
// that same day, the opening (an automatic entry opens at detection); it
// is NamedAt, when a version first named the tenant, if that is earlier
// or the entry states no awareness. A tenant named later is still counted from
// awareness: the register shows a late notice rather than restart the
// clock. DueAt is ClockFrom plus the deadline, SentAt the first notice
// recorded to that tenant (zero when none).
type NoticeDue struct {
	Tenant        cloison.TenantID `json:"tenant"`
	NamedAt       time.Time        `json:"named_at"`
	ClockFrom     time.Time        `json:"clock_from"`
	DeadlineHours int              `json:"deadline_hours"`
	DueAt         *time.Time       `json:"due_at,omitempty"`
	SentAt        *time.Time       `json:"sent_at,omitempty"`
	Status        NoticeStatus     `json:"status"`
}

// NoticeDues returns, for each tenant some version of f names (in the order
// first named), where its notice stands at now. deadlineHours gives a
// tenant's contractual deadline in hours (0: none). The deadline applied is
// the one deadlineHours returns now, not the one in force when the tenant
// was named: a contract change moves the due time of notices not yet
// sent.
func (f IncidentFile) NoticeDues(deadlineHours func(cloison.TenantID) int, now time.Time) []NoticeDue {
	out := []NoticeDue{}
	index := map[cloison.TenantID]int{}
	for _, v := range f.Versions {
		for _, t := range v.AffectedTenants {
			if _, ok := index[t]; ok {
				continue
			}
			index[t] = len(out)
			out = append(out, NoticeDue{Tenant: t, NamedAt: v.RecordedAt})
		}
	}
	for _, n := range f.Notices {
		i, ok := index[n.Tenant]
		if n.Recipient != RecipientTenant || !ok {
			continue
		}
		if s := out[i].SentAt; s == nil || n.SentAt.Before(*s) {
			sent := n.SentAt
			out[i].SentAt = &sent
		}
	}
	var aware time.Time
	if len(f.Versions) > 0 {
		aware, _ = f.Latest().Awareness.Start.Time() // zero when not stated
		// The register states the awareness day, not its hour: on the
		// day the entry was opened, the opening (an automatic entry opens
		// at detection) bounds the hour; an earlier day counts from its
		// start.
		if opened := f.Versions[0].RecordedAt; !aware.IsZero() && DayOf(opened) == f.Latest().Awareness.Start {
			aware = opened
		}
	}
	for i := range out {
		d := &out[i]
		d.ClockFrom = d.NamedAt
		if !aware.IsZero() && aware.Before(d.NamedAt) {
			d.ClockFrom = aware
		}
		d.DeadlineHours = deadlineHours(d.Tenant)
		if d.DeadlineHours <= 0 {
			d.DeadlineHours, d.Status = 0, NoticeNoDeadline
			continue
		}
		due := d.ClockFrom.Add(time.Duration(d.DeadlineHours) * time.Hour)
		d.DueAt = &due
		switch {
		case d.SentAt != nil && !d.SentAt.After(due):
			d.Status = NoticeOnTime
		case d.SentAt != nil:
			d.Status = NoticeLate
		case now.After(due):
			d.Status = NoticeOverdue
		default:
			d.Status = NoticePending
		}
	}
	return out
}

// ForTenantDues keeps only t's own line of dues (a tenant sees no other
// tenant's deadline or notice).
func ForTenantDues(dues []NoticeDue, t cloison.TenantID) []NoticeDue {
	out := []NoticeDue{}
	for _, d := range dues {
		if d.Tenant == t {
			out = append(out, d)
		}
	}
	return out
}

// DueFor is when the notice to tenant t about f is due under a deadline of
// hours (nil when hours is 0 or f never names t).
func DueFor(f IncidentFile, t cloison.TenantID, hours int) *time.Time {
	for _, d := range f.NoticeDues(func(cloison.TenantID) int { return hours }, time.Time{}) {
		if d.Tenant == t {
			return d.DueAt
		}
	}
	return nil
}
