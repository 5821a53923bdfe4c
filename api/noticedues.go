package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/tenancy"
)

// noticeDeadlines returns each tenant's contractual notice deadline in
// hours (tenancy.Tenant.NoticeDeadlineHours), read now.
func (s *Server) noticeDeadlines(ctx context.Context) (func(cloison.TenantID) int, error) {
	ts, err := s.cfg.Tenants.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	hours := make(map[cloison.TenantID]int, len(ts))
	for _, t := range ts {
		hours[t.ID] = t.NoticeDeadlineHours
	}
	return func(t cloison.TenantID) int { return hours[t] }, nil
}

// operatorIncident is an operator's view of a register entry: the whole
// entry and, per affected tenant, its notice against the contract's
// deadline (sent on time, late, overdue, pending).
type operatorIncident struct {
	audit.IncidentFile
	NoticeDeadlines []audit.NoticeDue
}

// tenantIncident is a tenant's view: its redacted entry and its own notice
// line only.
type tenantIncident struct {
	audit.TenantIncident
	NoticeDeadlines []audit.NoticeDue
}

// incidentViews is fs as p may see them (whole for an operator, ForTenant
// for a tenant), each with its
// notice deadlines at now.
func (s *Server) incidentViews(ctx context.Context, p tenancy.Principal, fs []audit.IncidentFile, now time.Time) ([]any, error) {
	hours, err := s.noticeDeadlines(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(fs))
	for i, f := range fs {
		dues := f.NoticeDues(hours, now)
		if operator(p) {
			out[i] = operatorIncident{IncidentFile: f, NoticeDeadlines: dues}
		} else {
			out[i] = tenantIncident{TenantIncident: f.ForTenant(p.Tenant), NoticeDeadlines: audit.ForTenantDues(dues, p.Tenant)}
		}
	}
	return out, nil
}

var descNoticesOverdue = prometheus.NewDesc("cloison_incident_notices_overdue",
	"Art. 18.3 notices to affected tenants not sent and past the tenant's contractual deadline (absent when the register could not be read).", nil, nil)

// noticeCollector counts overdue notices at scrape time from the register
// and the tenants' deadlines. A register that cannot be read leaves the
// series out (the alert rule fires on its absence too) rather than
// reporting 0.
type noticeCollector struct{ s *Server }

func (c noticeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descNoticesOverdue }

func (c noticeCollector) Collect(ch chan<- prometheus.Metric) {
	n, err := c.s.overdueNotices(context.Background(), timeNow())
	if err != nil {
		c.s.log.Warn("overdue incident notices not counted", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descNoticesOverdue, prometheus.GaugeValue, float64(n))
}

// overdueNotices counts, over the whole register, the tenants whose
// notice is overdue at now.
func (s *Server) overdueNotices(ctx context.Context, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fs, err := s.cfg.Ledger.Incidents(ctx)
	if err != nil {
		return 0, err
	}
	hours, err := s.noticeDeadlines(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range fs {
		for _, d := range f.NoticeDues(hours, now) {
			if d.Status == audit.NoticeOverdue {
				n++
			}
		}
	}
	return n, nil
}
