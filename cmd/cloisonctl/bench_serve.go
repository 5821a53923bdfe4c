package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// serveTenant is one tenant of the workload: its bearer token, its share of
// the requests and its own length mix (nil: the command's).
type serveTenant struct {
	Name     string      `json:"name"`
	Token    string      `json:"token"`
	TokenEnv string      `json:"token_env"` // read the token from this variable
	Weight   float64     `json:"weight"`
	Input    *lengthDist `json:"input"`
	Output   *lengthDist `json:"output"`
}

// serveConfig is what `cloisonctl bench serve` runs.
type serveConfig struct {
	baseURL, model, apiKey string
	numPrompts             int
	rate, burstiness       float64
	fixed                  bool
	maxConcurrency         int
	input, output          lengthDist
	idLo, idHi             int
	seed                   uint64
	ignoreEOS              bool
	tenants                []serveTenant
	slo                    slo
	timeout                time.Duration
}

// serveTarget is what a run sends its requests to: a server over HTTP
// (httpTarget) or the engine alone, in process (engineTarget, --engine).
// send measures one request as reqResult says.
type serveTarget interface {
	send(ctx context.Context, c serveConfig, t serveTenant, p servePlan, enforce bool) reqResult
}

// httpTarget is a server's /v1/completions.
type httpTarget struct{ client *http.Client }

func (h httpTarget) send(ctx context.Context, c serveConfig, t serveTenant, p servePlan, enforce bool) reqResult {
	return sendStream(ctx, h.client, c, t, p, enforce)
}

// servePlan is one request to send.
type servePlan struct {
	tenant        int
	prompt        []int
	output        int
	arrivalOffset time.Duration
}

// plan draws the run's requests from the seed: tenant by weight, lengths
// from the tenant's mix, prompt token ids uniform in [idLo, idHi), and the
// arrival times.
func (c serveConfig) plan() []servePlan {
	r := rand.New(rand.NewPCG(c.seed, 0x7365727665))
	var total float64
	for _, t := range c.tenants {
		total += t.Weight
	}
	at := arrivals(c.numPrompts, c.rate, c.burstiness, c.fixed, c.seed)
	ps := make([]servePlan, c.numPrompts)
	for i := range ps {
		x, ti := r.Float64()*total, 0
		for ti < len(c.tenants)-1 && x >= c.tenants[ti].Weight {
			x -= c.tenants[ti].Weight
			ti++
		}
		in, out := c.input, c.output
		if d := c.tenants[ti].Input; d != nil {
			in = *d
		}
		if d := c.tenants[ti].Output; d != nil {
			out = *d
		}
		p := servePlan{tenant: ti, prompt: make([]int, in.draw(r)), output: out.draw(r), arrivalOffset: at[i]}
		for j := range p.prompt {
			p.prompt[j] = c.idLo + r.IntN(c.idHi-c.idLo)
		}
		ps[i] = p
	}
	return ps
}

func newBenchServeCmd() *cobra.Command {
	var c serveConfig
	var eo engineOptions
	var rate, ids, inDist, outDist, jsonFile, plotFile, tenantsFile string
	var tenantFlags, goodput []string
	var sweepRates []float64
	var sweepConc []int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Benchmark a running OpenAI-compatible server as vLLM's bench serve does (TTFT, TPOT, ITL, throughput, goodput)",
		Long: `serve sends --num-prompts streaming /v1/completions requests to --base-url
(any OpenAI-compatible server: cloisond, llama-server, vLLM) and measures each:
time to first token (TTFT), time per output token ((e2e − TTFT)/(output − 1)),
inter-token latency (every gap between chunks), end-to-end latency. Requests
arrive at --request-rate per second (gaps Gamma(--burstiness), 1 = Poisson, or
exactly 1/rate with --fixed-rate; inf = all at once), at most
--max-concurrency in flight. Prompts are token ids drawn from --prompt-ids, so
their length is exact; output lengths are enforced with ignore_eos and
min_tokens (--ignore-eos; a server that refuses them gets max_tokens only and
the report says lengths were not enforced). Token counts come from the
server's usage (stream_options.include_usage), else from the chunks.

Lengths: N or fixed:N, uniform:N:RATIO (N·(1±RATIO), vLLM's random data set),
or sharegpt[:MAX] — a log-normal with the means vLLM's paper reports for
ShareGPT (161 prompt, 338 output tokens), synthesized from --seed.

Tenants: --tenant NAME=TOKEN[:WEIGHT] (repeatable) or --tenants FILE, JSON
{"tenants":[{"name","token" or "token_env","weight","input":{"dist":"fixed","len":64},"output":{...}}]}.

It prints a table and per-tenant lines, --json FILE writes vLLM's result
fields (request_throughput, output_throughput, mean_ttft_ms, p99_ttft_ms, …).
--sweep-rates or --sweep-concurrency run once per value and --plot FILE
draws TTFT p50/p99 and TPOT p50 against the offered load as SVG.

A server that sends a Server-Timing trailer (cloisond --server-timing)
gets a breakdown of each request's time by stage (auth, admission, policy,
ledger.append, queue, prefill, decode, total; engine = queue + prefill +
decode, platform = total − engine) with mean, p50, p90 and p99.

--engine MODEL.gguf measures the engine alone instead, in this process: no
HTTP, auth, policy or ledger, the same requests, arrivals and metrics, the
engine built as cloisond builds it from the same flags (--threads,
--kv-type, --kv-pages, --max-batch-tokens, --max-running, …, cloisond's
defaults). Against a run on cloisond it gives the platform's efficiency
(make bench-overhead).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if err := eo.check(cmd.Flags()); err != nil {
				return err
			}
			if c.rate, err = parseRate(rate); err != nil {
				return err
			}
			if c.idLo, c.idHi, err = parseIDRange(ids); err != nil {
				return err
			}
			if c.input, err = parseDist(inDist, true); err != nil {
				return fmt.Errorf("--input-len: %w", err)
			}
			if c.output, err = parseDist(outDist, false); err != nil {
				return fmt.Errorf("--output-len: %w", err)
			}
			if c.slo, err = parseSLO(goodput); err != nil {
				return err
			}
			if c.tenants, err = parseTenants(tenantFlags, tenantsFile, c.apiKey); err != nil {
				return err
			}
			if c.numPrompts < 1 || c.burstiness <= 0 || c.maxConcurrency < 0 {
				return fmt.Errorf("want --num-prompts ≥ 1, --burstiness > 0, --max-concurrency ≥ 0")
			}
			if len(sweepRates) > 0 && len(sweepConc) > 0 {
				return fmt.Errorf("--sweep-rates and --sweep-concurrency: choose one")
			}
			out := cmd.OutOrStdout()
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			var target serveTarget = httpTarget{&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, DialContext: pacedDialer(16)}}}
			if eo.path != "" {
				et, err := eo.open(ctx, c.tenants)
				if err != nil {
					return err
				}
				defer et.close()
				target = et
				c.baseURL = "engine:" + eo.path
				fmt.Fprintf(out, "engine alone (in process): %s\n", eo)
			}
			enforced, err := preflight(ctx, target, c)
			if err != nil {
				return err
			}
			if c.ignoreEOS && !enforced {
				fmt.Fprintln(out, "note: the server refused ignore_eos/min_tokens; sending max_tokens only, output lengths are NOT enforced")
			}
			var runs []*serveMetrics
			var xs []float64
			xlabel := "request rate (req/s)"
			switch {
			case len(sweepRates) > 0:
				for _, r := range sweepRates {
					rc := c
					rc.rate = r
					runs = append(runs, runServe(ctx, target, rc, enforced))
					xs = append(xs, r)
				}
			case len(sweepConc) > 0:
				xlabel = "concurrent requests"
				for _, n := range sweepConc {
					rc := c
					rc.maxConcurrency = n
					runs = append(runs, runServe(ctx, target, rc, enforced))
					xs = append(xs, float64(n))
				}
			default:
				runs = append(runs, runServe(ctx, target, c, enforced))
			}
			for _, m := range runs {
				writeServeTable(out, m, c.slo)
			}
			if len(runs) > 1 {
				writeSweepTable(out, xlabel, xs, runs)
			}
			if jsonFile != "" {
				var v any = runs[0]
				if len(runs) > 1 {
					v = runs
				}
				b, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonFile, append(b, '\n'), 0o644); err != nil {
					return err
				}
			}
			if plotFile != "" {
				if len(runs) < 2 {
					return fmt.Errorf("--plot needs a sweep (--sweep-rates or --sweep-concurrency)")
				}
				title := fmt.Sprintf("%s: %d requests per point, input %s, output %s tokens", c.model, c.numPrompts, c.input, c.output)
				if err := os.WriteFile(plotFile, []byte(sweepSVG(title, xlabel, xs, runs)), 0o644); err != nil {
					return err
				}
			}
			for _, m := range runs {
				if m.Failed > 0 {
					return fmt.Errorf("%d of %d requests failed (first: %s)", m.Failed, m.NumPrompts, m.Errors[0])
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.baseURL, "base-url", "http://127.0.0.1:8080", "server base URL (POST BASE/v1/completions)")
	f.StringVar(&c.model, "model", "cloison-context-bag", "model id")
	f.StringVar(&c.apiKey, "api-key", os.Getenv("CLOISON_TOKEN"), "bearer token when no --tenant is given (env CLOISON_TOKEN)")
	f.IntVar(&c.numPrompts, "num-prompts", 100, "requests per run")
	f.StringVar(&rate, "request-rate", "inf", "requests per second (inf: all at once)")
	f.Float64Var(&c.burstiness, "burstiness", 1, "shape of the Gamma gaps between arrivals (1: Poisson; <1 burstier; >1 more regular)")
	f.BoolVar(&c.fixed, "fixed-rate", false, "every gap exactly 1/rate")
	f.IntVar(&c.maxConcurrency, "max-concurrency", 0, "at most this many requests in flight (0: no limit)")
	f.StringVar(&inDist, "input-len", "fixed:128", "prompt tokens: N, fixed:N, uniform:N:RATIO or sharegpt[:MAX]")
	f.StringVar(&outDist, "output-len", "fixed:64", "output tokens: N, fixed:N, uniform:N:RATIO or sharegpt[:MAX]")
	f.StringVar(&ids, "prompt-ids", "97:123", "prompt token ids drawn uniformly from LO:HI (HI excluded; default the lowercase letters of synthesized vocabularies)")
	f.Uint64Var(&c.seed, "seed", 0, "seed of lengths, tenants, prompts and arrivals")
	f.BoolVar(&c.ignoreEOS, "ignore-eos", true, "send ignore_eos and min_tokens so every output has its length")
	f.StringArrayVar(&tenantFlags, "tenant", nil, "NAME=TOKEN[:WEIGHT], repeatable (default one tenant with --api-key)")
	f.StringVar(&tenantsFile, "tenants", "", "JSON file of tenants with their own length mixes")
	f.StringSliceVar(&goodput, "goodput", nil, "SLOs for goodput: ttft:MS, tpot:MS, e2el:MS (space or comma separated)")
	f.StringVar(&jsonFile, "json", "", "write the result (a list for a sweep) as JSON to FILE")
	f.Float64SliceVar(&sweepRates, "sweep-rates", nil, "run once per request rate")
	f.IntSliceVar(&sweepConc, "sweep-concurrency", nil, "run once per --max-concurrency (at --request-rate)")
	f.StringVar(&plotFile, "plot", "", "write an SVG of TTFT p50/p99 and TPOT p50 against the swept load")
	f.DurationVar(&c.timeout, "timeout", 10*time.Minute, "per-request timeout")
	eo.flags(f)
	return cmd
}

func parseRate(s string) (float64, error) {
	if s == "inf" || s == "" {
		return math.Inf(1), nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r <= 0 {
		return 0, fmt.Errorf("--request-rate %q: want a positive number or inf", s)
	}
	return r, nil
}

func parseIDRange(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ":")
	lo, e1 := strconv.Atoi(a)
	hi, e2 := strconv.Atoi(b)
	if !ok || e1 != nil || e2 != nil || lo < 0 || hi <= lo {
		return 0, 0, fmt.Errorf("--prompt-ids %q: want LO:HI with 0 ≤ LO < HI", s)
	}
	return lo, hi, nil
}

// parseTenants reads --tenant flags and the --tenants file; with neither,
// one tenant "default" with apiKey.
func parseTenants(flags []string, file, apiKey string) ([]serveTenant, error) {
	var ts []serveTenant
	for _, f := range flags {
		name, rest, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--tenant %q: want NAME=TOKEN[:WEIGHT]", f)
		}
		t := serveTenant{Name: name, Token: rest, Weight: 1}
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			if w, err := strconv.ParseFloat(rest[i+1:], 64); err == nil {
				t.Token, t.Weight = rest[:i], w
			}
		}
		ts = append(ts, t)
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var spec struct {
			Tenants []serveTenant `json:"tenants"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			return nil, fmt.Errorf("--tenants %s: %w", file, err)
		}
		for _, t := range spec.Tenants {
			if t.TokenEnv != "" {
				t.Token = os.Getenv(t.TokenEnv)
			}
			if t.Weight == 0 {
				t.Weight = 1
			}
			for _, d := range []*lengthDist{t.Input, t.Output} {
				if d != nil {
					if err := d.check(); err != nil {
						return nil, fmt.Errorf("--tenants %s: tenant %s: %w", file, t.Name, err)
					}
				}
			}
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		ts = []serveTenant{{Name: "default", Token: apiKey, Weight: 1}}
	}
	seen := map[string]bool{}
	for _, t := range ts {
		if t.Weight <= 0 || math.IsInf(t.Weight, 0) || seen[t.Name] {
			return nil, fmt.Errorf("tenant %q: want a unique name and a weight > 0", t.Name)
		}
		seen[t.Name] = true
	}
	return ts, nil
}

// errRefused is a 400 from the server (the request's fields refused).
var errRefused = errors.New("refused")

// preflight sends one short request of the first tenant, with ignore_eos and
// min_tokens when asked; a server that refuses them (400) is asked again
// without, and the run goes on unenforced. It also warms the connection.
func preflight(ctx context.Context, target serveTarget, c serveConfig) (enforced bool, err error) {
	p := servePlan{prompt: []int{c.idLo, c.idLo}, output: 2}
	if c.ignoreEOS {
		r := target.send(ctx, c, c.tenants[0], p, true)
		if r.Err == "" {
			return true, nil
		}
		if !strings.Contains(r.Err, errRefused.Error()) {
			return false, fmt.Errorf("first request: %s", r.Err)
		}
	}
	if r := target.send(ctx, c, c.tenants[0], p, false); r.Err != "" {
		return false, fmt.Errorf("first request: %s", r.Err)
	}
	return false, nil
}

// runServe sends the planned requests at their arrival times, at most
// maxConcurrency in flight, and measures them.
func runServe(ctx context.Context, target serveTarget, c serveConfig, enforced bool) *serveMetrics {
	plan := c.plan()
	warm := c.maxConcurrency
	if warm == 0 {
		warm = min(len(plan), 256)
	}
	warmConnections(ctx, target, c, min(warm, len(plan)), enforced)
	results := make([]reqResult, len(plan))
	var sem chan struct{}
	if c.maxConcurrency > 0 {
		sem = make(chan struct{}, c.maxConcurrency)
	}
	var mu sync.Mutex
	inFlight, peak := 0, 0
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range plan {
		if d := time.Until(start.Add(p.arrivalOffset)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sem != nil {
				sem <- struct{}{}
				defer func() { <-sem }()
			}
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			r := target.send(ctx, c, c.tenants[p.tenant], p, enforced)
			r.Started = p.arrivalOffset
			mu.Lock()
			inFlight--
			mu.Unlock()
			results[i] = r
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	m := &serveMetrics{
		Date: time.Now().UTC().Format(time.RFC3339), BaseURL: c.baseURL, Model: c.model, NumPrompts: c.numPrompts,
		Burstiness: c.burstiness, FixedRate: c.fixed, MaxConcurrency: c.maxConcurrency, Seed: c.seed,
		LengthsEnforced: enforced, MaxConcurrentSeen: peak,
	}
	m.RequestRate = "inf"
	if !math.IsInf(c.rate, 1) {
		m.RequestRate = c.rate
	}
	m.compute(results, elapsed, c.slo)
	return m
}

// postReusing posts body to url. A kept-alive connection that the server
// closed while it sat idle (llama-server closes them) fails the request
// before any answer (closedIdle): such a request is sent again, on a new
// connection, up to twice; its time counts from the first try.
func postReusing(ctx context.Context, client *http.Client, url, token string, body []byte) (*http.Response, error) {
	for try := 0; ; try++ {
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "POST", url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil && reused && try < 2 && ctx.Err() == nil && closedIdle(err) {
			continue
		}
		return resp, err
	}
}

// closedIdle reports whether err is how net/http fails a request sent on a
// kept-alive connection that the server had closed: EOF, a reset, or its
// unexported "server closed idle connection".
func closedIdle(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || strings.Contains(err.Error(), "server closed idle connection")
}

// sendStream sends one streaming completion and measures it. A 400 is
// reported as errRefused with the server's message.
func sendStream(ctx context.Context, client *http.Client, c serveConfig, t serveTenant, p servePlan, enforce bool) reqResult {
	r := reqResult{Tenant: t.Name, Input: len(p.prompt), Wanted: p.output}
	body := map[string]any{
		"model": c.model, "prompt": p.prompt, "max_tokens": p.output, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "temperature": 0,
	}
	if enforce {
		body["ignore_eos"] = true
		body["min_tokens"] = p.output
	}
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	resp, err := postReusing(ctx, client, strings.TrimSuffix(c.baseURL, "/")+"/v1/completions", t.Token, b)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.Err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		if resp.StatusCode == http.StatusBadRequest {
			r.Err = errRefused.Error() + ": " + r.Err
		}
		return r
	}
	var last time.Time
	chunks, usageOut, usageIn := 0, -1, -1
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		line = strings.TrimSpace(line)
		if line == "[DONE]" {
			break
		}
		now := time.Now()
		var ch struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			r.Err = "bad chunk: " + err.Error()
			return r
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			r.Err = "stream error: " + string(ch.Error)
			return r
		}
		if ch.Usage != nil {
			usageIn, usageOut = ch.Usage.Prompt, ch.Usage.Completion
		}
		if len(ch.Choices) == 0 || ch.Choices[0].Text == "" {
			continue
		}
		if chunks == 0 {
			r.TTFT = now.Sub(start)
		} else {
			r.ITL = append(r.ITL, now.Sub(last))
		}
		last = now
		chunks++
	}
	if err := sc.Err(); err != nil {
		r.Err = err.Error()
		return r
	}
	r.E2E = time.Since(start)
	// The trailers come after the body's end: read past [DONE].
	if _, err := io.Copy(io.Discard, resp.Body); err == nil {
		r.Stages = parseServerTiming(resp.Trailer.Get("Server-Timing"))
	}
	r.Output = chunks
	if usageOut >= 0 {
		r.Output = usageOut
	}
	if usageIn > 0 {
		r.Input = usageIn
	}
	if chunks == 0 {
		r.Err = "no output"
	}
	return r
}

// writeServeTable prints one run as vLLM's bench serve does, then a line per
// tenant.
func writeServeTable(w io.Writer, m *serveMetrics, s slo) {
	line := func(k string, v any) { fmt.Fprintf(w, "%-40s%v\n", k, v) }
	f2 := func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	fmt.Fprintf(w, "%s\n", center(" Serving Benchmark Result ", 50, '='))
	line("Request rate (req/s):", m.RequestRate)
	if m.MaxConcurrency > 0 {
		line("Maximum request concurrency:", m.MaxConcurrency)
	}
	line("Successful requests:", m.Completed)
	line("Failed requests:", m.Failed)
	line("Output lengths enforced:", m.LengthsEnforced)
	line("Benchmark duration (s):", f2(m.Duration))
	line("Total input tokens:", m.TotalInput)
	line("Total generated tokens:", m.TotalOutput)
	line("Request throughput (req/s):", f2(m.RequestThroughput))
	if m.RequestGoodput != nil {
		line("Request goodput (req/s):", f2(*m.RequestGoodput))
	}
	line("Output token throughput (tok/s):", f2(m.OutputThroughput))
	line("Total token throughput (tok/s):", f2(m.TotalThroughput))
	line("Peak concurrent requests:", m.MaxConcurrentSeen)
	for _, l := range []struct {
		title, short string
		d            dist
	}{{"Time to First Token", "TTFT", m.TTFT}, {"Time per Output Token (excl. 1st token)", "TPOT", m.TPOT}, {"Inter-token Latency", "ITL", m.ITL}, {"End-to-end Latency", "E2EL", m.E2E}} {
		fmt.Fprintf(w, "%s\n", center(l.title, 50, '-'))
		line("Mean "+l.short+" (ms):", f2(l.d.Mean))
		line("Median "+l.short+" (ms):", f2(l.d.Median))
		line("P90 "+l.short+" (ms):", f2(l.d.P90))
		line("P99 "+l.short+" (ms):", f2(l.d.P99))
	}
	if len(m.Breakdown) > 0 {
		fmt.Fprintf(w, "%s\n", center("Breakdown per request (ms)", 50, '-'))
		fmt.Fprintf(w, "%-16s %8s %8s %8s %8s\n", "stage", "mean", "p50", "p90", "p99")
		for _, k := range breakdownOrder {
			if d, ok := m.Breakdown[k]; ok {
				fmt.Fprintf(w, "%-16s %8.3f %8.3f %8.3f %8.3f\n", k, d.Mean, d.P50, d.P90, d.P99)
			}
		}
	}
	if len(m.Tenants) > 1 {
		fmt.Fprintf(w, "%s\n", center("Per tenant", 50, '-'))
		names := make([]string, 0, len(m.Tenants))
		for n := range m.Tenants {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			t := m.Tenants[n]
			g := ""
			if t.Good != nil {
				g = fmt.Sprintf(", good %d", *t.Good)
			}
			fmt.Fprintf(w, "%-12s %d ok, %d failed, %.2f tok/s, TTFT p50 %.2f p99 %.2f ms, TPOT p50 %.2f ms%s\n",
				n, t.Completed, t.Failed, t.OutputThroughput, t.MedianTTFT, t.P99TTFT, t.MedianTPOT, g)
		}
	}
	fmt.Fprintf(w, "%s\n", strings.Repeat("=", 50))
}

func center(s string, width int, fill byte) string {
	n := width - len([]rune(s))
	if n <= 0 {
		return s
	}
	return strings.Repeat(string(fill), n/2) + s + strings.Repeat(string(fill), n-n/2)
}

// writeSweepTable prints one line per swept load.
func writeSweepTable(w io.Writer, xlabel string, xs []float64, runs []*serveMetrics) {
	fmt.Fprintf(w, "%-22s %8s %10s %10s %10s %10s %10s %8s\n", xlabel, "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p99", "failed")
	for i, m := range runs {
		fmt.Fprintf(w, "%-22g %8.2f %10.1f %10.1f %10.1f %10.2f %10.2f %8d\n", xs[i], m.RequestThroughput, m.OutputThroughput, m.TTFT.P50, m.TTFT.P99, m.TPOT.P50, m.ITL.P99, m.Failed)
	}
}

// pacedDialer keeps at most n new connections waiting for their first
// answer byte. cloisond closes, at accept, connections from one source
// beyond 32 it has not yet read a byte from (api.Transport's
// MaxSilentPerSource): on a busy server a burst of new connections at a high
// concurrency would lose some.
func pacedDialer(n int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	sem := make(chan struct{}, n)
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			<-sem
			return nil, err
		}
		return &firstReadConn{Conn: c, release: func() { <-sem }}, nil
	}
}

// firstReadConn calls release once: after its first read of data, or at
// Close.
type firstReadConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *firstReadConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 || err != nil {
		c.once.Do(c.release)
	}
	return n, err
}

func (c *firstReadConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// warmConnections opens up to n keep-alive connections (n requests of one
// token at once, dialed at the paced rate) so the measured run does not
// time the dialing.
// The engine alone gets the same requests (they warm it as they warm the
// server).
func warmConnections(ctx context.Context, target serveTarget, c serveConfig, n int, enforced bool) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target.send(ctx, c, c.tenants[i%len(c.tenants)], servePlan{prompt: []int{c.idLo}, output: 1}, enforced)
		}()
	}
	wg.Wait()
}
