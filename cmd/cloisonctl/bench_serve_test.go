package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestPercentileIsNumpys checks percentile against numpy.percentile's
// default (linear) on small lists computed by hand.
func TestPercentileIsNumpys(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 99, 7},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 90, 3.7},
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 99, 99.1},
	} {
		if got := percentile(tc.xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("percentile(%v, %g) = %g, want %g", tc.xs, tc.p, got, tc.want)
		}
	}
	d := summarize([]float64{4, 1, 3, 2})
	if d.Mean != 2.5 || d.Median != 2.5 || math.Abs(d.Std-math.Sqrt(1.25)) > 1e-12 {
		t.Errorf("summarize: %+v", d)
	}
}

// TestPercentileProperties: percentiles are monotone in p and lie between
// the smallest and the largest value.
func TestPercentileProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		xs := rapid.SliceOfN(rapid.Float64Range(0, 1e6), 1, 200).Draw(t, "xs")
		slices.Sort(xs)
		prev := math.Inf(-1)
		for _, p := range []float64{0, 10, 50, 90, 99, 100} {
			v := percentile(xs, p)
			if v < prev || v < xs[0] || v > xs[len(xs)-1] {
				t.Fatalf("p%g = %g (previous %g) outside [%g, %g] or decreasing", p, v, prev, xs[0], xs[len(xs)-1])
			}
			prev = v
		}
	})
}

// TestGoodputCountsRequestsMeetingEverySLO: a request is good when its
// TTFT, TPOT and E2E are within every given target; TPOT is
// (e2e − ttft)/(output − 1).
func TestGoodputCountsRequestsMeetingEverySLO(t *testing.T) {
	ms := time.Millisecond
	rs := []reqResult{
		{Tenant: "a", Input: 10, Output: 11, TTFT: 100 * ms, E2E: 300 * ms},  // TPOT 20: good
		{Tenant: "a", Input: 10, Output: 11, TTFT: 600 * ms, E2E: 700 * ms},  // TTFT over
		{Tenant: "b", Input: 10, Output: 11, TTFT: 100 * ms, E2E: 1100 * ms}, // TPOT 100: over
		{Tenant: "b", Input: 10, Output: 1, TTFT: 200 * ms, E2E: 200 * ms},   // one token, TPOT 0: good
		{Tenant: "b", Err: "HTTP 429"},
	}
	if got := rs[2].tpot(); got != 100*ms {
		t.Fatalf("tpot = %v", got)
	}
	s, err := parseSLO([]string{"ttft:500", "tpot:50"})
	if err != nil {
		t.Fatal(err)
	}
	var m serveMetrics
	m.compute(rs, 2*time.Second, s)
	if m.Completed != 4 || m.Failed != 1 || m.TotalOutput != 34 || m.TotalInput != 40 {
		t.Fatalf("counts: %+v", m)
	}
	if m.RequestGoodput == nil || *m.RequestGoodput != 1 { // 2 good in 2 s
		t.Fatalf("goodput %v, want 1 req/s", m.RequestGoodput)
	}
	if *m.Tenants["a"].Good != 1 || *m.Tenants["b"].Good != 1 {
		t.Errorf("per tenant good: a %d b %d", *m.Tenants["a"].Good, *m.Tenants["b"].Good)
	}
	if m.RequestThroughput != 2 || m.OutputThroughput != 17 || m.TotalThroughput != 37 {
		t.Errorf("throughput %g %g %g", m.RequestThroughput, m.OutputThroughput, m.TotalThroughput)
	}
	if m.TPOT.Mean != (20.0+10+100)/3 { // the one-token request has no TPOT
		t.Errorf("mean TPOT %g", m.TPOT.Mean)
	}
	b, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	json.Unmarshal(b, &j)
	for _, k := range []string{"request_throughput", "request_goodput", "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "p90_tpot_ms", "mean_itl_ms", "p99_e2el_ms", "completed", "total_output_tokens"} {
		if _, ok := j[k]; !ok {
			t.Errorf("JSON lacks %s", k)
		}
	}
	for _, bad := range []string{"ttft", "ttft:0", "foo:5", "ttft:x"} {
		if _, err := parseSLO([]string{bad}); err == nil {
			t.Errorf("parseSLO(%q) accepted", bad)
		}
	}
}

// TestArrivalsMeanRate: whatever the burstiness, the gaps average 1/rate
// (Gamma(k, 1/(rate·k)) has mean 1/rate); the same seed gives the same
// times, another seed others; fixed rate is exactly 1/rate; inf sends all at
// once.
func TestArrivalsMeanRate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(0.5, 200).Draw(t, "rate")
		burst := rapid.SampledFrom([]float64{0.25, 0.5, 1, 2, 8}).Draw(t, "burstiness")
		seed := rapid.Uint64().Draw(t, "seed")
		const n = 4000
		at := arrivals(n+1, rate, burst, false, seed)
		mean := at[n].Seconds() / n
		// The gaps' standard deviation is 1/(rate·√k); the mean of n of
		// them is within 6 standard errors of 1/rate.
		tol := 6 / (rate * math.Sqrt(burst) * math.Sqrt(n))
		if math.Abs(mean-1/rate) > tol {
			t.Fatalf("mean gap %g, want %g ± %g", mean, 1/rate, tol)
		}
		if !slices.Equal(at, arrivals(n+1, rate, burst, false, seed)) {
			t.Fatal("same seed, different arrivals")
		}
		if slices.Equal(at, arrivals(n+1, rate, burst, false, seed+1)) {
			t.Fatal("another seed, same arrivals")
		}
		for i := 1; i < len(at); i++ {
			if at[i] < at[i-1] {
				t.Fatalf("arrival %d before %d", i, i-1)
			}
		}
	})
	fixed := arrivals(5, 4, 1, true, 1)
	for i, d := range fixed {
		if d != time.Duration(i)*250*time.Millisecond {
			t.Errorf("fixed arrival %d at %v", i, d)
		}
	}
	for _, d := range arrivals(5, math.Inf(1), 1, false, 1) {
		if d != 0 {
			t.Errorf("inf rate: arrival at %v", d)
		}
	}
}

// TestLengthDistributions: fixed is exact, uniform stays in its range, the
// ShareGPT-like draw's mean is near the documented mean and within its
// clamps, and the plan is a function of the seed.
func TestLengthDistributions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	u, err := parseDist("uniform:100:0.5", true)
	if err != nil {
		t.Fatal(err)
	}
	sg, _ := parseDist("sharegpt", true)
	var sum float64
	const n = 20000
	for range n {
		if v := u.draw(r); v < 50 || v > 150 {
			t.Fatalf("uniform draw %d", v)
		}
		v := sg.draw(r)
		if v < 4 || v > 1024 {
			t.Fatalf("sharegpt draw %d", v)
		}
		sum += float64(v)
	}
	if mean := sum / n; mean < 140 || mean > 175 { // 161 before clamping
		t.Errorf("sharegpt input mean %g", mean)
	}
	if d, _ := parseDist("32", false); d.draw(r) != 32 {
		t.Error("fixed")
	}
	for _, bad := range []string{"uniform:10:1.5", "fixed:0", "normal:3", "sharegpt:x", "uniform:10"} {
		if _, err := parseDist(bad, true); err == nil {
			t.Errorf("parseDist(%q) accepted", bad)
		}
	}
	c := serveConfig{numPrompts: 50, rate: 10, burstiness: 1, input: u, output: sg, idLo: 97, idHi: 123, seed: 7,
		tenants: []serveTenant{{Name: "a", Weight: 3}, {Name: "b", Weight: 1, Output: &lengthDist{Kind: "fixed", Len: 5}}}}
	p1, p2 := c.plan(), c.plan()
	for i := range p1 {
		if p1[i].tenant != p2[i].tenant || !slices.Equal(p1[i].prompt, p2[i].prompt) || p1[i].output != p2[i].output || p1[i].arrivalOffset != p2[i].arrivalOffset {
			t.Fatalf("plan %d differs between runs with one seed", i)
		}
		if p1[i].tenant == 1 && p1[i].output != 5 {
			t.Errorf("tenant b's own output length ignored: %d", p1[i].output)
		}
	}
}

// TestBenchServeEndToEnd runs a tiny benchmark (8 requests, two tenants,
// at most 4 in flight) against an in-process platform and checks the JSON's
// counts; a sweep writes an SVG. No timing is asserted.
func TestBenchServeEndToEnd(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "beta"}})
	ta, tb := p.Token(t, "alpha", tenancy.ScopeInfer), p.Token(t, "beta", tenancy.ScopeInfer)
	dir := t.TempDir()
	js := filepath.Join(dir, "serve.json")
	out := mustRun(t, "bench", "serve", "--base-url", p.URL, "--model", platformtest.Model, "--num-prompts", "8",
		"--max-concurrency", "4", "--input-len", "uniform:24:0.5", "--output-len", "6", "--seed", "3",
		"--tenant", "alpha="+ta+":3", "--tenant", "beta="+tb+":1", "--goodput", "ttft:60000,tpot:60000", "--json", js)
	if !strings.Contains(out, "Serving Benchmark Result") || !strings.Contains(out, "Per tenant") {
		t.Errorf("table:\n%s", out)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Completed       int                       `json:"completed"`
		Failed          int                       `json:"failed"`
		TotalInput      int                       `json:"total_input_tokens"`
		TotalOutput     int                       `json:"total_output_tokens"`
		OutputLens      []int                     `json:"output_lens"`
		LengthsEnforced bool                      `json:"lengths_enforced"`
		Goodput         float64                   `json:"request_goodput"`
		Throughput      float64                   `json:"request_throughput"`
		P99TTFT         *float64                  `json:"p99_ttft_ms"`
		Tenants         map[string]map[string]any `json:"tenants"`
		Breakdown       map[string]any            `json:"breakdown"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Breakdown != nil { // Server-Timing is off by default
		t.Errorf("a breakdown from a server without --server-timing: %v", m.Breakdown)
	}
	if m.Completed != 8 || m.Failed != 0 || len(m.OutputLens) != 8 || m.P99TTFT == nil {
		t.Fatalf("JSON: %s", b)
	}
	for _, n := range m.OutputLens {
		if n < 1 || n > 6 || (m.LengthsEnforced && n != 6) {
			t.Errorf("output lengths %v (enforced %v)", m.OutputLens, m.LengthsEnforced)
			break
		}
	}
	if m.TotalInput < 8*12 || m.Goodput != m.Throughput { // every request meets a 60 s SLO
		t.Errorf("input tokens %d, goodput %g of %g", m.TotalInput, m.Goodput, m.Throughput)
	}
	if got := m.Tenants["alpha"]["completed"].(float64) + m.Tenants["beta"]["completed"].(float64); got != 8 {
		t.Errorf("tenants' requests sum to %g", got)
	}

	svg := filepath.Join(dir, "sweep.svg")
	out = mustRun(t, "bench", "serve", "--base-url", p.URL, "--model", platformtest.Model, "--num-prompts", "3",
		"--output-len", "3", "--input-len", "8", "--api-key", ta, "--sweep-concurrency", "1,2", "--plot", svg)
	if !strings.Contains(out, "concurrent requests") {
		t.Errorf("sweep table:\n%s", out)
	}
	if s, err := os.ReadFile(svg); err != nil || !strings.Contains(string(s), "<svg") || strings.Count(string(s), "<polyline") != 3 {
		t.Errorf("SVG: %v\n%.300s", err, s)
	}
	if _, err := run(t, "bench", "serve", "--base-url", p.URL, "--num-prompts", "2", "--api-key", "not-a-token"); err == nil {
		t.Error("a refused token did not fail the run")
	}
}

// fakeOpenAI is a minimal OpenAI-compatible streaming server: it answers
// max_tokens chunks of one character, refuses ignore_eos with 400 when
// refuse is set, and sends usage only when asked. bodies records what it got.
func fakeOpenAI(t *testing.T, refuse, usage bool) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		if _, ok := b["ignore_eos"]; ok && refuse {
			http.Error(w, `{"error":{"message":"ignore_eos is not supported"}}`, http.StatusBadRequest)
			return
		}
		n := int(b["max_tokens"].(float64))
		fl := w.(http.Flusher)
		for range n {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"x\"}]}\n\n")
			fl.Flush()
		}
		if usage {
			fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\n", len(b["prompt"].([]any))+1, n)
		}
		fmt.Fprintf(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies
}

// TestBenchServeEnforcesLengths: a server that accepts ignore_eos gets it
// with min_tokens = max_tokens on every request and the run says lengths
// were enforced; one that refuses them gets max_tokens only and the run says
// they were not. Counts come from usage when the server sends it, else from
// the chunks.
func TestBenchServeEnforcesLengths(t *testing.T) {
	for _, tc := range []struct {
		refuse, usage bool
	}{{false, true}, {true, false}} {
		srv, bodies := fakeOpenAI(t, tc.refuse, tc.usage)
		js := filepath.Join(t.TempDir(), "r.json")
		out := mustRun(t, "bench", "serve", "--base-url", srv.URL, "--num-prompts", "5", "--input-len", "7", "--output-len", "4",
			"--request-rate", "50", "--burstiness", "0.5", "--json", js)
		b, _ := os.ReadFile(js)
		var m struct {
			Enforced bool `json:"lengths_enforced"`
			In       int  `json:"total_input_tokens"`
			Out      int  `json:"total_output_tokens"`
			Done     int  `json:"completed"`
		}
		json.Unmarshal(b, &m)
		wantIn := 5 * 7
		if tc.usage {
			wantIn = 5 * 8 // the server's count (one more here) wins
		}
		if m.Enforced == tc.refuse || m.Done != 5 || m.Out != 20 || m.In != wantIn {
			t.Errorf("refuse %v usage %v: %s", tc.refuse, tc.usage, b)
		}
		if tc.refuse != strings.Contains(out, "NOT enforced") {
			t.Errorf("refuse %v: output\n%s", tc.refuse, out)
		}
		if tc.usage {
			svg := filepath.Join(t.TempDir(), "rates.svg")
			out := mustRun(t, "bench", "serve", "--base-url", srv.URL, "--num-prompts", "4", "--sweep-rates", "100,200,400", "--plot", svg, "--json", js)
			var runs []map[string]any
			b, _ := os.ReadFile(js)
			if err := json.Unmarshal(b, &runs); err != nil || len(runs) != 3 || runs[2]["request_rate"] != 400.0 || !strings.Contains(out, "request rate") {
				t.Errorf("rate sweep: %v\n%s", err, out)
			}
		}
		last := (*bodies)[len(*bodies)-1]
		if _, sent := last["ignore_eos"]; sent == tc.refuse || (!tc.refuse && last["min_tokens"] != last["max_tokens"]) {
			t.Errorf("refuse %v: last request %v", tc.refuse, last)
		}
	}
}

// TestBenchServeBreakdown runs bench serve against an in-process platform
// whose API sends the Server-Timing trailer (cloisond --server-timing): the
// result has a breakdown with every stage of a token-id prompt's path, each counted
// once per completed request, and a request's stages fit in its total. No
// timing is asserted.
func TestBenchServeBreakdown(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}, API: func(c *api.Config) { c.ServerTiming = true }})
	tok := p.Token(t, "alpha", tenancy.ScopeInfer)
	js := filepath.Join(t.TempDir(), "serve.json")
	out := mustRun(t, "bench", "serve", "--base-url", p.URL, "--model", platformtest.Model, "--num-prompts", "6",
		"--max-concurrency", "2", "--input-len", "16", "--output-len", "5", "--api-key", tok, "--json", js)
	if !strings.Contains(out, "Breakdown per request") {
		t.Errorf("no breakdown table:\n%s", out)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Completed int                  `json:"completed"`
		Breakdown map[string]stageDist `json:"breakdown"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// No admission span: it checks a text prompt before tokenizing it, and
	// these prompts are token ids.
	for _, k := range []string{"auth", "policy", "ledger.append", "queue", "prefill", "decode", "inference", "total", "engine", "platform"} {
		d, ok := m.Breakdown[k]
		if !ok || d.Count != m.Completed || d.P50 < 0 || d.P99 < d.P50 {
			t.Errorf("stage %s: %+v (completed %d)", k, d, m.Completed)
		}
	}
	if e, tot := m.Breakdown["engine"], m.Breakdown["total"]; e.Mean > tot.Mean {
		t.Errorf("engine %g ms of a total %g", e.Mean, tot.Mean)
	}
}

// TestParseServerTiming: durations by name, summed when a name repeats;
// entries without a duration skipped.
func TestParseServerTiming(t *testing.T) {
	got := parseServerTiming(`auth;dur=0.5, ledger.append;dur=1.25, ledger.append;dur="0.75", cache;desc=hit, total;dur=9`)
	want := map[string]float64{"auth": 0.5, "ledger.append": 2, "total": 9}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %g, want %g", k, got[k], v)
		}
	}
	if parseServerTiming("") != nil {
		t.Error("an empty header gave stages")
	}
}

// TestBenchServeEngineAlone runs the same workload on the engine alone
// (--engine, in process, two tenants): every request completes with its
// enforced length, the breakdown has the engine's stages and no platform
// share, and engine flags without --engine are refused rather than
// ignored. No timing is asserted.
func TestBenchServeEngineAlone(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	mustRun(t, "model", "synth", "--layers", "1", "--d-model", "64", "--heads", "2", "--kv-heads", "1", "--ffn", "128", "--vocab", "300", "--context", "256", model)
	js := filepath.Join(dir, "engine.json")
	out := mustRun(t, "bench", "serve", "--engine", model, "--threads", "1", "--kv-type", "f16", "--kv-pages", "64", "--max-batch-tokens", "64",
		"--max-running", "4", "--num-prompts", "7", "--max-concurrency", "3", "--input-len", "uniform:20:0.5", "--output-len", "5",
		"--tenant", "a=unused:2", "--tenant", "b=unused:1", "--seed", "5", "--json", js)
	if !strings.Contains(out, "engine alone (in process)") || !strings.Contains(out, "Breakdown per request") {
		t.Errorf("output:\n%s", out)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		BaseURL    string               `json:"base_url"`
		Completed  int                  `json:"completed"`
		Failed     int                  `json:"failed"`
		Enforced   bool                 `json:"lengths_enforced"`
		OutputLens []int                `json:"output_lens"`
		InputLens  []int                `json:"input_lens"`
		Breakdown  map[string]stageDist `json:"breakdown"`
		Tenants    map[string]any       `json:"tenants"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Completed != 7 || m.Failed != 0 || !m.Enforced || !strings.HasPrefix(m.BaseURL, "engine:") || len(m.Tenants) != 2 {
		t.Fatalf("JSON: %s", b)
	}
	// The same plan as against a server: the same prompt lengths.
	c := serveConfig{numPrompts: 7, rate: math.Inf(1), burstiness: 1, input: lengthDist{Kind: "uniform", Len: 20, Ratio: 0.5},
		output: lengthDist{Kind: "fixed", Len: 5}, idLo: 97, idHi: 123, seed: 5,
		tenants: []serveTenant{{Name: "a", Weight: 2}, {Name: "b", Weight: 1}}}
	var want []int
	for _, p := range c.plan() {
		want = append(want, len(p.prompt))
	}
	got := slices.Clone(m.InputLens)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("input lengths %v, the plan's %v", got, want)
	}
	for _, n := range m.OutputLens {
		if n != 5 {
			t.Errorf("output lengths %v, want 5 each", m.OutputLens)
			break
		}
	}
	for _, k := range []string{"queue", "prefill", "decode", "engine"} {
		if d := m.Breakdown[k]; d.Count != 7 {
			t.Errorf("stage %s: %+v", k, d)
		}
	}
	if _, ok := m.Breakdown["platform"]; ok {
		t.Errorf("the engine alone has a platform share: %v", m.Breakdown)
	}
	for _, args := range [][]string{{"--threads", "2"}, {"--kv-type", "f16"}, {"--max-running", "8"}} {
		_, err := run(t, append([]string{"bench", "serve", "--base-url", "http://127.0.0.1:1", "--num-prompts", "1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--engine") {
			t.Errorf("%v without --engine: %v", args, err)
		}
	}
	if _, err := run(t, "bench", "serve", "--engine", model, "--kv-type", "q8_0", "--num-prompts", "1"); err == nil {
		t.Error("a KV type the engine does not know was accepted")
	}
}

// TestPostReusingRetriesClosedKeepAlive: a server that drops a kept-alive
// connection when the next request arrives on it (as llama-server does with
// connections it closed while idle) costs no request: the request is sent
// again on a new connection. A connection refused on the first try is not
// retried.
func TestPostReusingRetriesClosedKeepAlive(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	dropped := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen[r.RemoteAddr]++
		drop := seen[r.RemoteAddr] == 2
		if drop {
			dropped++
		}
		mu.Unlock()
		if drop {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	for i := range 4 {
		resp, err := postReusing(context.Background(), client, srv.URL, "tok", []byte(`{}`))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("request %d: %q", i, b)
		}
	}
	if dropped == 0 {
		t.Fatal("the server never dropped a kept-alive connection: the test tested nothing")
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	if _, err := postReusing(context.Background(), client, "http://"+addr, "", nil); err == nil {
		t.Fatal("a refused connection answered")
	}
}
