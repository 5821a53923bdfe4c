package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is the arithmetic of `cloisonctl bench serve`, without I/O:
// arrival times, request lengths, per-request measurements and their
// summary, the way vLLM's benchmarks/benchmark_serving.py computes them.

// arrivals returns n send offsets from the start of the run. rate ≤ 0 or
// +Inf sends every request at once (the concurrency limit then paces them).
// Otherwise the gaps are Gamma(shape burstiness, scale 1/(rate·burstiness)),
// as vLLM draws them: mean 1/rate whatever the burstiness; burstiness 1 is a
// Poisson process, below 1 burstier, above 1 more regular. fixed makes every
// gap exactly 1/rate. The same seed gives the same times.
func arrivals(n int, rate, burstiness float64, fixed bool, seed uint64) []time.Duration {
	out := make([]time.Duration, n)
	if rate <= 0 || math.IsInf(rate, 1) {
		return out
	}
	r := rand.New(rand.NewPCG(seed, 0x6172726976616c73))
	var t float64
	for i := range out {
		out[i] = time.Duration(t * float64(time.Second))
		if fixed {
			t += 1 / rate
		} else {
			t += gamma(r, burstiness) / (rate * burstiness)
		}
	}
	return out
}

// gamma draws Gamma(shape, 1) by Marsaglia and Tsang's method (ACM TOMS
// 26(3), 2000), with the shape < 1 boost of their section 6.
func gamma(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return gamma(r, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// lengthDist draws a token count. Kinds:
//
//	fixed     always Len
//	uniform   uniform on [Len·(1−Ratio), Len·(1+Ratio)] (vLLM's random dataset)
//	sharegpt  log-normal with median Median and shape Sigma, clamped to [Min, Max]
//
// Every draw is at least 1 and, where Max > 0, at most Max.
type lengthDist struct {
	Kind   string  `json:"dist"`
	Len    int     `json:"len,omitempty"`
	Ratio  float64 `json:"range_ratio,omitempty"`
	Median float64 `json:"median,omitempty"`
	Sigma  float64 `json:"sigma,omitempty"`
	Min    int     `json:"min,omitempty"`
	Max    int     `json:"max,omitempty"`
}

// The synthesized ShareGPT-like lengths: log-normal with the means the vLLM
// paper reports for ShareGPT (Kwon et al., SOSP 2023, Table 1: 161 input and
// 338 output tokens on average), shapes σ 1.0 and 0.9 chosen by us (not fit
// to the data set, which is not downloaded), so the medians are
// mean·exp(−σ²/2). Clamped as vLLM filters ShareGPT: at least 4 tokens,
// prompts at most 1024.
var (
	shareGPTInput  = lengthDist{Kind: "sharegpt", Median: 161 * math.Exp(-0.5), Sigma: 1.0, Min: 4, Max: 1024}
	shareGPTOutput = lengthDist{Kind: "sharegpt", Median: 338 * math.Exp(-0.405), Sigma: 0.9, Min: 4, Max: 1024}
)

func (d lengthDist) check() error {
	switch d.Kind {
	case "fixed":
		if d.Len < 1 {
			return fmt.Errorf("fixed length %d: want ≥ 1", d.Len)
		}
	case "uniform":
		if d.Len < 1 || d.Ratio < 0 || d.Ratio >= 1 {
			return fmt.Errorf("uniform length %d ratio %g: want length ≥ 1 and 0 ≤ ratio < 1", d.Len, d.Ratio)
		}
	case "sharegpt":
		if d.Median <= 0 || d.Sigma < 0 || d.Min < 1 || (d.Max > 0 && d.Max < d.Min) {
			return fmt.Errorf("sharegpt median %g sigma %g min %d max %d: want median > 0, sigma ≥ 0, 1 ≤ min ≤ max", d.Median, d.Sigma, d.Min, d.Max)
		}
	default:
		return fmt.Errorf("length distribution %q: want fixed, uniform or sharegpt", d.Kind)
	}
	return nil
}

func (d lengthDist) draw(r *rand.Rand) int {
	var n int
	switch d.Kind {
	case "uniform":
		lo, hi := int(float64(d.Len)*(1-d.Ratio)), int(float64(d.Len)*(1+d.Ratio))
		n = lo + r.IntN(hi-lo+1)
	case "sharegpt":
		n = int(math.Round(d.Median * math.Exp(d.Sigma*r.NormFloat64())))
		n = max(n, d.Min)
	default:
		n = d.Len
	}
	if d.Max > 0 {
		n = min(n, d.Max)
	}
	return max(n, 1)
}

func (d lengthDist) String() string {
	switch d.Kind {
	case "uniform":
		return fmt.Sprintf("uniform %d±%g%%", d.Len, 100*d.Ratio)
	case "sharegpt":
		return fmt.Sprintf("sharegpt-lognormal(median %.0f, σ %.2g, %d…%d)", d.Median, d.Sigma, d.Min, d.Max)
	}
	return fmt.Sprintf("fixed %d", d.Len)
}

// parseDist reads fixed:N, uniform:N:RATIO or sharegpt (the synthesized
// fit; input selects the prompt or the output one), sharegpt:MAX clamping it.
func parseDist(s string, input bool) (lengthDist, error) {
	parts := strings.Split(s, ":")
	num := func(i int) (float64, error) {
		if i >= len(parts) {
			return 0, fmt.Errorf("length %q: missing a number", s)
		}
		return strconv.ParseFloat(parts[i], 64)
	}
	var d lengthDist
	var err error
	switch parts[0] {
	case "fixed":
		var n float64
		n, err = num(1)
		d = lengthDist{Kind: "fixed", Len: int(n)}
	case "uniform":
		var n, r float64
		if n, err = num(1); err == nil {
			r, err = num(2)
		}
		d = lengthDist{Kind: "uniform", Len: int(n), Ratio: r}
	case "sharegpt":
		d = shareGPTOutput
		if input {
			d = shareGPTInput
		}
		if len(parts) > 1 {
			var m float64
			m, err = num(1)
			d.Max = int(m)
		}
	default:
		if n, e := strconv.Atoi(s); e == nil {
			d = lengthDist{Kind: "fixed", Len: n}
		} else {
			err = fmt.Errorf("length %q: want N, fixed:N, uniform:N:RATIO or sharegpt[:MAX]", s)
		}
	}
	if err != nil {
		return d, err
	}
	return d, d.check()
}

// reqResult is one request's measurements.
type reqResult struct {
	Tenant  string
	Input   int // prompt tokens (the server's usage, else what was sent)
	Output  int // completion tokens (usage, else chunks with text)
	Wanted  int // output tokens asked for
	TTFT    time.Duration
	E2E     time.Duration
	ITL     []time.Duration // gaps between successive chunks with text
	Err     string
	Started time.Duration // send time from the start of the run
	// Stages is the request's time in ms per stage: the server's
	// Server-Timing trailer (cloisond --server-timing) or the engine's
	// summary (--engine); nil if neither.
	Stages map[string]float64
}

// parseServerTiming reads a Server-Timing value (name;dur=MS, …) into ms
// per name; entries without a duration are skipped, nil for none.
func parseServerTiming(v string) map[string]float64 {
	var out map[string]float64
	for _, e := range strings.Split(v, ",") {
		parts := strings.Split(strings.TrimSpace(e), ";")
		name := strings.TrimSpace(parts[0])
		for _, p := range parts[1:] {
			k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok || k != "dur" || name == "" {
				continue
			}
			if ms, err := strconv.ParseFloat(strings.Trim(val, `"`), 64); err == nil && ms >= 0 {
				if out == nil {
					out = map[string]float64{}
				}
				out[name] += ms
			}
		}
	}
	return out
}

// The breakdown's rows, in the order a request meets them; "engine" is
// queue + prefill + decode, "platform" total − engine (total is the
// server's handler, the engine alone's whole request).
var breakdownOrder = []string{"auth", "admission", "policy", "ledger.append", "queue", "prefill", "decode", "inference", "total", "engine", "platform"}

// stageDist is one stage's summary in ms over the requests that had it.
type stageDist struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
}

// breakdown summarizes the completed requests' stages (nil if none had any).
func breakdown(rs []reqResult) map[string]stageDist {
	per := map[string][]float64{}
	for _, r := range rs {
		if r.Err != "" || r.Stages == nil {
			continue
		}
		for k, v := range r.Stages {
			per[k] = append(per[k], v)
		}
		q, okq := r.Stages["queue"]
		pf, okp := r.Stages["prefill"]
		d, okd := r.Stages["decode"]
		if okq || okp || okd {
			eng := q + pf + d
			per["engine"] = append(per["engine"], eng)
			if t, ok := r.Stages["total"]; ok {
				per["platform"] = append(per["platform"], max(t-eng, 0))
			}
		}
	}
	if len(per) == 0 {
		return nil
	}
	out := map[string]stageDist{}
	for k, v := range per {
		d := summarize(v)
		out[k] = stageDist{Count: len(v), Mean: d.Mean, P50: d.P50, P90: d.P90, P99: d.P99}
	}
	return out
}

// tpot is (e2e − ttft)/(output − 1), 0 for one output token.
func (r reqResult) tpot() time.Duration {
	if r.Output <= 1 {
		return 0
	}
	return (r.E2E - r.TTFT) / time.Duration(r.Output-1)
}

// percentile is numpy's default (linear interpolation between closest
// ranks) of sorted values, p in [0, 100]; 0 for none.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	x := p / 100 * float64(len(sorted)-1)
	i := int(math.Floor(x))
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (x-float64(i))*(sorted[i+1]-sorted[i])
}

// dist summarizes values in ms: mean, standard deviation (population, as
// numpy's std), median and the percentiles vLLM reports.
type dist struct {
	Mean, Std, Median, P50, P90, P99 float64
}

func summarize(ms []float64) dist {
	if len(ms) == 0 {
		return dist{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(len(s))
	var sq float64
	for _, v := range s {
		sq += (v - mean) * (v - mean)
	}
	return dist{Mean: mean, Std: math.Sqrt(sq / float64(len(s))), Median: percentile(s, 50), P50: percentile(s, 50), P90: percentile(s, 90), P99: percentile(s, 99)}
}

// slo is --goodput's targets in ms (0: none on that metric).
type slo struct{ TTFT, TPOT, E2E float64 }

func parseSLO(fields []string) (slo, error) {
	var s slo
	for _, f := range fields {
		k, v, ok := strings.Cut(f, ":")
		ms, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || ms <= 0 {
			return s, fmt.Errorf("--goodput %q: want ttft:MS, tpot:MS or e2el:MS with MS > 0", f)
		}
		switch k {
		case "ttft":
			s.TTFT = ms
		case "tpot":
			s.TPOT = ms
		case "e2el":
			s.E2E = ms
		default:
			return s, fmt.Errorf("--goodput %q: want ttft, tpot or e2el", f)
		}
	}
	return s, nil
}

func (s slo) any() bool { return s.TTFT > 0 || s.TPOT > 0 || s.E2E > 0 }

// meets says whether a completed request met every target.
func (s slo) meets(r reqResult) bool {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return (s.TTFT == 0 || ms(r.TTFT) <= s.TTFT) && (s.TPOT == 0 || ms(r.tpot()) <= s.TPOT) && (s.E2E == 0 || ms(r.E2E) <= s.E2E)
}

// serveMetrics is the result of one run; the field names are vLLM's result
// JSON where vLLM has the figure.
type serveMetrics struct {
	Date              string   `json:"date"`
	BaseURL           string   `json:"base_url"`
	Model             string   `json:"model_id"`
	NumPrompts        int      `json:"num_prompts"`
	RequestRate       any      `json:"request_rate"` // a number, or "inf"
	Burstiness        float64  `json:"burstiness"`
	FixedRate         bool     `json:"fixed_rate"`
	MaxConcurrency    int      `json:"max_concurrency,omitempty"`
	Seed              uint64   `json:"seed"`
	LengthsEnforced   bool     `json:"lengths_enforced"` // ignore_eos and min_tokens accepted
	Duration          float64  `json:"duration"`         // seconds
	Completed         int      `json:"completed"`
	Failed            int      `json:"failed"`
	TotalInput        int      `json:"total_input_tokens"`
	TotalOutput       int      `json:"total_output_tokens"`
	RequestThroughput float64  `json:"request_throughput"`
	RequestGoodput    *float64 `json:"request_goodput"`
	OutputThroughput  float64  `json:"output_throughput"`
	TotalThroughput   float64  `json:"total_token_throughput"`
	MaxConcurrentSeen int      `json:"max_concurrent_requests"`

	// TTFT, TPOT, ITL and E2E in ms; JSON writes them as vLLM does
	// (mean_ttft_ms, median_ttft_ms, std_ttft_ms, p50_ttft_ms, …, and e2el
	// for E2E).
	TTFT, TPOT, ITL, E2E dist `json:"-"`

	InputLens  []int     `json:"input_lens"`
	OutputLens []int     `json:"output_lens"`
	TTFTs      []float64 `json:"ttfts"` // seconds, as vLLM
	Errors     []string  `json:"errors"`

	Tenants map[string]*tenantMetrics `json:"tenants"`

	// Breakdown is the requests' time per stage (reqResult.Stages), nil
	// when the server sent none.
	Breakdown map[string]stageDist `json:"breakdown,omitempty"`
}

// tenantMetrics is one tenant's share of a run.
type tenantMetrics struct {
	Completed        int     `json:"completed"`
	Failed           int     `json:"failed"`
	TotalInput       int     `json:"total_input_tokens"`
	TotalOutput      int     `json:"total_output_tokens"`
	OutputThroughput float64 `json:"output_throughput"`
	MedianTTFT       float64 `json:"median_ttft_ms"`
	P99TTFT          float64 `json:"p99_ttft_ms"`
	MedianTPOT       float64 `json:"median_tpot_ms"`
	Good             *int    `json:"good,omitempty"`
}

// compute fills the throughput and latency figures from the requests of a
// run that lasted elapsed.
func (m *serveMetrics) compute(rs []reqResult, elapsed time.Duration, s slo) {
	m.Duration = elapsed.Seconds()
	m.Tenants = map[string]*tenantMetrics{}
	m.InputLens, m.OutputLens, m.TTFTs, m.Errors = []int{}, []int{}, []float64{}, []string{}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	var ttft, tpot, itl, e2e []float64
	per := map[string][3][]float64{}
	good := 0
	for _, r := range rs {
		t := m.Tenants[r.Tenant]
		if t == nil {
			t = &tenantMetrics{}
			m.Tenants[r.Tenant] = t
		}
		if r.Err != "" {
			m.Failed++
			t.Failed++
			m.Errors = append(m.Errors, r.Err)
			continue
		}
		m.Completed++
		t.Completed++
		m.TotalInput += r.Input
		m.TotalOutput += r.Output
		t.TotalInput += r.Input
		t.TotalOutput += r.Output
		m.InputLens = append(m.InputLens, r.Input)
		m.OutputLens = append(m.OutputLens, r.Output)
		m.TTFTs = append(m.TTFTs, r.TTFT.Seconds())
		ttft = append(ttft, ms(r.TTFT))
		e2e = append(e2e, ms(r.E2E))
		p := per[r.Tenant]
		p[0] = append(p[0], ms(r.TTFT))
		if r.Output > 1 {
			tpot = append(tpot, ms(r.tpot()))
			p[1] = append(p[1], ms(r.tpot()))
		}
		per[r.Tenant] = p
		for _, g := range r.ITL {
			itl = append(itl, ms(g))
		}
		if s.any() && s.meets(r) {
			good++
			if t.Good == nil {
				t.Good = new(int)
			}
			*t.Good++
		}
	}
	sec := max(m.Duration, 1e-9)
	m.RequestThroughput = float64(m.Completed) / sec
	m.OutputThroughput = float64(m.TotalOutput) / sec
	m.TotalThroughput = float64(m.TotalInput+m.TotalOutput) / sec
	if s.any() {
		g := float64(good) / sec
		m.RequestGoodput = &g
	}
	m.TTFT, m.TPOT, m.ITL, m.E2E = summarize(ttft), summarize(tpot), summarize(itl), summarize(e2e)
	m.Breakdown = breakdown(rs)
	for name, t := range m.Tenants {
		t.OutputThroughput = float64(t.TotalOutput) / sec
		a, b := summarize(per[name][0]), summarize(per[name][1])
		t.MedianTTFT, t.P99TTFT, t.MedianTPOT = a.Median, a.P99, b.Median
		if s.any() && t.Good == nil {
			t.Good = new(int)
		}
	}
}

// MarshalJSON writes the struct's fields and the latency figures under
// vLLM's names.
func (m *serveMetrics) MarshalJSON() ([]byte, error) {
	type plain serveMetrics
	b, err := json.Marshal((*plain)(m))
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		name string
		d    dist
	}{{"ttft", m.TTFT}, {"tpot", m.TPOT}, {"itl", m.ITL}, {"e2el", m.E2E}} {
		out["mean_"+l.name+"_ms"] = l.d.Mean
		out["median_"+l.name+"_ms"] = l.d.Median
		out["std_"+l.name+"_ms"] = l.d.Std
		out["p50_"+l.name+"_ms"] = l.d.P50
		out["p90_"+l.name+"_ms"] = l.d.P90
		out["p99_"+l.name+"_ms"] = l.d.P99
	}
	return json.MarshalIndent(out, "", "  ")
}
