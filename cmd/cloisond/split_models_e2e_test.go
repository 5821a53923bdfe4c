package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/engine/transfer/prefillrpc"
	"github.com/cloison/cloison/internal/faultproxy"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/tenancy"
)

// writeSplitBag writes a context-bag model of ctxLen tokens to dir/name and
// returns its path and digest (hex SHA-256).
func writeSplitBag(t *testing.T, dir, name string, ctxLen int) (string, string) {
	t.Helper()
	w, err := synth.ContextBag(synth.BagConfig{Context: ctxLen, GapTokens: ctxLen})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return path, hex.EncodeToString(sum[:])
}

// modelCompletion is a completion of model's, its status and text or error
// code.
func modelCompletion(t *testing.T, n *daemon, token, model, prompt string) (int, string, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 6, "temperature": 0})
	r := n.do("POST", "/v1/completions", token, body)
	if r.status != 200 {
		return r.status, "", r.code()
	}
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Choices) != 1 || out.Model != model {
		t.Fatalf("completion of %s: %s (%v)", model, r.body, err)
	}
	return r.status, out.Choices[0].Text, ""
}

// TestE2ESplitSeveralModels: a prefill node and a decode node, separate
// processes over mutual TLS, serve two models. Requests to each, over HTTP
// and gRPC, are prefilled with their own model on the prefill node and
// decoded with it (each transfer bound to its model's digest and routed to
// its pool); each request.completed names its model's digest. A decode
// node whose prefill node lacks one of its models refuses to start, with
// the attestation naming it, as it refuses a model whose served context
// the prefill pool cannot hold (the 2026 incident, per model); a run-time load of a model the prefill node
// does not serve is refused at attestation and ledgered (capacity
// attestation not ready, the prefill node's verdict recorded); an unloaded
// model is no longer served and its transfers are refused. A transfer
// whose manifest names a model the decode node does not serve (a forged
// digest, sent by a holder of the cluster key) is refused as a model
// mismatch and ledgered, without touching a reservation.
func TestE2ESplitSeveralModels(t *testing.T) {
	c := newCluster(t, "prefill-1", "prefill-2", "decode")
	dir := t.TempDir()
	alpha, alphaDigest := writeSplitBag(t, dir, "alpha.gguf", 4096)
	beta, betaDigest := writeSplitBag(t, dir, "beta.gguf", 2048)
	writeSplitBag(t, dir, "gamma.gguf", 1024)
	db := pgtest.New(t)
	p := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey, "--model", alpha+",id=alpha", "--model", beta+",id=beta")
	transferAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startNode(t, db.AdminURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey,
		"--transfer-addr", transferAddr, "--prefill-peers", p.grpcAddr, "--model", alpha+",id=alpha", "--model", beta+",id=beta", "--model-dir", dir)...)
	createTenant(t, db.AdminURL, "acme", func(tn *tenancy.Tenant) { tn.AllowedModels = []string{"alpha", "beta", "gamma"} })
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	admin := d.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)

	// Both models, over HTTP and gRPC: the same text each way.
	g := d.grpc()
	for _, model := range []string{"alpha", "beta"} {
		for _, prompt := range rolePrompts[:4] {
			st, text, code := modelCompletion(t, d, tok, model, prompt)
			if st != 200 {
				t.Fatalf("%s, %q over HTTP: %d %s\ndecode:\n%s\nprefill:\n%s", model, prompt, st, code, d.logs, p.logs)
			}
			req := textPrompt(prompt, 6)
			req.Model = model
			if out := generate(g, tok, req); out.err != nil || out.text != text {
				t.Fatalf("%s, %q over gRPC: %q %v, over HTTP %q", model, prompt, out.text, out.err, text)
			}
		}
		// Each prompt was prefilled remotely with this model (a repeated
		// one may be served from the decode node's prefix cache); a
		// prefill is logged once its call returns, after the decode node
		// committed the transfer.
		testwait.Eventually(t, 30*time.Second, func() bool {
			return strings.Count(p.logs.String(), `"msg":"prefill","model":"`+model+`"`) >= 4
		}, "the prefill node to prefill 4 prompts with %s", model)
	}
	if strings.Contains(d.logs.String(), "transfer refused") {
		t.Fatalf("a transfer was refused:\n%s", d.logs)
	}
	// The prefill node counts each model's prefills under its name.
	testwait.Eventually(t, 30*time.Second, func() bool {
		st, body := p.scrape(t, "")
		for _, model := range []string{"alpha", "beta"} {
			m := regexp.MustCompile(`(?m)^cloison_prefill_requests_total\{code="ok",model_name="` + model + `"\} (\d+)$`).FindStringSubmatch(body)
			if st != 200 || m == nil || m[1] == "0" {
				return false
			}
		}
		return true
	}, "the prefill node's metrics to count alpha's and beta's prefills")
	// Each request.completed names its model's digest; the attestation of
	// each model records the prefill node's verdict.
	digests := map[string]int{}
	attested := map[string]bool{}
	for _, row := range d.ledgerRows(admin) {
		data := payloadData(row)
		switch row["kind"] {
		case "request.completed":
			dg, _ := data["model_digest"].(string)
			digests[dg]++
		case "capacity.attestation":
			pre, _ := data["prefill"].([]any)
			if len(pre) == 1 && data["ready"] == true {
				pc, _ := pre[0].(map[string]any)
				attested[fmt.Sprint(data["model"])] = pc["node"] == p.grpcAddr && pc["ready"] == true
			}
		}
	}
	if digests[alphaDigest] != 8 || digests[betaDigest] != 8 {
		t.Fatalf("request.completed digests %v, want 8 of alpha's %.8s and 8 of beta's %.8s", digests, alphaDigest, betaDigest)
	}
	if !attested["alpha"] || !attested["beta"] {
		t.Fatalf("capacity.attestation with the prefill node ready: %v, want alpha and beta", attested)
	}

	// A run-time load of a model the prefill node does not serve: refused
	// at attestation, ledgered as not ready with the prefill node's
	// verdict.
	r := d.do("POST", "/admin/v1/models", admin, []byte(`{"path":"gamma.gguf"}`))
	if r.status != 503 || r.code() != "unavailable" {
		t.Fatalf("load of a model the prefill node lacks: %d %s", r.status, r.body)
	}
	var refused bool
	for _, row := range d.ledgerRows(admin) {
		data := payloadData(row)
		if row["kind"] == "capacity.attestation" && data["model"] == "gamma" {
			pre, _ := data["prefill"].([]any)
			if len(pre) == 1 {
				pc, _ := pre[0].(map[string]any)
				refused = data["ready"] == false && pc["ready"] == false
			}
		}
	}
	if !refused {
		t.Fatalf("no capacity.attestation of gamma, not ready, with the prefill node refused:\n%s", d.logs)
	}
	if st, _, code := modelCompletion(t, d, tok, "gamma", "hello"); st != 404 || code != "model_not_found" {
		t.Fatalf("a request for the refused model: %d %s", st, code)
	}
	// A file served already, under another id: refused before anything is
	// ledgered (transfers are routed by the file's digest).
	if r := d.do("POST", "/admin/v1/models", admin, []byte(`{"path":"alpha.gguf","id":"alpha2"}`)); r.status != 400 || r.code() != "invalid_request_error" {
		t.Fatalf("alpha's file again as alpha2: %d %s", r.status, r.body)
	}
	for _, row := range d.ledgerRows(admin) {
		if m := payloadData(row)["model"]; (row["kind"] == "model.loaded" || row["kind"] == "capacity.attestation") && (m == "alpha2" || m == "gamma" && row["kind"] == "model.loaded") {
			t.Fatalf("ledgered for a refused load: %v", row)
		}
	}

	// A forged transfer: authenticated under the cluster key, of a model
	// the decode node does not serve. Refused as a model mismatch,
	// ledgered (tenant-less: no reservation was touched).
	forged := alphaDigest[:len(alphaDigest)-2] + "00"
	if err := pushForged(t, c, transferAddr, forged); !errors.Is(err, transfer.ErrVerification) {
		t.Fatalf("a forged model's transfer: got %v, want a verification failure", err)
	}
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, row := range d.ledgerRows(admin) {
			if row["kind"] == "transfer.verification_failed" && payloadData(row)["check"] == string(transfer.ReasonModel) {
				return true
			}
		}
		return false
	}, "a transfer.verification_failed of check model")

	// Unloading beta stops routing it: requests are not found, its
	// transfers refused as a model the node does not serve.
	if r := d.do("DELETE", "/admin/v1/models/beta", admin, nil); r.status != 200 {
		t.Fatalf("unload beta: %d %s", r.status, r.body)
	}
	if st, _, code := modelCompletion(t, d, tok, "beta", "hello"); st != 404 || code != "model_not_found" {
		t.Fatalf("a request for the unloaded model: %d %s", st, code)
	}
	if err := pushForged(t, c, transferAddr, betaDigest); !errors.Is(err, transfer.ErrVerification) {
		t.Fatalf("a transfer of the unloaded model: got %v, want a verification failure", err)
	}
	// Loaded again: the prefill node serves it, so it attests and serves.
	if r := d.do("POST", "/admin/v1/models", admin, []byte(`{"path":"beta.gguf","id":"beta"}`)); r.status != 201 {
		t.Fatalf("load beta again: %d %s", r.status, r.body)
	}
	if st, _, code := modelCompletion(t, d, tok, "beta", rolePrompts[0]); st != 200 {
		t.Fatalf("beta after its reload: %d %s\n%s", st, code, d.logs)
	}
	if st, _, code := modelCompletion(t, d, tok, "alpha", rolePrompts[1]); st != 200 {
		t.Fatalf("alpha after beta's reload: %d %s", st, code)
	}

	// A decode node whose prefill node serves alpha only: refused at
	// attestation, naming beta.
	p2 := c.prefillNode(t, db.AdminURL, "prefill-2", c.clusterKey, "--model", alpha)
	logs := startNodeExpectExit(t, pgtest.New(t).AdminURL, t.TempDir(), c.flags("decode", "decode", c.clusterKey,
		"--transfer-addr", "127.0.0.1:0", "--prefill-peers", p2.grpcAddr, "--model", alpha+",id=alpha", "--model", beta+",id=beta")...)
	if !strings.Contains(logs, "capacity attestation failed") || !strings.Contains(logs, "does not serve model "+betaDigest[:16]) {
		t.Fatalf("the decode node did not refuse beta, which its prefill node lacks:\n%s", logs)
	}
	// The 2026 check, per model: a prefill pool of 2,048 tokens holds
	// beta's whole context but not alpha's 4,096 (the prefill node serves
	// alpha lowered to 2,048): the decode node refuses alpha.
	p3 := c.prefillNode(t, db.AdminURL, "prefill-2", c.clusterKey, "--model", beta, "--model", alpha, "--kv-pages", "128", "--served-context", "2048")
	logs = startNodeExpectExit(t, pgtest.New(t).AdminURL, t.TempDir(), c.flags("decode", "decode", c.clusterKey,
		"--transfer-addr", "127.0.0.1:0", "--prefill-peers", p3.grpcAddr, "--model", beta+",id=beta", "--model", alpha+",id=alpha")...)
	if !strings.Contains(logs, "capacity attestation failed") || !strings.Contains(logs, "model alpha") ||
		!strings.Contains(logs, "prefill pool holds 2048 tokens, the served context is 4096") {
		t.Fatalf("the decode node did not refuse alpha, whose context its prefill node's pool cannot hold:\n%s", logs)
	}
	// A prefill node given one file twice refuses to start (models are
	// named by digest between nodes).
	logs = startNodeExpectExit(t, db.AdminURL, t.TempDir(), c.flags("prefill-2", "prefill", c.clusterKey, "--prefill-addr", "127.0.0.1:0",
		"--model", alpha, "--model", alpha+",id=again")...)
	if !strings.Contains(logs, "a model file served twice") {
		t.Fatalf("the prefill node served one file twice:\n%s", logs)
	}
}

// pushForged sends, as a prefill node holding the cluster key, a transfer
// whose manifest names the model of digest (hex) to the decode node's
// transfer server at addr, and returns how it ended.
func pushForged(t *testing.T, c *cluster, addr, digest string) error {
	t.Helper()
	keys, _, err := (&roleConfig{clusterKey: c.clusterKey}).keyRing(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	var d transfer.Digest
	if b, err := hex.DecodeString(digest); err != nil || copy(d[:], b) != len(d) {
		t.Fatalf("digest %q: %v", digest, err)
	}
	ac := kernels.ArenaConfig{Pages: 4, PageTokens: 16, Layers: 1, KVHeads: 1, HeadDim: 64}
	pool, err := isolation.NewPool(isolation.Config{Pages: ac.Pages, PageTokens: ac.PageTokens})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(kernels.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	arena, err := b.NewArena(ac)
	if err != nil {
		t.Fatal(err)
	}
	s, err := transfer.NewSender(transfer.SenderConfig{Pool: pool, Arena: arena, Keys: keys, Model: d})
	if err != nil {
		t.Fatal(err)
	}
	l, err := pool.Allocate("acme", "forged", 3)
	if err != nil {
		t.Fatal(err)
	}
	// One page of zeros, copied in as a received transfer would be (the
	// arena tags it as the lease's), then recorded as written.
	table, err := pool.StagingTable(l, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := arena.CopyIn(table, 0, make([]byte, ac.PageBytes())); err != nil {
		t.Fatal(err)
	}
	if err := pool.Write(l, 3); err != nil {
		t.Fatal(err)
	}
	cert, err := c.authority.IssueRole("prefill-rogue", pki.RolePrefill, c.hosts...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := prefillrpc.Dial(addr, pki.RequirePeerRole(pki.ClientConfig(cert, c.authority.Pool(), ""), pki.RoleDecode))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = s.Send(ctx, transfer.GRPC(conn), l, transfer.Target{Tenant: "acme", Request: "forged", Epoch: 1, Tokens: 3})
	return err
}

// A decode node serving two models, whose prefill nodes are found by DNS:
// a prefill node that joins the service serving only the first model is
// left out — it would be asked for the second — and never prefills;
// one that serves both joins and is used for both.
func TestE2ESplitModelsPeerJoins(t *testing.T) {
	hosts := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	c := newClusterHosts(t, append([]string{"127.0.0.1"}, hosts...), "prefill-1", "prefill-2", "prefill-3", "decode")
	dir := t.TempDir()
	alpha, _ := writeSplitBag(t, dir, "alpha.gguf", 4096)
	beta, _ := writeSplitBag(t, dir, "beta.gguf", 2048)
	dns := startDNS(t, "prefill.cloison.test.")
	port := strconv.Itoa(freePort(t))
	db := pgtest.New(t)
	both := []string{"--model", alpha + ",id=alpha", "--model", beta + ",id=beta"}
	p1 := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey, append([]string{"--prefill-addr", hosts[0] + ":" + port}, both...)...)
	dns.set(hosts[0])
	d := startNode(t, db.AdminURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey, append([]string{"--transfer-addr", "127.0.0.1:0",
		"--prefill-peers", "prefill.cloison.test:" + port, "--prefill-resolve-interval", "200ms", "--prefill-dns-server", dns.conn.LocalAddr().String()}, both...)...)...)
	createTenant(t, db.AdminURL, "acme", func(tn *tenancy.Tenant) { tn.AllowedModels = []string{"alpha", "beta"} })
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	var count int
	complete := func(model string) {
		t.Helper()
		count++ // a new prompt each time: no prefix-cache hit
		if st, _, code := modelCompletion(t, d, tok, model, strconv.Itoa(count)+" the quick brown fox"); st != 200 {
			t.Fatalf("%s: got %d %s, want 200\ndecode:\n%s", model, st, code, d.logs)
		}
	}
	complete("alpha")
	complete("beta")

	// prefill-2 serves alpha only; prefill-3 both.
	p2 := c.prefillNode(t, db.AdminURL, "prefill-2", c.clusterKey, "--prefill-addr", hosts[1]+":"+port, "--model", alpha)
	p3 := c.prefillNode(t, db.AdminURL, "prefill-3", c.clusterKey, append([]string{"--prefill-addr", hosts[2] + ":" + port}, both...)...)
	dns.set(hosts...)
	served := func(p *daemon, model string) int {
		return strings.Count(p.logs.String(), `"msg":"prefill","model":"`+model+`"`)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		// Three requests a round: the set is asked round-robin across
		// models, so each node gets each model in turn.
		complete("alpha")
		complete("alpha")
		complete("beta")
		return served(p3, "alpha") > 0 && served(p3, "beta") > 0
	}, "prefill-3 joins for both models\n%s", testwait.Lazy(func() string { return d.logs.String() }))
	for range 4 {
		complete("beta")
		complete("alpha")
	}
	if !strings.Contains(d.logs.String(), "prefill node left out") || !strings.Contains(d.logs.String(), "does not serve model") {
		t.Errorf("prefill-2 (beta missing) was not reported as left out:\n%s", d.logs)
	}
	if n := strings.Count(p2.logs.String(), `"msg":"prefill"`); n != 0 {
		t.Errorf("prefill-2, which does not serve beta, prefilled %d requests, want 0", n)
	}
	if served(p1, "beta") == 0 || served(p1, "alpha") == 0 {
		t.Errorf("prefill-1 prefilled alpha %d and beta %d times", served(p1, "alpha"), served(p1, "beta"))
	}
}

// A model unloaded from the decode node while one of its transfers is in
// flight (held mid-stream by a fault proxy on the transfer path): the
// request ends at once with a typed error — never a 200 — as the model's
// engine stops and cancels its reservation (the lease discarded, nothing
// committed); request.completed records the error; the other model keeps
// serving over the same transfer path once it flows again.
func TestE2ESplitUnloadInFlight(t *testing.T) {
	c := newCluster(t, "prefill-1", "decode")
	dir := t.TempDir()
	alpha, _ := writeSplitBag(t, dir, "alpha.gguf", 4096)
	beta, _ := writeSplitBag(t, dir, "beta.gguf", 2048)
	db := pgtest.New(t)
	p := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey, "--model", alpha+",id=alpha", "--model", beta+",id=beta")
	transferAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	proxy, err := faultproxy.New(transferAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	d := startNode(t, db.AdminURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey,
		"--transfer-addr", transferAddr, "--transfer-advertise", proxy.Addr(), "--prefill-peers", p.grpcAddr, "--prefill-timeout", "60s",
		"--model", alpha+",id=alpha", "--model", beta+",id=beta")...)
	createTenant(t, db.AdminURL, "acme", func(tn *tenancy.Tenant) { tn.AllowedModels = []string{"alpha", "beta"} })
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	admin := d.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)

	before := proxy.Bytes(faultproxy.Up)
	if st, _, code := modelCompletion(t, d, tok, "beta", bystanderPrompt); st != 200 {
		t.Fatalf("warm-up: %d %s\n%s", st, code, d.logs)
	}
	perPrompt := proxy.Bytes(faultproxy.Up) - before
	proxy.StallAfter(faultproxy.Up, perPrompt/3)
	type result struct {
		status int
		code   string
	}
	done := make(chan result, 1)
	go func() {
		st, _, code := modelCompletion(t, d, tok, "beta", victimPrompt)
		done <- result{st, code}
	}()
	testwait.Eventually(t, 20*time.Second, func() bool { return proxy.Stats().Stalled }, "beta's transfer to stall mid-stream")
	start := time.Now()
	if r := d.do("DELETE", "/admin/v1/models/beta", admin, nil); r.status != 200 {
		t.Fatalf("unload beta: %d %s", r.status, r.body)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the in-flight request did not end after its model was unloaded\n%s", d.logs)
	}
	proxy.Pass()
	if res.status == 200 || res.code == "" {
		t.Fatalf("the in-flight request of the unloaded model: %d %q, want a typed error", res.status, res.code)
	}
	t.Logf("in-flight request: %d %s, %v after the unload", res.status, res.code, time.Since(start).Round(time.Millisecond))
	if st, _, code := modelCompletion(t, d, tok, "alpha", rolePrompts[3]); st != 200 {
		t.Fatalf("alpha after beta's unload: %d %s\n%s", st, code, d.logs)
	}
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, row := range d.ledgerRows(admin) {
			data := payloadData(row)
			if row["kind"] == "request.completed" && data["model"] == "beta" && data["status"] == res.code {
				return true
			}
		}
		return false
	}, "a request.completed of beta with status %s", res.code)
}
