package prefill

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/isolation"
)

// metrics are a prefill node's Prometheus series (Prefill.MetricsHandler;
// cloisond serves them on --metrics-addr as a decode node serves its own).
// The names follow the decode node's (api.Metrics): cloison_ prefix, base
// units, _total on counters, model_name on every cloison_ series; no tenant
// label (a prefill node's series are per node). A node serving several
// models has each model's series under its model_name.
type metrics struct {
	handler http.Handler
}

// modelMetrics are one model's series.
type modelMetrics struct {
	requests *prometheus.CounterVec
	tokens   prometheus.Counter
	wait     prometheus.Histogram
	duration prometheus.Histogram
}

// prefillBuckets are the decode node's phase buckets (api's phaseBuckets).
var prefillBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}

// newMetrics registers every model's series (setting its metrics).
func newMetrics(models []*prefillModel) *metrics {
	reg := prometheus.NewRegistry()
	for _, pm := range models {
		pm.metrics = newModelMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"model_name": pm.name}, reg), pm.pool, pm.att)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &metrics{handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
}

func newModelMetrics(wrapped prometheus.Registerer, pool *isolation.Pool, att attest.Attestation) *modelMetrics {
	m := &modelMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison_prefill_requests_total",
			Help: "Prefills asked of this node by decode nodes, by outcome (ok, or the error code)."}, []string{"code"}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "cloison_prefill_prompt_tokens_total",
			Help: "Prompt tokens whose KV this node computed and sent (successful prefills)."}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cloison_prefill_queue_time_seconds",
			Help: "Time a prefill waited for the node's forward pass (one prefill at a time).", Buckets: prefillBuckets}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cloison_prefill_time_seconds",
			Help: "Time from a prefill's start to its KV verified by the decode node (compute and transfer).", Buckets: prefillBuckets}),
	}
	m.requests.WithLabelValues("ok") // the series exists from the start
	wrapped.MustRegister(m.requests, m.tokens, m.wait, m.duration, prefillPoolCollector{pool: pool, att: att})
	return m
}

// observe records one prefill's outcome.
func (m *modelMetrics) observe(tokens int, waited, took time.Duration, err error) {
	code := "ok"
	if err != nil {
		code = string(cloison.ErrorCode(err))
	}
	m.requests.WithLabelValues(code).Inc()
	if err == nil {
		m.tokens.Add(float64(tokens))
	}
	m.wait.Observe(waited.Seconds())
	m.duration.Observe(took.Seconds())
}

var (
	descPrefillKV     = prometheus.NewDesc("cloison_kv_cache_usage_ratio", "Fraction of KV pages leased or cached (0 to 1).", nil, nil)
	descPrefillAttest = prometheus.NewDesc("cloison_capacity_attestation_ok", "1 when the capacity attestation passed.", nil, nil)
	descPrefillServed = prometheus.NewDesc("cloison_served_context_tokens", "Context length this node prefills.", nil, nil)
	descPrefillPool   = prometheus.NewDesc("cloison_pool_tokens", "Tokens the KV pool holds.", nil, nil)
)

// prefillPoolCollector reads the pool and the attestation at scrape time.
type prefillPoolCollector struct {
	pool *isolation.Pool
	att  attest.Attestation
}

func (c prefillPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPrefillKV
	ch <- descPrefillAttest
	ch <- descPrefillServed
	ch <- descPrefillPool
}

func (c prefillPoolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	usage := 0.0
	if st.Pages > 0 {
		usage = float64(st.Leased+st.Cached) / float64(st.Pages)
	}
	ok := 0.0
	if c.att.OK {
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(descPrefillKV, prometheus.GaugeValue, usage)
	ch <- prometheus.MustNewConstMetric(descPrefillAttest, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(descPrefillServed, prometheus.GaugeValue, float64(c.att.ServedContext))
	ch <- prometheus.MustNewConstMetric(descPrefillPool, prometheus.GaugeValue, float64(c.att.PoolTokens))
}
