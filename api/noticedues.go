package api

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

var descNoticesOverdue = prometheus.NewDesc("cloison_incident_notices_overdue",
	"Art. 18.3 notices to affected tenants not sent and past the tenant's contractual deadline (absent when the register could not be read).", nil, nil)

// noticeCollector counts overdue notices at scrape time from the register
// and the tenants' deadlines (service.Compliance.OverdueNotices). A
// register that cannot be read leaves the series out (the alert rule fires
// on its absence too) rather than reporting 0.
type noticeCollector struct{ s *Server }

func (c noticeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descNoticesOverdue }

func (c noticeCollector) Collect(ch chan<- prometheus.Metric) {
	n, err := c.s.ops.compliance.OverdueNotices(context.Background())
	if err != nil {
		c.s.log.Warn("overdue incident notices not counted", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descNoticesOverdue, prometheus.GaugeValue, float64(n))
}
