package api

import (
	"net/http"

	"github.com/cloison/cloison/engine"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the Prometheus metrics, vLLM-style names under "cloison:".
// Pool, engine and admission figures are read at scrape time from their
// owners (a collector), so nothing is counted twice.
type Metrics struct {
	reg          *prometheus.Registry
	handler      http.Handler
	ledgerErrors prometheus.Counter
	policyDenied *prometheus.CounterVec
	requests     *prometheus.CounterVec
	promptToks   *prometheus.CounterVec
	genToks      *prometheus.CounterVec
	tokenizeToks *prometheus.CounterVec
	ttft         prometheus.Histogram
	e2e          prometheus.Histogram
	incidents    *prometheus.CounterVec
	// TransferVerificationsFailed counts refused prefill→decode transfers.
	TransferVerificationsFailed *prometheus.CounterVec
	// TransferUnauthenticated counts transfer streams refused before their
	// header authenticated (unknown key, bad header MAC, malformed, no such
	// reservation), by reason: junk from a certificate holder without the
	// cluster key. At most one incident per peer and window is opened.
	TransferUnauthenticated *prometheus.CounterVec
	incidentWritesLost      prometheus.Counter
}

func newMetrics(s *Server) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.ledgerErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "cloison:ledger_append_errors_total", Help: "Ledger appends that failed (requests refused with 503)."})
	m.policyDenied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:policy_denied_total", Help: "Requests denied by policy."}, []string{"tenant"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:request_success_total", Help: "Requests that left the engine, by final state."}, []string{"tenant", "state"})
	m.promptToks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:prompt_tokens_total", Help: "Prompt tokens processed."}, []string{"tenant"})
	m.genToks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:generation_tokens_total", Help: "Tokens generated."}, []string{"tenant"})
	m.tokenizeToks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:tokenize_tokens_total", Help: "Tokens produced by the Tokenize method (charged to the tenant's quota)."}, []string{"tenant"})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cloison:time_to_first_token_seconds", Help: "Time to first token.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)})
	m.e2e = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cloison:e2e_request_latency_seconds", Help: "End-to-end request latency.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)})
	m.incidents = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:isolation_failures_total", Help: "Requests failed closed by an isolation check, by tenant and detector."}, []string{"tenant", "kind"})
	m.TransferVerificationsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:transfer_verifications_failed_total", Help: "Prefill→decode transfers refused by verification."}, []string{"tenant"})
	m.TransferUnauthenticated = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison:transfer_unauthenticated_refusals_total", Help: "Transfer streams refused before their header authenticated, by reason."}, []string{"reason"})
	m.incidentWritesLost = prometheus.NewCounter(prometheus.CounterOpts{Name: "cloison:incident_writes_lost_total", Help: "Incident writes abandoned at shutdown after retries (logged)."})
	for _, c := range []prometheus.Collector{m.ledgerErrors, m.policyDenied, m.requests, m.promptToks, m.genToks, m.tokenizeToks, m.ttft, m.e2e, m.incidents, m.TransferVerificationsFailed,
		m.TransferUnauthenticated, m.incidentWritesLost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), &stateCollector{s: s}} {
		f(c)
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *Metrics) serve(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

func (m *Metrics) observe(sum engine.Summary) {
	t := string(sum.Tenant)
	m.requests.WithLabelValues(t, sum.State.String()).Inc()
	m.promptToks.WithLabelValues(t).Add(float64(sum.Prompt))
	m.genToks.WithLabelValues(t).Add(float64(sum.Generated))
	if sum.FirstToken > 0 {
		m.ttft.Observe(sum.FirstToken.Seconds())
	}
	m.e2e.Observe(sum.Duration.Seconds())
}

var (
	descRunning   = prometheus.NewDesc("cloison:num_requests_running", "Requests holding KV leases.", nil, nil)
	descWaiting   = prometheus.NewDesc("cloison:num_requests_waiting", "Requests queued for KV pages.", nil, nil)
	descKVUsage   = prometheus.NewDesc("cloison:kv_cache_usage_perc", "Fraction of KV pages leased or cached.", nil, nil)
	descPages     = prometheus.NewDesc("cloison:isolation_pages_in_use", "KV pages referenced by the tenant's live leases.", []string{"tenant"}, nil)
	descReserved  = prometheus.NewDesc("cloison:isolation_pages_reserved", "KV pages reserved for the tenant.", []string{"tenant"}, nil)
	descScrubbed  = prometheus.NewDesc("cloison:isolation_pages_scrubbed_total", "KV pages of the tenant zeroed before reuse.", []string{"tenant"}, nil)
	descBlocked   = prometheus.NewDesc("cloison:isolation_violations_blocked_total", "Reads refused by the pool's ownership and fill checks.", []string{"tenant"}, nil)
	descRejected  = prometheus.NewDesc("cloison:admission_rejected_total", "Requests rejected before any KV allocation, by code.", []string{"tenant", "code"}, nil)
	descAttestOK  = prometheus.NewDesc("cloison:capacity_attestation_ok", "1 when the capacity attestation passed.", nil, nil)
	descServed    = prometheus.NewDesc("cloison:served_context_tokens", "Context length the API advertises.", nil, nil)
	descModelCtx  = prometheus.NewDesc("cloison:model_context_tokens", "Context length the model advertises.", nil, nil)
	descPoolToken = prometheus.NewDesc("cloison:pool_tokens", "Tokens the KV pool holds.", nil, nil)
)

// stateCollector reads the engine, pool and admission at scrape time.
type stateCollector struct{ s *Server }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKVUsage, descPages, descReserved, descScrubbed, descBlocked, descRejected, descAttestOK, descServed, descModelCtx, descPoolToken} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.s.cfg.Engine
	run, wait := e.Load()
	ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(run))
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(wait))
	st := e.PoolStats()
	ch <- prometheus.MustNewConstMetric(descKVUsage, prometheus.GaugeValue, float64(st.Leased+st.Cached)/float64(st.Pages))
	for _, t := range st.Tenants {
		id := string(t.Tenant)
		ch <- prometheus.MustNewConstMetric(descPages, prometheus.GaugeValue, float64(t.Leased), id)
		ch <- prometheus.MustNewConstMetric(descReserved, prometheus.GaugeValue, float64(t.Reserved), id)
		ch <- prometheus.MustNewConstMetric(descScrubbed, prometheus.CounterValue, float64(t.Scrubbed), id)
		ch <- prometheus.MustNewConstMetric(descBlocked, prometheus.CounterValue, float64(t.Violations), id)
	}
	for t, byCode := range e.Admission().Rejections() {
		for code, n := range byCode {
			ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(n), string(t), string(code))
		}
	}
	att := e.Attestation()
	ok := 0.0
	if att.OK {
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(descAttestOK, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(descServed, prometheus.GaugeValue, float64(att.ServedContext))
	ch <- prometheus.MustNewConstMetric(descModelCtx, prometheus.GaugeValue, float64(att.ModelContext))
	ch <- prometheus.MustNewConstMetric(descPoolToken, prometheus.GaugeValue, float64(att.PoolTokens))
}
