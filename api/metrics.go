package api

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
)

// Metrics are the Prometheus metrics, served by MetricsHandler on a
// listener of their own (cloisond --metrics-addr), never on the public API.
//
// Names follow the Prometheus conventions (promtool check metrics is clean:
// TestMetricsLint): the cloison_ prefix, no colons (those are for recording
// rules), base units in the name (_seconds, _tokens, _ratio), _total on
// counters only. Every cloison_ series carries model_name: each served
// model's requests, engine, pool and attestation count under its own id
// (modelMetrics; an unloaded model's counters stay, its gauges go), the
// node's own series (ledger, log, transfers, register, grammar cache,
// reports and replays) under the node's first model's. The request series are those vLLM users chart, under the same
// names with cloison_ for vllm: — time to first token, inter-token latency,
// queue, prefill, decode and end-to-end time, preemptions, prefix-cache
// queried and hit tokens, prompt and generation token histograms, running
// and waiting gauges — plus the isolation, transfer, ledger and attestation
// series the alert rules (deploy/prometheus/alerts.yml) watch.
//
// The tenant label is bounded (MetricsConfig): a configured list of tenants,
// or the first MaxTenants tenants seen, keep their own value; every other
// tenant is aggregated as "other". A label never changes once given, so
// counters stay monotonic. Histograms carry no tenant label.
//
// Pool, engine and admission figures are read at scrape time from their
// owners (a collector), so nothing is counted twice.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	tenants *tenantLabels
	own     []prometheus.Collector // the cloison_ collectors, for tests that list the families

	// The node's series (model_name: the node's first model).
	ledgerErrors       prometheus.Counter
	incidentWritesLost prometheus.Counter
	transferFailed     *prometheus.CounterVec
	transferUnauth     *prometheus.CounterVec
	logRequests        *prometheus.CounterVec

	// *modelMetrics is the first model's; every served model has its own
	// (forModel), each series with its model_name.
	*modelMetrics
	mu     sync.Mutex
	models map[string]*modelMetrics // by model name, guarded by mu; kept once a model is unloaded (counters stay monotonic)
	labels []string                 // the tenant labels started at zero, guarded by mu
}

// modelMetrics are one served model's series: its requests, its engine's
// pool and load (stateCollector), under model_name = the model's id.
type modelMetrics struct {
	name              string
	reg               prometheus.Registerer // the registry, with model_name
	state             *stateCollector       // registered while the model is served
	policyDenied      *prometheus.CounterVec
	success           *prometheus.CounterVec
	failed            *prometheus.CounterVec
	promptToks        *prometheus.CounterVec
	genToks           *prometheus.CounterVec
	tokenizeToks      *prometheus.CounterVec
	isolationFailures *prometheus.CounterVec
	preemptions       prometheus.Counter
	prefixQueries     prometheus.Counter
	prefixHits        prometheus.Counter

	ttft, itl, e2e, queue, prefill, decode prometheus.Histogram
	reqPrompt, reqGeneration               prometheus.Histogram
}

// MetricsConfig bounds the metrics' tenant label.
type MetricsConfig struct {
	// Tenants, when set, are the tenants whose series carry their own
	// tenant label; every other tenant's are aggregated as "other".
	Tenants []cloison.TenantID
	// MaxTenants, without Tenants, is how many tenants (the first seen)
	// get their own label; the rest are "other". Default 32.
	MaxTenants int
}

// DefaultMetricsMaxTenants is MetricsConfig.MaxTenants' default.
const DefaultMetricsMaxTenants = 32

// OtherTenant is the tenant label of the tenants aggregated together.
const OtherTenant = "other"

// isolationKinds are engine.Incident's kinds (engine's incident): each
// tenant label starts with a zero series of each, so that an alert on
// increase() sees the first failure.
var isolationKinds = []string{"pool-violation", "kernel-tag-mismatch", "kernel-unwritten", "stale-lease", "transfer-count", "isolation"}

// Histogram buckets, vLLM's (v0.10 metrics), with finer low ends for CPU
// inference, where a token can take less than 10 ms.
var (
	ttftBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets     = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	phaseBuckets   = []float64{0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	tokenBuckets   = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000}
	tenantLabel    = []string{"tenant"}
	prefixHelpNote = " Counted only with the prefix cache on (--prefix-cache); without it, 0."
)

func newMetrics(s *Server) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), models: map[string]*modelMetrics{}}
	// Every cloison_ series carries model_name; the Go and process
	// collectors (go_, process_) do not. The node's own series name the
	// node's first model.
	wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"model_name": s.cfg.ModelName}, m.reg)
	register := func(c prometheus.Collector) {
		wrapped.MustRegister(c)
		m.own = append(m.own, c)
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		register(c)
		return c
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		register(c)
		return c
	}
	m.ledgerErrors = counter("cloison_ledger_append_errors_total", "Ledger appends that failed (the requests were refused with 503).")
	m.incidentWritesLost = counter("cloison_incident_writes_lost_total", "Incident writes abandoned at shutdown after retries (logged).")
	m.transferFailed = counterVec("cloison_transfer_verifications_failed_total", "Prefill-to-decode transfers refused by verification (output withheld, incident opened).", tenantLabel...)
	m.transferUnauth = counterVec("cloison_transfer_unauthenticated_refusals_total", "Transfer streams refused before their header authenticated, by reason.", "reason")
	m.logRequests = counterVec("cloison_log_requests_total", "Requests of the served log (/log/: checkpoint, tile, entries), by outcome (served, not_found, error).", "resource", "outcome")
	for _, r := range []string{"checkpoint", "tile", "entries"} {
		for _, o := range []string{"served", "not_found", "error"} {
			m.logRequests.WithLabelValues(r, o)
		}
	}
	register(noticeCollector{s: s})
	register(transparencyCollector{s: s})
	register(grammarCollector{s: s, m: m})
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.modelMetrics = m.forModel(s.cfg.ModelName)
	m.serveModel(s)
	m.own = append(m.own, m.modelMetrics.state)
	m.tenants = newTenantLabels(s.cfg.Metrics, m.initTenant)
	m.initTenant(OtherTenant)
	m.initTenant("") // events with no tenant (a transfer that matched no reservation)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// forModel returns model name's series, made (with every tenant label
// started at zero) on first use: a model loaded again after an unload
// counts on where it stopped.
func (m *Metrics) forModel(name string) *modelMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mm, ok := m.models[name]; ok {
		return mm
	}
	mm := &modelMetrics{name: name, reg: prometheus.WrapRegistererWith(prometheus.Labels{"model_name": name}, m.reg)}
	register := func(c prometheus.Collector) {
		mm.reg.MustRegister(c)
		m.own = append(m.own, c)
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		register(c)
		return c
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		register(c)
		return c
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		register(h)
		return h
	}
	mm.policyDenied = counterVec("cloison_policy_denied_total", "Requests denied by policy.", tenantLabel...)
	mm.success = counterVec("cloison_request_success_total", "Requests that finished normally, by finish reason (stop, length).", "tenant", "finished_reason")
	mm.failed = counterVec("cloison_request_failure_total", "Requests that entered the engine and ended without a normal finish (aborted or failed), by state and error code.", "tenant", "state", "code")
	mm.promptToks = counterVec("cloison_prompt_tokens_total", "Prompt tokens of the requests that left the engine.", tenantLabel...)
	mm.genToks = counterVec("cloison_generation_tokens_total", "Tokens generated.", tenantLabel...)
	mm.tokenizeToks = counterVec("cloison_tokenize_tokens_total", "Tokens produced by the Tokenize method (charged to the tenant's quota).", tenantLabel...)
	mm.isolationFailures = counterVec("cloison_isolation_failures_total", "Requests failed closed by an isolation check (output withheld, incident opened), by tenant and detector.", "tenant", "kind")
	mm.preemptions = counter("cloison_num_preemptions_total", "Preemptions: a running request's KV pages taken back, to be recomputed.")
	mm.prefixQueries = counter("cloison_prefix_cache_query_tokens_total", "Prompt tokens looked up in the tenant-namespaced prefix cache."+prefixHelpNote)
	mm.prefixHits = counter("cloison_prefix_cache_hit_tokens_total", "Prompt tokens served from the tenant-namespaced prefix cache."+prefixHelpNote)
	mm.ttft = histogram("cloison_time_to_first_token_seconds", "Time from the request's arrival at the engine to its first token.", ttftBuckets)
	mm.itl = histogram("cloison_inter_token_latency_seconds", "Time between two consecutive tokens of a request.", itlBuckets)
	mm.e2e = histogram("cloison_e2e_request_latency_seconds", "Time from the request's arrival at the engine to its end.", phaseBuckets)
	mm.queue = histogram("cloison_request_queue_time_seconds", "Time a request waited for KV pages before it was first scheduled.", phaseBuckets)
	mm.prefill = histogram("cloison_request_prefill_time_seconds", "Time from a request's first scheduling to its first token (prefill; with a prefill node, the verified transfer included).", phaseBuckets)
	mm.decode = histogram("cloison_request_decode_time_seconds", "Time from a request's first token to its last.", phaseBuckets)
	mm.reqPrompt = histogram("cloison_request_prompt_tokens", "Prompt tokens per request.", tokenBuckets)
	mm.reqGeneration = histogram("cloison_request_generation_tokens", "Generated tokens per request.", tokenBuckets)
	for _, l := range m.labels {
		mm.initTenant(l)
	}
	m.models[name] = mm
	return mm
}

// serveModel starts reading the pool, load and attestation of v's engine
// (a view of the server serving one model) under v's model_name.
func (m *Metrics) serveModel(v *Server) {
	mm := m.forModel(v.cfg.ModelName)
	m.mu.Lock()
	defer m.mu.Unlock()
	if mm.state != nil {
		mm.reg.Unregister(mm.state)
	}
	mm.state = &stateCollector{s: v, m: m}
	mm.reg.MustRegister(mm.state)
}

// unserveModel stops reading model name's engine (unloaded); its counters
// stay.
func (m *Metrics) unserveModel(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mm, ok := m.models[name]; ok && mm.state != nil {
		mm.reg.Unregister(mm.state)
		mm.state = nil
	}
}

// initTenant starts a new tenant label's alerting series at zero, for
// every model.
func (m *Metrics) initTenant(label string) {
	m.mu.Lock()
	m.labels = append(m.labels, label)
	for _, mm := range m.models {
		mm.initTenant(label)
	}
	m.mu.Unlock()
	m.transferFailed.WithLabelValues(label)
}

func (mm *modelMetrics) initTenant(label string) {
	for _, k := range isolationKinds {
		mm.isolationFailures.WithLabelValues(label, k)
	}
}

// MetricsHandler serves the Prometheus text exposition. It authenticates
// no one: it is meant for a listener of its own (cloisond --metrics-addr,
// loopback or guarded by a bearer token), never the public API's.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler }

func (m *Metrics) tenant(t cloison.TenantID) string { return m.tenants.label(t) }

func (m *Metrics) observe(sum engine.Summary, prefixCache bool) {
	m.modelMetrics.observe(m.tenant(sum.Tenant), sum, prefixCache)
}

// observe counts one sequence's summary; t is its tenant label.
func (m *modelMetrics) observe(t string, sum engine.Summary, prefixCache bool) {
	switch sum.State {
	case engine.Finished:
		m.success.WithLabelValues(t, string(sum.Finish)).Inc()
	default:
		m.failed.WithLabelValues(t, sum.State.String(), string(sum.Code)).Inc()
	}
	m.promptToks.WithLabelValues(t).Add(float64(sum.Prompt))
	m.genToks.WithLabelValues(t).Add(float64(sum.Generated))
	m.reqPrompt.Observe(float64(sum.Prompt))
	m.reqGeneration.Observe(float64(sum.Generated))
	m.e2e.Observe(sum.Duration.Seconds())
	m.preemptions.Add(float64(sum.Preemptions))
	scheduled := sum.Queued > 0 || sum.FirstToken > 0
	if scheduled {
		m.queue.Observe(sum.Queued.Seconds())
		if prefixCache {
			m.prefixQueries.Add(float64(sum.Prompt))
			m.prefixHits.Add(float64(sum.Cached))
		}
	}
	if sum.FirstToken > 0 {
		m.ttft.Observe(sum.FirstToken.Seconds())
		m.prefill.Observe(sum.Prefill.Seconds())
		m.decode.Observe(sum.Decode.Seconds())
	}
}

// tenantLabels gives each tenant its metrics label: its own id when listed
// (or among the first max seen), else OtherTenant. A label, once given,
// never changes.
type tenantLabels struct {
	onNew func(label string) // called once per new label, outside mu
	fixed bool               // a configured list: no tenant is added

	mu    sync.Mutex
	max   int                       // guarded by mu
	known map[cloison.TenantID]bool // guarded by mu
}

func newTenantLabels(cfg MetricsConfig, onNew func(string)) *tenantLabels {
	l := &tenantLabels{onNew: onNew, known: map[cloison.TenantID]bool{}, max: cfg.MaxTenants}
	if l.max <= 0 {
		l.max = DefaultMetricsMaxTenants
	}
	if len(cfg.Tenants) > 0 {
		l.fixed = true
		for _, t := range cfg.Tenants {
			if !l.known[t] {
				l.known[t] = true
				onNew(string(t))
			}
		}
	}
	return l
}

func (l *tenantLabels) label(t cloison.TenantID) string {
	if t == "" {
		return ""
	}
	l.mu.Lock()
	if l.known[t] {
		l.mu.Unlock()
		return string(t)
	}
	if l.fixed || len(l.known) >= l.max {
		l.mu.Unlock()
		return OtherTenant
	}
	l.known[t] = true
	l.mu.Unlock()
	l.onNew(string(t))
	return string(t)
}

var (
	descRunning   = prometheus.NewDesc("cloison_num_requests_running", "Requests holding KV leases.", nil, nil)
	descWaiting   = prometheus.NewDesc("cloison_num_requests_waiting", "Requests queued for KV pages.", nil, nil)
	descKVUsage   = prometheus.NewDesc("cloison_kv_cache_usage_ratio", "Fraction of KV pages leased or cached (0 to 1).", nil, nil)
	descPages     = prometheus.NewDesc("cloison_isolation_pages_in_use", "KV pages referenced by the tenant's live leases.", tenantLabel, nil)
	descReserved  = prometheus.NewDesc("cloison_isolation_pages_reserved", "KV pages reserved for the tenant.", tenantLabel, nil)
	descScrubbed  = prometheus.NewDesc("cloison_isolation_pages_scrubbed_total", "KV pages of the tenant zeroed before reuse.", tenantLabel, nil)
	descBlocked   = prometheus.NewDesc("cloison_isolation_violations_blocked_total", "Reads refused by the pool's ownership and fill checks.", tenantLabel, nil)
	descRejected  = prometheus.NewDesc("cloison_admission_rejected_total", "Requests rejected before any KV allocation, by code.", []string{"tenant", "code"}, nil)
	descAttestOK  = prometheus.NewDesc("cloison_capacity_attestation_ok", "1 when the capacity attestation passed (a node whose attestation fails does not start).", nil, nil)
	descServed    = prometheus.NewDesc("cloison_served_context_tokens", "Context length the API advertises.", nil, nil)
	descModelCtx  = prometheus.NewDesc("cloison_model_context_tokens", "Context length the model advertises.", nil, nil)
	descPoolToken = prometheus.NewDesc("cloison_pool_tokens", "Tokens the KV pool holds.", nil, nil)
	descReady     = prometheus.NewDesc("cloison_model_ready", "1 when the model serves: its capacity attestation passed and its engine runs (/readyz needs every model's).", nil, nil)
)

// stateCollector reads the engine, pool and admission at scrape time; the
// per-tenant figures are summed per tenant label.
type stateCollector struct {
	s *Server
	m *Metrics
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKVUsage, descPages, descReserved, descScrubbed, descBlocked, descRejected, descAttestOK, descServed, descModelCtx, descPoolToken, descReady} {
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
	type perTenant struct{ leased, reserved, scrubbed, blocked float64 }
	byLabel := map[string]*perTenant{}
	for _, t := range st.Tenants {
		l := c.m.tenant(t.Tenant)
		p := byLabel[l]
		if p == nil {
			p = &perTenant{}
			byLabel[l] = p
		}
		p.leased += float64(t.Leased)
		p.reserved += float64(t.Reserved)
		p.scrubbed += float64(t.Scrubbed)
		p.blocked += float64(t.Violations)
	}
	for l, p := range byLabel {
		ch <- prometheus.MustNewConstMetric(descPages, prometheus.GaugeValue, p.leased, l)
		ch <- prometheus.MustNewConstMetric(descReserved, prometheus.GaugeValue, p.reserved, l)
		ch <- prometheus.MustNewConstMetric(descScrubbed, prometheus.CounterValue, p.scrubbed, l)
		ch <- prometheus.MustNewConstMetric(descBlocked, prometheus.CounterValue, p.blocked, l)
	}
	rejected := map[[2]string]float64{}
	for t, byCode := range e.Admission().Rejections() {
		for code, n := range byCode {
			rejected[[2]string{c.m.tenant(t), string(code)}] += float64(n)
		}
	}
	for k, n := range rejected {
		ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, n, k[0], k[1])
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
	ready := 0.0
	if c.s.req == nil || c.s.req.ModelReady() == nil {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
}

var (
	descGrammarBytes   = prometheus.NewDesc("cloison_grammar_cache_bytes", "Measured bytes of the compiled response_format grammars the cache holds.", nil, nil)
	descGrammarBudget  = prometheus.NewDesc("cloison_grammar_cache_budget_bytes", "Byte budget of the grammar cache (--grammar-cache-bytes), shared fairly between tenants.", nil, nil)
	descGrammarTenant  = prometheus.NewDesc("cloison_grammar_cache_tenant_bytes", "Measured bytes of the tenant's cached grammars.", tenantLabel, nil)
	descGrammarEntries = prometheus.NewDesc("cloison_grammar_cache_entries", "Compiled grammars the cache holds.", nil, nil)
	descGrammarHits    = prometheus.NewDesc("cloison_grammar_cache_hits_total", "response_format schemas answered from the grammar cache.", nil, nil)
	descGrammarCompile = prometheus.NewDesc("cloison_grammar_compiles_total", "response_format schemas compiled (after admission; refused schemas included).", nil, nil)
	descGrammarEvicted = prometheus.NewDesc("cloison_grammar_cache_evictions_total", "Grammars evicted to keep the cache within its budget.", nil, nil)
)

// grammarCollector reads the grammar cache (service.Requests.Grammars) at
// scrape time.
type grammarCollector struct {
	s *Server
	m *Metrics
}

func (c grammarCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGrammarBytes, descGrammarBudget, descGrammarTenant, descGrammarEntries, descGrammarHits, descGrammarCompile, descGrammarEvicted} {
		ch <- d
	}
}

func (c grammarCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.req == nil {
		return
	}
	g := c.s.req.Grammars()
	st := g.Stats()
	ch <- prometheus.MustNewConstMetric(descGrammarBytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descGrammarBudget, prometheus.GaugeValue, float64(st.Budget))
	ch <- prometheus.MustNewConstMetric(descGrammarEntries, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(descGrammarHits, prometheus.CounterValue, float64(st.Hits))
	ch <- prometheus.MustNewConstMetric(descGrammarCompile, prometheus.CounterValue, float64(st.Compiles))
	ch <- prometheus.MustNewConstMetric(descGrammarEvicted, prometheus.CounterValue, float64(st.Evictions))
	byLabel := map[string]float64{}
	for t, n := range g.OwnersBytes() {
		byLabel[c.m.tenant(cloison.TenantID(t))] += float64(n)
	}
	for l, n := range byLabel {
		ch <- prometheus.MustNewConstMetric(descGrammarTenant, prometheus.GaugeValue, n, l)
	}
}
