package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// cluster is the node-to-node material of a test cluster: a CA, one
// certificate per node and two cluster keys (the right one and a wrong one).
type cluster struct {
	dir                  string
	ca                   string
	clusterKey, wrongKey string
	authority            *pki.CA
	hosts                []string
}

// label reissues node's certificate (of role) naming labels.
func (c *cluster) label(t *testing.T, node, role string, labels pki.Labels) {
	t.Helper()
	cert, err := c.authority.IssueNode(node, role, labels, c.hosts...)
	if err != nil {
		t.Fatal(err)
	}
	cp, kp, err := pki.EncodePEM(cert)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{node + ".pem": cp, node + "-key.pem": kp} {
		if err := os.WriteFile(filepath.Join(c.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func newCluster(t *testing.T, nodes ...string) *cluster {
	t.Helper()
	return newClusterHosts(t, []string{"127.0.0.1", "localhost"}, nodes...)
}

// newClusterHosts is newCluster with certificates naming hosts.
func newClusterHosts(t *testing.T, hosts []string, nodes ...string) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir(), hosts: hosts}
	ca, err := pki.NewCA("e2e-ca")
	if err != nil {
		t.Fatal(err)
	}
	c.authority = ca
	c.ca = filepath.Join(c.dir, "ca.pem")
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(c.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", ca.CertPEM())
	for _, n := range nodes {
		role := pki.RoleDecode
		if strings.HasPrefix(n, pki.RolePrefill) {
			role = pki.RolePrefill
		}
		cert, err := ca.IssueRole(n, role, hosts...)
		if err != nil {
			t.Fatal(err)
		}
		cp, kp, err := pki.EncodePEM(cert)
		if err != nil {
			t.Fatal(err)
		}
		write(n+".pem", cp)
		write(n+"-key.pem", kp)
	}
	for _, k := range []*string{&c.clusterKey, &c.wrongKey} {
		key, err := transfer.NewKey("x")
		if err != nil {
			t.Fatal(err)
		}
		*k = filepath.Join(c.dir, hex.EncodeToString(key.Secret[:4])+".key")
		write(filepath.Base(*k), []byte(hex.EncodeToString(key.Secret)+"\n"))
	}
	return c
}

// flags are a node's role flags.
func (c *cluster) flags(node, role, key string, extra ...string) []string {
	return append([]string{"--role", role, "--tls-ca", c.ca, "--tls-cert", filepath.Join(c.dir, node+".pem"),
		"--tls-key", filepath.Join(c.dir, node+"-key.pem"), "--cluster-key", key}, extra...)
}

func (c *cluster) prefillNode(t *testing.T, dbURL, name, key string, extra ...string) *daemon {
	return startNode(t, dbURL, pgtestRoles(), c.flags(name, "prefill", key, append([]string{"--prefill-addr", "127.0.0.1:0"}, extra...)...)...)
}

func (c *cluster) decodeNode(t *testing.T, dbURL string, peers ...*daemon) *daemon {
	var addrs []string
	for _, p := range peers {
		addrs = append(addrs, p.grpcAddr) // a prefill node writes its PrefillService address there
	}
	return startNode(t, dbURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey,
		"--transfer-addr", "127.0.0.1:0", "--prefill-peers", strings.Join(addrs, ","))...)
}

// completionText returns a full completion's text, or "" and the error code.
func completionText(t *testing.T, n *daemon, token, prompt string, maxTokens int) (status int, text, code string) {
	t.Helper()
	r := n.do("POST", "/v1/completions", token, completion(prompt, maxTokens, false))
	if r.status != 200 {
		return r.status, "", r.code()
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("completion body %s: %v", r.body, err)
	}
	return r.status, out.Choices[0].Text, ""
}

// ttft is the median time of a one-token completion of the longest prompt
// (each time with another first byte: no prefix-cache hit).
func ttft(t *testing.T, n *daemon, token string) time.Duration {
	var ds []time.Duration
	for i := range 5 {
		start := time.Now()
		if st, _, code := completionText(t, n, token, string(rune('q'+i))+rolePrompts[4], 1); st != 200 {
			t.Fatalf("ttft: %d %s", st, code)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

var rolePrompts = []string{"aaab", "zzy", "abcabcabcabcabcabcabcabcabcabcabcabcabcabcq", "hello, disaggregated world", strings.Repeat("mnop", 40) + "x"}

// One decode node with the API and two prefill nodes, as separate processes
// on one PostgreSQL, over mutual TLS: completions equal a --role both node's
// (greedy); with one prefill node stopped the other serves (or the request
// fails with an error, never a 200 with other content).
func TestE2ERolesDecodeAndPrefillNodes(t *testing.T) {
	c := newCluster(t, "prefill-1", "prefill-2", "decode")

	// The reference: one node doing both.
	refDB := pgtest.New(t)
	ref := startNode(t, refDB.AdminURL, pgtestRoles())
	createTenant(t, refDB.AdminURL, "acme", nil)
	refTok := ref.token("acme", time.Hour, tenancy.ScopeInfer)
	want := map[string]string{}
	for _, p := range rolePrompts {
		st, text, code := completionText(t, ref, refTok, p, 8)
		if st != 200 {
			t.Fatalf("reference %q: %d %s", p, st, code)
		}
		want[p] = text
	}
	refTTFT := ttft(t, ref, refTok)
	ref.stop()

	db := pgtest.New(t)
	p1 := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey)
	p2 := c.prefillNode(t, db.AdminURL, "prefill-2", c.clusterKey)
	d := c.decodeNode(t, db.AdminURL, p1, p2)
	createTenant(t, db.AdminURL, "acme", nil) // after the prefill nodes started: added on first use
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	for round := range 2 {
		for _, p := range rolePrompts {
			st, text, code := completionText(t, d, tok, p, 8)
			if st != 200 || text != want[p] {
				t.Fatalf("round %d, %q: %d %q (%s), want %q as --role both\ndecode:\n%s\nprefill-1:\n%s\nprefill-2:\n%s", round, p, st, text, code, want[p], d.logs, p1.logs, p2.logs)
			}
		}
	}
	t.Logf("time to first token (one-token completion of a %d-byte prompt, median of 5): --role both %v, decode + prefill nodes %v",
		len(rolePrompts[4])+1, refTTFT, ttft(t, d, tok))
	// A streamed completion too.
	r := d.do("POST", "/v1/completions", tok, completion(rolePrompts[2], 8, true))
	texts, finish, done, errCode := sse(t, r.body)
	if r.status != 200 || !done || errCode != "" || finish != "length" || strings.Join(texts, "") != want[rolePrompts[2]] {
		t.Fatalf("stream: %d %q %q %v %q", r.status, texts, finish, done, errCode)
	}
	// Both prefill nodes worked (round-robin).
	for i, p := range []*daemon{p1, p2} {
		if n := strings.Count(p.logs.String(), `"msg":"prefill"`); n == 0 {
			t.Fatalf("prefill-%d prefilled nothing:\n%s", i+1, p.logs)
		}
		// and counted it on its own metrics listener (--metrics-addr).
		st, body := p.scrape(t, "")
		m := regexp.MustCompile(`(?m)^cloison_prefill_requests_total\{code="ok",model_name="` + modelID + `"\} (\d+)$`).FindStringSubmatch(body)
		if st != 200 || m == nil || m[1] == "0" {
			t.Fatalf("prefill-%d metrics: %d, ok prefills %v\n%s", i+1, st, m, body)
		}
	}

	// One prefill node stops: the other serves; nothing is a 200 with other
	// content.
	p1.stop()
	served := 0
	for _, p := range rolePrompts {
		st, text, code := completionText(t, d, tok, p, 8)
		switch {
		case st == 200 && text != want[p]:
			t.Fatalf("after stopping prefill-1, %q: 200 with %q, want %q", p, text, want[p])
		case st == 200:
			served++
		case code == "":
			t.Fatalf("after stopping prefill-1, %q: %d without an error code", p, st)
		default:
			t.Logf("after stopping prefill-1, %q failed closed: %d %s", p, st, code)
		}
	}
	if served == 0 {
		t.Fatalf("prefill-2 served nothing after prefill-1 stopped\n%s", d.logs)
	}
	// Both stopped: every request fails with an error.
	p2.stop()
	for _, p := range rolePrompts[:2] {
		if st, text, code := completionText(t, d, tok, p, 8); st == 200 || code == "" {
			t.Fatalf("no prefill node, %q: %d %q %q", p, st, text, code)
		}
	}
	if strings.Contains(d.logs.String(), "transfer refused") {
		t.Fatalf("a transfer was refused:\n%s", d.logs)
	}
}

// A prefill node holding the wrong cluster key: the decode node refuses its
// transfers before they touch a reservation (the header does not
// authenticate); the client gets an error (never a 200); every refusal is
// counted in cloison_transfer_unauthenticated_refusals_total, and one
// transfer.verification_failed is ledgered with an incident opened (at most
// one per peer and window: a flood does not fill the register).
func TestE2ERolesWrongClusterKey(t *testing.T) {
	c := newCluster(t, "prefill-1", "decode")
	db := pgtest.New(t)
	p := c.prefillNode(t, db.AdminURL, "prefill-1", c.wrongKey)
	d := c.decodeNode(t, db.AdminURL, p)
	createTenant(t, db.AdminURL, "acme", nil)
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	admin := d.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	for _, pr := range rolePrompts[:3] {
		st, text, code := completionText(t, d, tok, pr, 8)
		if st == 200 || code == "" {
			t.Fatalf("%q with a wrong cluster key: %d %q %q\n%s", pr, st, text, code, d.logs)
		}
		t.Logf("%q: %d %s", pr, st, code)
	}
	// Streamed: an error, never a normal finish.
	r := d.do("POST", "/v1/completions", tok, completion(rolePrompts[2], 8, true))
	if texts, finish, _, errCode := sse(t, r.body); r.status == 200 && (errCode == "" || len(strings.Join(texts, "")) > 0 || finish == "length") {
		t.Fatalf("stream with a wrong cluster key: %d %q %q %q", r.status, texts, finish, errCode)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var failed int
		for _, row := range d.ledgerRows(admin) {
			if row["kind"] == "transfer.verification_failed" {
				failed++
			}
		}
		ir := d.do("GET", "/compliance/v1/incidents", admin, nil)
		_, mr := d.scrape(t, "")
		if failed == 1 && ir.status == 200 && strings.Count(string(ir.body), `"Source":"transfer_verification_failed"`) == 1 &&
			unauthenticatedRefusals(mr) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transfer.verification_failed events; incidents: %d %s\n%s", failed, ir.status, ir.body, d.logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(d.logs.String(), "transfer refused") {
		t.Fatalf("no refusal logged:\n%s", d.logs)
	}
}

// The 2026 misconfiguration at startup: a prefill node whose pool cannot hold
// the served context refuses to start; a decode node refuses prefill nodes
// that serve less than it does; aligned on the smaller context, the decode
// node rejects a prompt beyond it before reserving anything or calling a
// prefill node, and shorter prompts work.
func TestE2ERolesCapacityAttestation(t *testing.T) {
	c := newCluster(t, "prefill-1", "decode")
	db := pgtest.New(t)
	// 8 pages of 16 tokens, the built-in model's 4,096-token context.
	logs := startNodeExpectExit(t, db.AdminURL, t.TempDir(), c.flags("prefill-1", "prefill", c.clusterKey, "--prefill-addr", "127.0.0.1:0", "--kv-pages", "8")...)
	if !strings.Contains(logs, "capacity attestation failed") || !strings.Contains(logs, "pool holds 128 tokens") {
		t.Fatalf("the misaligned prefill node did not refuse to start with its attestation:\n%s", logs)
	}
	p := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey, "--kv-pages", "8", "--served-context", "128")
	// (its own database: the signing keys it creates open only with the
	// key-encryption key in its state directory)
	logs = startNodeExpectExit(t, pgtest.New(t).AdminURL, t.TempDir(), c.flags("decode", "decode", c.clusterKey,
		"--transfer-addr", "127.0.0.1:0", "--prefill-peers", p.grpcAddr)...)
	if !strings.Contains(logs, "capacity attestation failed") || !strings.Contains(logs, "prefill pool holds 128 tokens, the served context is 4096") {
		t.Fatalf("the decode node did not refuse its misaligned prefill node:\n%s", logs)
	}
	d := startNode(t, db.AdminURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey,
		"--transfer-addr", "127.0.0.1:0", "--prefill-peers", p.grpcAddr, "--served-context", "128")...)
	createTenant(t, db.AdminURL, "acme", nil)
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	// The ledger records the prefill node as the decode node checked it.
	var ledgered bool
	for _, row := range d.ledgerRows(d.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)) {
		if row["kind"] != "capacity.attestation" {
			continue
		}
		pre, _ := payloadData(row)["prefill"].([]any)
		if len(pre) == 1 {
			pc, _ := pre[0].(map[string]any)
			ledgered = pc["node"] == p.grpcAddr && pc["pool_tokens"] == float64(128) && pc["ready"] == true
		}
	}
	if !ledgered {
		t.Fatal("no capacity.attestation event records the prefill node's 128-token pool")
	}
	r := d.do("GET", "/v1/attestation", tok, nil)
	var att attest.Attestation
	if err := json.Unmarshal(r.body, &att); err != nil || !att.OK || len(att.Prefill) != 1 || !att.Prefill[0].OK || att.Prefill[0].Attestation.PoolTokens != 128 {
		t.Fatalf("published attestation %d %s (%v)", r.status, r.body, err)
	}
	st, text, code := completionText(t, d, tok, strings.Repeat("ab", 150), 4)
	if st != 400 || code != string(cloison.CodeContextLengthExceeded) {
		t.Fatalf("a prompt beyond the served context: %d %q %q", st, text, code)
	}
	const prefilled = `"msg":"prefill"`
	if strings.Contains(p.logs.String(), prefilled) {
		t.Fatalf("a rejected prompt reached the prefill node:\n%s", p.logs)
	}
	if st, _, code := completionText(t, d, tok, "hello, world", 4); st != 200 {
		t.Fatalf("a short prompt after the rejection: %d %s", st, code)
	}
	if !strings.Contains(p.logs.String(), prefilled) {
		t.Fatalf("the short prompt was not prefilled remotely:\n%s", p.logs)
	}
}

// startNodeExpectExit runs cloisond with the test flags and extra, and
// returns its output once it exited; it fails the test if the node became
// ready instead.
func startNodeExpectExit(t *testing.T, dbURL, dir string, extra ...string) string {
	t.Helper()
	ready := filepath.Join(dir, "ready")
	args := append([]string{"--database-url", pgtest.AsRole(dbURL, pgtest.Roles.Runtime), "--migrate-database-url", dbURL, "--addr", "127.0.0.1:0", "--dev", "--state-dir", dir, "--ready-file", ready,
		"--grpc-addr", "127.0.0.1:0", "--kv-pages", "256", "--node", "e2e", "--prefill-attest-wait", "2s", "--metrics-addr", "127.0.0.1:0"}, pgtestRoles()...)
	cmd := exec.Command(binary, append(args, extra...)...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("cloisond exited 0:\n%s", logs)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("cloisond did not exit:\n%s", logs)
	}
	if b, _ := os.ReadFile(ready); len(b) > 0 {
		t.Fatalf("cloisond reported ready before exiting:\n%s", logs)
	}
	return logs.String()
}

// A prefill node killed (SIGKILL) while requests are in flight: every
// response is either a 200 with exactly the --role both content or an error;
// the surviving peer keeps serving afterwards.
func TestE2ERolesPrefillNodeKilled(t *testing.T) {
	c := newCluster(t, "prefill-1", "prefill-2", "decode")
	refDB := pgtest.New(t)
	ref := startNode(t, refDB.AdminURL, pgtestRoles())
	createTenant(t, refDB.AdminURL, "acme", nil)
	refTok := ref.token("acme", time.Hour, tenancy.ScopeInfer)
	want := map[string]string{}
	for _, p := range rolePrompts {
		_, want[p], _ = completionText(t, ref, refTok, p, 8)
	}
	ref.stop()

	db := pgtest.New(t)
	p1 := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey)
	p2 := c.prefillNode(t, db.AdminURL, "prefill-2", c.clusterKey)
	d := c.decodeNode(t, db.AdminURL, p1, p2)
	createTenant(t, db.AdminURL, "acme", nil)
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)

	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, failed := 0, 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				p := rolePrompts[(w+i)%len(rolePrompts)]
				st, text, code := completionText(t, d, tok, p, 8)
				mu.Lock()
				switch {
				case st == 200 && text != want[p]:
					t.Errorf("%q: 200 with %q, want %q", p, text, want[p])
				case st == 200:
					ok++
				case code == "":
					t.Errorf("%q: %d without an error code", p, st)
				default:
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	_ = p1.cmd.Process.Kill()
	<-p1.done
	wg.Wait()
	t.Logf("with prefill-1 killed mid-run: %d served, %d failed closed", ok, failed)
	for _, p := range rolePrompts {
		if st, text, code := completionText(t, d, tok, p, 8); st != 200 || text != want[p] {
			t.Fatalf("after the kill, %q: %d %q %s", p, st, text, code)
		}
	}
}

// unauthenticatedRefusals sums cloison_transfer_unauthenticated_refusals_total
// over its reasons in a Prometheus text exposition.
func unauthenticatedRefusals(metrics string) float64 {
	var sum float64
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, "cloison_transfer_unauthenticated_refusals_total{"); ok {
			if _, v, ok := strings.Cut(rest, "} "); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					sum += f
				}
			}
		}
	}
	return sum
}
