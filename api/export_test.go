package api

import (
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloison/cloison"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// MetricFamilies lists the cloison_ metric families s registers, with their
// series or not (Describe): what a dashboard or a rule may reference.
func MetricFamilies(s *Server) map[string]bool {
	out := map[string]bool{}
	for _, c := range s.metrics.own {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				out[m[1]] = true
			}
		}
	}
	return out
}

// HoldStreams takes n of s's stream-gate slots for tenant t, as n
// generations in flight would, until release (tests of the gate through
// the real request path).
func HoldStreams(s *Server, t cloison.TenantID, n int) (release func(), err error) {
	var rels []func()
	release = func() {
		for _, r := range rels {
			r()
		}
	}
	for i := 0; i < n; i++ {
		r, err := s.gate.acquire(t)
		if err != nil {
			release()
			return nil, err
		}
		rels = append(rels, r)
	}
	return release, nil
}

// SetClock makes the API's clock now (the notice-deadline views and the
// overdue-notice metric read it) until restore.
func SetClock(now func() time.Time) (restore func()) {
	old := timeNow
	timeNow = now
	return func() { timeNow = old }
}
