// Package probe is the operator's pre-deployment and canary check that the
// 2026 incident reports call for, run against a live deployment over its
// OpenAI-compatible HTTP API (cloisonctl probe):
//
//  1. Read the capacity attestation and fail on a misaligned deployment
//     (attestation not passed, a prefill node whose pool or served context
//     is below what is served, served context above the model's, pool
//     smaller than k × served context).
//  2. Plant unique canaries as tenant A (requests that complete, so their KV
//     passes through the pool and is freed).
//  3. As tenant B, send prompts at the edges — served context − 1, exactly,
//     + 1, the pool size ± 1 — and far over, abort streams mid-way, and flood
//     concurrently, while A keeps planting.
//  4. Assert that no canary ever appears in B's outputs, that every request
//     over the served context is refused with a non-200 error, and that no
//     answer within it fails.
//
// Prompts of exact lengths are sent as token ids. B's prompts use a small
// alphabet of token ids (by default the bytes 'a'–'h' of a byte-level
// vocabulary) and A's canaries never use it; with Bag set (the context-bag
// leak-oracle model) any output token outside B's alphabet is a finding too.
package probe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says what to probe.
type Config struct {
	URL            string // http://host:port; the probe talks to nothing else
	TokenA, TokenB string // bearer tokens of two tenants (A plants, B attacks)
	Model          string
	Canaries       int  // canary requests planted by A (default 8)
	Flood          int  // concurrent B requests in the flood (default 16)
	Aborts         int  // B streams aborted after their first chunk (default 4)
	Bag            bool // the model is the context-bag oracle: B's outputs must stay in B's alphabet
	Client         *http.Client
	Log            func(format string, args ...any)
}

// Finding is one problem the probe found.
type Finding struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// Report is what a probe found.
type Report struct {
	Attestation map[string]any `json:"attestation"`
	Requests    int            `json:"requests"`
	Refused     int            `json:"refused"`
	Served      int            `json:"served"`
	Aborted     int            `json:"aborted"`
	Canaries    []string       `json:"canaries"`
	Findings    []Finding      `json:"findings"`
}

// OK reports whether the probe found nothing.
func (r *Report) OK() bool { return len(r.Findings) == 0 }

type prober struct {
	cfg   Config
	limit int // B's advertised context: requests over it must be refused
	mu    sync.Mutex
	rep   Report
}

// tenantContext reads the context the API advertises to tenant B.
func (p *prober) tenantContext(ctx context.Context) (int, error) {
	status, body, err := p.do(ctx, "GET", "/v1/models", p.cfg.TokenB, nil)
	if err != nil {
		return 0, err
	}
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			ContextLength int    `json:"context_length"`
		} `json:"data"`
	}
	if status != 200 || json.Unmarshal(body, &list) != nil {
		return 0, fmt.Errorf("probe: GET /v1/models: HTTP %d: %s", status, body)
	}
	for _, m := range list.Data {
		if m.ID == p.cfg.Model {
			p.logf("tenant B may use %d tokens of context", m.ContextLength)
			return m.ContextLength, nil
		}
	}
	return 0, fmt.Errorf("probe: model %q is not offered to tenant B", p.cfg.Model)
}

func (p *prober) find(check, format string, args ...any) {
	p.mu.Lock()
	p.rep.Findings = append(p.rep.Findings, Finding{Check: check, Detail: fmt.Sprintf(format, args...)})
	p.mu.Unlock()
}

func (p *prober) logf(format string, args ...any) {
	if p.cfg.Log != nil {
		p.cfg.Log(format, args...)
	}
}

// alphabetB is the token ids B's prompts use: the bytes 'a'–'h'.
var alphabetB = []int{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}

func inAlphabetB(s string) bool {
	for _, r := range s {
		if r < 'a' || r > 'h' {
			return false
		}
	}
	return true
}

// Run probes a deployment. It returns an error only when the probe itself
// cannot run (the deployment unreachable, bad tokens); problems found in the
// deployment are Findings.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Canaries == 0 {
		cfg.Canaries = 8
	}
	if cfg.Flood == 0 {
		cfg.Flood = 16
	}
	if cfg.Aborts == 0 {
		cfg.Aborts = 4
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 2 * time.Minute}
	}
	p := &prober{cfg: cfg}
	served, pool, err := p.attest(ctx)
	if err != nil {
		return nil, err
	}
	// B's own limit: the context the API advertises to B (its quota or KV
	// partition may be smaller than the deployment's served context).
	if c, err := p.tenantContext(ctx); err != nil {
		return nil, err
	} else if c > served {
		p.find("attestation", "tenant B is advertised %d tokens, more than the served context %d", c, served)
	} else {
		served = c
		p.limit = c
	}
	// Canaries first, so that their pages are freed when B arrives, then
	// more during B's attack.
	p.plant(ctx, cfg.Canaries)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.plant(ctx, cfg.Canaries) }()
	// Edge lengths, each with max_tokens 1 so the total is exactly the length + 1.
	for _, n := range []int{served - 2, served - 1, served, served + 1, pool - 1, pool, pool + 1, 2 * pool} {
		if n < 1 {
			continue
		}
		p.attack(ctx, n, 1, false)
	}
	// Aborts mid-stream.
	for range cfg.Aborts {
		p.attack(ctx, max(1, served/2), 16, true)
	}
	// Flood: mixed lengths, concurrently.
	for i := range cfg.Flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lengths := []int{8, served / 4, served - 9, served + 1, pool + 1}
			p.attack(ctx, max(1, lengths[i%len(lengths)]), 8, false)
		}()
	}
	wg.Wait()
	return &p.rep, nil
}

// attest reads and checks the capacity attestation.
func (p *prober) attest(ctx context.Context) (served, pool int, err error) {
	var att map[string]any
	status, body, err := p.do(ctx, "GET", "/v1/attestation", p.cfg.TokenB, nil)
	if err != nil {
		return 0, 0, err
	}
	if status != 200 {
		return 0, 0, fmt.Errorf("probe: GET /v1/attestation: HTTP %d: %s", status, body)
	}
	if err := json.Unmarshal(body, &att); err != nil {
		return 0, 0, fmt.Errorf("probe: attestation: %w", err)
	}
	p.rep.Attestation = att
	num := func(k string) int { f, _ := att[k].(float64); return int(f) }
	served, pool = num("served_context"), num("pool_tokens")
	model, k := num("model_context"), max(1, num("k"))
	if ok, _ := att["ok"].(bool); !ok {
		p.find("attestation", "the deployment reports a failed capacity attestation: %v", att["reason"])
	}
	if served < 1 || served > model {
		p.find("attestation", "served context %d outside [1, model context %d]", served, model)
	}
	if pool < k*served {
		p.find("attestation", "misaligned: the pool holds %d tokens, %d × served context %d = %d needed", pool, k, served, k*served)
	}
	// A split deployment: every prefill node must hold what is served (the
	// 2026 prefill pool held 65% of it), and the edge lengths probe the
	// smallest pool on the path.
	peers, _ := att["prefill"].([]any)
	for _, x := range peers {
		peer, _ := x.(map[string]any)
		pa, _ := peer["attestation"].(map[string]any)
		ptokens, _ := pa["pool_tokens"].(float64)
		pserved, _ := pa["served_context"].(float64)
		if ok, _ := peer["ok"].(bool); !ok {
			p.find("attestation", "prefill node %v refused: %v", peer["addr"], peer["reason"])
		}
		if int(ptokens) < served || int(pserved) < served {
			p.find("attestation", "misaligned: prefill node %v holds %d tokens and serves %d, the deployment serves %d", peer["addr"], int(ptokens), int(pserved), served)
		}
		if ptokens > 0 {
			pool = min(pool, int(ptokens))
		}
	}
	p.logf("attestation: model context %d, served %d, pool %d tokens, k %d, %d prefill nodes", model, served, pool, k, len(peers))
	if served < 1 {
		return 0, 0, fmt.Errorf("probe: the deployment attests no served context")
	}
	return served, pool, nil
}

// plant sends n canary requests as A and waits for them.
func (p *prober) plant(ctx context.Context, n int) {
	for range n {
		var b [6]byte
		_, _ = rand.Read(b[:])
		canary := "zqxj" + hex.EncodeToString(b[:]) + "wvyk" // never in B's alphabet
		p.mu.Lock()
		p.rep.Canaries = append(p.rep.Canaries, canary)
		p.mu.Unlock()
		prompt := strings.Repeat(canary+" ", 6)
		body, _ := json.Marshal(map[string]any{"model": p.cfg.Model, "prompt": prompt, "max_tokens": 8, "temperature": 0})
		status, resp, err := p.do(ctx, "POST", "/v1/completions", p.cfg.TokenA, body)
		p.count(status, err)
		if err == nil && status != 200 {
			p.logf("canary request refused: HTTP %d %s", status, resp)
		}
	}
}

func (p *prober) count(status int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rep.Requests++
	switch {
	case err != nil:
	case status == 200:
		p.rep.Served++
	default:
		p.rep.Refused++
	}
}

// maxRetries bounds how often send retries one request that was refused
// for now (429 with Retry-After: the tenant's concurrency, KV pages in
// flight or rate); the flood runs more requests at once than a tenant's
// quota may admit.
const maxRetries = 40

// send posts body as tenant B, retrying as a well-behaved client does while
// the answer is 429 with a Retry-After (at most maxRetries times, each wait
// capped at two seconds). A 429 without Retry-After (it can never fit) and
// every other answer are returned as they are.
func (p *prober) send(ctx context.Context, body []byte) (*http.Response, error) {
	for try := 0; ; try++ {
		req, _ := http.NewRequestWithContext(ctx, "POST", p.cfg.URL+"/v1/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.cfg.TokenB)
		req.Header.Set("Content-Type", "application/json")
		resp, err := p.cfg.Client.Do(req)
		if err != nil {
			return nil, err
		}
		secs, perr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || perr != nil || try == maxRetries {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(time.Duration(secs)*time.Second, 2*time.Second)):
		}
	}
}

// attack sends one B request of n prompt tokens and checks its answer.
func (p *prober) attack(ctx context.Context, n, maxTokens int, abort bool) {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = alphabetB[i%len(alphabetB)]
	}
	body, _ := json.Marshal(map[string]any{"model": p.cfg.Model, "prompt": ids, "max_tokens": maxTokens, "temperature": 0, "stream": true})
	served := float64(p.limit)
	over := n+maxTokens > p.limit
	resp, err := p.send(ctx, body)
	if err != nil {
		p.count(0, err)
		p.find("transport", "request of %d tokens: %v", n, err)
		return
	}
	defer resp.Body.Close()
	p.count(resp.StatusCode, nil)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		if !over {
			p.find("refused-within-context", "a %d-token prompt with max_tokens %d (within the served context) got HTTP %d: %s", n, maxTokens, resp.StatusCode, b)
		}
		return
	}
	if over {
		p.find("over-long-served", "a %d-token prompt with max_tokens %d (over the served context %d) got HTTP 200", n, maxTokens, int(served))
	}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	finished := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			finished = true
			break
		}
		var ev struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			p.find("protocol", "unparseable event %q", line)
			return
		}
		if ev.Error != nil {
			// A stream that ends in an error is fail-closed behaviour, but
			// within the context it is a failure worth reporting.
			p.find("stream-error", "a %d-token prompt ended with error %s", n, ev.Error.Code)
			return
		}
		for _, c := range ev.Choices {
			text.WriteString(c.Text)
		}
		if abort {
			p.mu.Lock()
			p.rep.Aborted++
			p.mu.Unlock()
			return // closing the body aborts the request
		}
	}
	if !finished {
		p.find("protocol", "a %d-token stream ended without [DONE]", n)
	}
	out := text.String()
	p.mu.Lock()
	canaries := append([]string(nil), p.rep.Canaries...)
	p.mu.Unlock()
	for _, c := range canaries {
		if strings.Contains(out, c) || strings.Contains(out, c[:8]) {
			p.find("canary-leak", "tenant B's output contains tenant A's canary %s", c)
		}
	}
	if p.cfg.Bag && !inAlphabetB(out) {
		p.find("oracle-leak", "the context-bag model emitted %q for a prompt of only a–h: it read KV that was not this request's", out)
	}
}

func (p *prober) do(ctx context.Context, method, path, token string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
