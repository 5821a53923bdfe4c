package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	responsev1 "github.com/cloison/cloison/api/proto/cloison/response/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// served is one completion as the tenant received it.
type served struct {
	id   cloison.RequestID
	text string
}

// complete sends one non-streamed completion and returns its id and text.
func complete(t *testing.T, p *platformtest.Platform, tenant cloison.TenantID, body string) served {
	t.Helper()
	resp, b := send(t, "POST", p.URL+"/v1/completions", p.Token(t, tenant, tenancy.ScopeInfer), body)
	if resp.StatusCode != 200 {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	var c api.Completion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return served{id: cloison.RequestID(resp.Header.Get("X-Request-Id")), text: c.Choices[0].Text}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// checkEntryOffline checks a verify answer's proof as cloisonctl does:
// the published key and the answer alone.
func checkEntryOffline(t *testing.T, vkey string, tenant cloison.TenantID, res api.VerifyResult) audit.RequestCompleted {
	t.Helper()
	e := res.Entry
	proof := make(tlog.RecordProof, len(e.Proof))
	for i, h := range e.Proof {
		b, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(b) != len(proof[i]) {
			t.Fatalf("proof hash %d: %v", i, err)
		}
		copy(proof[i][:], b)
	}
	if _, err := audit.VerifyTenantInclusion([]byte(e.Checkpoint), vkey, tenant, e.Position, e.Payload, proof); err != nil {
		t.Fatalf("the entry's inclusion proof does not verify offline: %v", err)
	}
	env, err := audit.DecodeEnvelope(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := env.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	return *pl.(*audit.RequestCompleted)
}

// Verify: request.completed holds keyed digests and the sampling that
// determined the output, no text; the tenant verifies prompt and
// completion (text or ids) and gets a proof checkable offline; another
// tenant's id answers exactly as an unknown id.
func TestVerifyServedResponse(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Pages: 64})
	prompt := "the quick brown fox jumps over the lazy dog, twice over"
	got := complete(t, p, "victim", mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 8, "temperature": 0, "stop": []string{"zz"}}))
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	verify := func(token string, id cloison.RequestID, body any) (int, []byte) {
		resp, b := send(t, "POST", p.URL+"/v1/requests/"+string(id)+"/verify", token, mustJSON(body))
		return resp.StatusCode, b
	}
	code, b := verify(tok, got.id, map[string]any{"prompt": prompt, "completion": got.text})
	if code != 200 {
		t.Fatalf("verify: %d %s", code, b)
	}
	var res api.VerifyResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Match || !res.PromptMatch || !res.CompletionMatch {
		t.Fatalf("the prompt and completion served do not match: %s", b)
	}
	vkey, err := p.Ledger.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	rc := checkEntryOffline(t, vkey, "victim", res)
	sv := rc.Served
	if rc.Request != got.id || sv == nil || sv.Key != api.DefaultDigestKey || sv.Backend != "cpu" || sv.Sampling.Temperature != "0" ||
		sv.Sampling.MaxTokens != 8 || sv.Sampling.Stops != 1 || sv.Sampling.SeedSource != "server" || sv.ModelDigest.IsZero() {
		t.Fatalf("entry %+v / served %+v: want the request's digests and sampling", rc, sv)
	}
	if strings.Contains(string(res.Entry.Payload), "quick") || strings.Contains(string(res.Entry.Payload), "zz") {
		t.Fatalf("text in the ledger: %s", res.Entry.Payload)
	}
	// The digest is keyed: the plain SHA-256 of the ids is not it, and a
	// key derived for another tenant gives another digest.
	key, _ := audit.DigestKey(p.KEK, "victim", sv.Key)
	other, _ := audit.DigestKey(p.KEK, "attacker", sv.Key)
	ids := tokenIDs(t, p, prompt)
	if audit.PromptDigest(key, ids) != sv.Prompt || audit.PromptDigest(other, ids) == sv.Prompt {
		t.Fatal("the prompt digest is not the victim's keyed digest of its prompt ids")
	}
	// Token ids verify too; a changed completion or prompt does not match.
	for _, c := range []struct {
		name       string
		body       any
		promptOK   bool
		completeOK bool
	}{
		{"ids", map[string]any{"prompt": ids, "completion": got.text}, true, true},
		{"other completion", map[string]any{"prompt": prompt, "completion": got.text + "x"}, true, false},
		{"other prompt", map[string]any{"prompt": prompt + ".", "completion": got.text}, false, true},
		{"completion ids of nothing", map[string]any{"prompt": prompt, "completion_tokens": []int32{}}, true, false},
	} {
		code, b := verify(tok, got.id, c.body)
		var r api.VerifyResult
		_ = json.Unmarshal(b, &r)
		if code != 200 || r.PromptMatch != c.promptOK || r.CompletionMatch != c.completeOK || r.Match != (c.promptOK && c.completeOK) {
			t.Errorf("%s: %d %s, want prompt %v completion %v", c.name, code, b, c.promptOK, c.completeOK)
		}
	}
	// A chat request verifies with its messages as sent.
	msgs := []map[string]string{{"role": "user", "content": "Bonjour, qui es-tu ?"}}
	resp, cb := send(t, "POST", p.URL+"/v1/chat/completions", tok, mustJSON(map[string]any{"model": platformtest.Model, "messages": msgs, "max_tokens": 5}))
	var cc api.ChatCompletion
	if err := json.Unmarshal(cb, &cc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, cb)
	}
	chatID := cloison.RequestID(resp.Header.Get("X-Request-Id"))
	if code, b := verify(tok, chatID, map[string]any{"messages": msgs, "completion": cc.Choices[0].Message.Content}); code != 200 || !strings.Contains(string(b), `"match":true`) {
		t.Errorf("chat verify: %d %s", code, b)
	}
	if code, b := verify(tok, chatID, map[string]any{"messages": msgs, "prompt": "x", "completion": ""}); code != 400 {
		t.Errorf("prompt and messages both: %d %s, want 400", code, b)
	}
	// No oracle: the attacker asking about the victim's id gets what an
	// unknown id gets, byte for byte.
	atk := p.Token(t, "attacker", tenancy.ScopeInfer)
	c1, b1 := verify(atk, got.id, map[string]any{"prompt": prompt, "completion": got.text})
	c2, b2 := verify(atk, "req-000000000000000000000000", map[string]any{"prompt": prompt, "completion": got.text})
	if c1 != 404 || c2 != 404 || string(b1) != string(b2) {
		t.Fatalf("another tenant's id: %d %s; unknown id: %d %s; want the same 404", c1, b1, c2, b2)
	}
	// Refused inputs: an unknown field, both completions, no prompt.
	for _, body := range []string{
		`{"prompt":"x","completion":"y","temperature":1}`,
		`{"prompt":"x","completion":"y","completion_tokens":[1]}`,
		`{"completion":"y"}`,
	} {
		resp, b := send(t, "POST", p.URL+"/v1/requests/"+string(got.id)+"/verify", tok, body)
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d %s, want 400", body, resp.StatusCode, b)
		}
	}
}

func tokenIDs(t *testing.T, p *platformtest.Platform, text string) []int32 {
	t.Helper()
	return p.Tokenizer.Encode(text, true, false)
}

// Report: a report is ledgered, opens a potential incident under assessment
// with the request and period, notifies the operator (metric, webhook),
// keeps the foreign text sealed outside the ledger for the tenant's
// compliance officer, is deduplicated per request and rate-limited per
// tenant; another tenant's request id is 404.
func TestReportSuspiciousResponse(t *testing.T) {
	hooks := make(chan map[string]string, 8)
	secret := []byte("report-webhook-secret-0123456789")
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifyStandardWebhook(r.Header, secret, body, time.Now()); err != nil {
			t.Errorf("webhook signature: %v", err)
		}
		var m map[string]string
		_ = json.Unmarshal(body, &m)
		hooks <- m
	}))
	t.Cleanup(hook.Close)
	p := platformtest.New(t, platformtest.Options{Pages: 64, API: func(c *api.Config) {
		c.Responses.ReportWebhook = hook.URL
		c.Responses.WebhookSecret = secret
		c.Responses.ReportLimit = audit.ReportLimit{N: 2, Window: time.Hour}
	}})
	body := mustJSON(map[string]any{"model": platformtest.Model, "prompt": "hello there", "max_tokens": 4, "temperature": 0})
	r1, r2, r3 := complete(t, p, "victim", body), complete(t, p, "victim", body), complete(t, p, "victim", body)
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	foreign := "ACCOUNT 4242-SECRET of someone else"
	report := func(token string, in any) (int, api.ReportResult, []byte) {
		resp, b := send(t, "POST", p.URL+"/v1/reports", token, mustJSON(in))
		var res api.ReportResult
		_ = json.Unmarshal(b, &res)
		return resp.StatusCode, res, b
	}
	code, res, b := report(tok, map[string]any{"request": r1.id, "reason": "foreign-content", "foreign_text": foreign, "details": "seen in our CRM"})
	if code != 201 || res.Report == "" || res.Incident == "" || res.Status != "under_assessment" || res.Duplicate {
		t.Fatalf("report: %d %s", code, b)
	}
	select {
	case m := <-hooks:
		if m["report"] != string(res.Report) || m["request"] != string(r1.id) || m["tenant"] != "victim" || m["event"] != "report.received" {
			t.Fatalf("webhook got %v", m)
		}
		if strings.Contains(mustJSON(m), "4242") {
			t.Fatal("the webhook carried the foreign text")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook notice")
	}
	f, err := p.Ledger.Incident(context.Background(), res.Incident)
	if err != nil {
		t.Fatal(err)
	}
	v := f.Versions[len(f.Versions)-1]
	if v.Status != audit.IncidentUnderAssessment || v.Source != audit.SourceTenantReport || len(v.AffectedRequests) != 1 ||
		v.AffectedRequests[0] != r1.id || v.Occurred.Start != audit.DayOf(time.Now()) || len(v.AffectedTenants) != 1 || v.AffectedTenants[0] != "victim" {
		t.Fatalf("register entry %+v: want under assessment, the request and its day", v.IncidentVersion)
	}
	// Ledgered, without the text.
	var received bool
	if err := p.Ledger.Scan(context.Background(), 1, 0, func(r audit.Record) error {
		if strings.Contains(string(r.Payload), "4242-SECRET") || strings.Contains(string(r.Payload), "our CRM") {
			t.Errorf("text in ledger entry %d: %s", r.Seq, r.Payload)
		}
		received = received || strings.Contains(string(r.Payload), `"kind":"report.received"`) && strings.Contains(string(r.Payload), string(res.Report))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !received {
		t.Fatal("no report.received entry")
	}
	// The metric counted it.
	rec := httptest.NewRecorder()
	p.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	mb := rec.Body.Bytes()
	if !strings.Contains(string(mb), `cloison_reports_received_total{model_name="`+platformtest.Model+`",tenant="victim"} 1`) {
		t.Fatalf("metric missing:\n%s", grepLines(string(mb), "reports_received"))
	}
	// Deduplicated: the same report again.
	if code, again, b := report(tok, map[string]any{"request": r1.id, "reason": "other"}); code != 200 || !again.Duplicate || again.Report != res.Report {
		t.Fatalf("duplicate: %d %s", code, b)
	}
	// Another tenant's request: 404, as an unknown id.
	atk := p.Token(t, "attacker", tenancy.ScopeInfer)
	if code, _, b := report(atk, map[string]any{"request": r2.id, "reason": "other"}); code != 404 {
		t.Fatalf("attacker reporting the victim's request: %d %s", code, b)
	}
	if code, _, b := report(tok, map[string]any{"request": r2.id, "reason": "because I say so"}); code != 400 {
		t.Fatalf("free-text reason: %d %s", code, b)
	}
	// Rate limit (2 an hour here): the second is accepted, the third not.
	if code, _, b := report(tok, map[string]any{"request": r2.id, "reason": "unexpected-response"}); code != 201 {
		t.Fatalf("second report: %d %s", code, b)
	}
	if code, _, b := report(tok, map[string]any{"request": r3.id, "reason": "unexpected-response"}); code != 429 {
		t.Fatalf("third report within the window: %d %s, want 429", code, b)
	}
	// The refusal says when to come back: at most the window (the oldest
	// report in it has left by then).
	if resp, b := send(t, "POST", p.URL+"/v1/reports", tok, mustJSON(map[string]any{"request": r3.id, "reason": "unexpected-response"})); resp.StatusCode != 429 ||
		resp.Header.Get("Retry-After") != "3600" {
		t.Fatalf("report over the limit: %d Retry-After %q %s, want 429 with Retry-After 3600", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	// The sealed text: the tenant's compliance officer reads it; the
	// attacker's officer and the victim's inference token cannot.
	url := p.URL + "/compliance/v1/reports/" + string(res.Report)
	resp, b := send(t, "GET", url, p.Token(t, "victim", tenancy.ScopeComplianceRead), "")
	var view api.ReportView
	_ = json.Unmarshal(b, &view)
	if resp.StatusCode != 200 || view.ForeignText == nil || *view.ForeignText != foreign || view.Details == nil || view.Request != r1.id {
		t.Fatalf("compliance officer: %d %s", resp.StatusCode, b)
	}
	if resp, b := send(t, "GET", url, p.Token(t, "attacker", tenancy.ScopeComplianceRead), ""); resp.StatusCode != 404 {
		t.Fatalf("another tenant's officer: %d %s", resp.StatusCode, b)
	}
	if resp, b := send(t, "GET", url, tok, ""); resp.StatusCode != 403 {
		t.Fatalf("inference token: %d %s, want 403", resp.StatusCode, b)
	}
	var sealed []byte
	if err := p.DB.AdminPool(t).QueryRow(context.Background(), `SELECT sealed FROM response_reports WHERE id = $1`, string(res.Report)).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "4242") {
		t.Fatal("the stored text is not sealed")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Replay on demand, every defence on: a greedy and a seeded sampled request
// replay to what was served; a wrong prompt is refused; a replay on a
// different kernel path is inconclusive, with the reason.
func TestReplayOnDemand(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Pages: 64, ReplayPages: 16})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	replay := func(id cloison.RequestID, in any) (int, api.ReplayResult, []byte) {
		resp, b := send(t, "POST", p.URL+"/v1/requests/"+string(id)+"/replay", tok, mustJSON(in))
		var r api.ReplayResult
		_ = json.Unmarshal(b, &r)
		return resp.StatusCode, r, b
	}
	prompt := "abcabcabd hello hello"
	for _, c := range []struct {
		name string
		req  map[string]any
	}{
		{"greedy", map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 12, "temperature": 0}},
		{"sampled, server seed", map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 12, "temperature": 1, "top_k": 5}},
		{"stop", map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 12, "temperature": 0.5, "seed": 7, "stop": []string{"lo"}}},
	} {
		got := complete(t, p, "victim", mustJSON(c.req))
		in := map[string]any{"prompt": prompt}
		if s, ok := c.req["stop"]; ok {
			in["stop"] = s
		}
		code, r, b := replay(got.id, in)
		if code != 200 || r.Verdict != audit.VerdictNotIsolationFailure {
			t.Errorf("%s: %d %s, want not-isolation-failure", c.name, code, b)
		}
		if r.ReplayMicros <= 0 || r.OriginalMicros <= 0 {
			t.Errorf("%s: replay %d µs, original %d µs: want both measured", c.name, r.ReplayMicros, r.OriginalMicros)
		}
		if code, _, b := replay(got.id, map[string]any{"prompt": prompt + "!", "stop": in["stop"]}); code != 400 {
			t.Errorf("%s, other prompt: %d %s, want 400", c.name, code, b)
		}
	}
	got := complete(t, p, "victim", mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 4, "stop": []string{"x"}}))
	if code, _, b := replay(got.id, map[string]any{"prompt": prompt}); code != 400 {
		t.Errorf("stop list left out: %d %s, want 400", code, b)
	}
	// The attacker cannot replay the victim's request.
	resp, b := send(t, "POST", p.URL+"/v1/requests/"+string(got.id)+"/replay", p.Token(t, "attacker", tenancy.ScopeInfer), mustJSON(map[string]any{"prompt": prompt, "stop": "x"}))
	if resp.StatusCode != 404 {
		t.Errorf("attacker replay: %d %s", resp.StatusCode, b)
	}
	// The operator replays with the prompt supplied.
	resp, b = send(t, "POST", p.URL+"/admin/v1/tenants/victim/requests/"+string(got.id)+"/replay", p.Token(t, "attacker", tenancy.ScopeAdmin),
		mustJSON(map[string]any{"prompt": prompt, "stop": "x"}))
	if resp.StatusCode != 200 || !strings.Contains(string(b), string(audit.VerdictNotIsolationFailure)) {
		t.Errorf("operator replay: %d %s", resp.StatusCode, b)
	}

	q := platformtest.New(t, platformtest.Options{Pages: 64, ReplayPages: 16, API: func(c *api.Config) { c.Responses.ReplayKernelPath = "other-path" }})
	got = complete(t, q, "victim", mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 4}))
	resp, b = send(t, "POST", q.URL+"/v1/requests/"+string(got.id)+"/replay", q.Token(t, "victim", tenancy.ScopeInfer), mustJSON(map[string]any{"prompt": prompt}))
	var r api.ReplayResult
	_ = json.Unmarshal(b, &r)
	if resp.StatusCode != 200 || r.Verdict != audit.VerdictInconclusive || r.Reason != "kernel-path-differs" {
		t.Errorf("another kernel path: %d %s, want inconclusive (kernel-path-differs)", resp.StatusCode, b)
	}
}

// The same operations over gRPC: verify, report, replay; another tenant's
// request is NOT_FOUND.
func TestResponsesGRPC(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Pages: 64, ReplayPages: 16})
	prompt := "grpc says hello hello"
	got := complete(t, p, "victim", mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 6, "temperature": 0}))
	conn, ctx := p.GRPC(t)
	c := responsev1.NewResponseServiceClient(conn)
	as := func(tenant cloison.TenantID) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token(t, tenant, tenancy.ScopeInfer))
	}
	pr := &responsev1.Prompt{Text: &prompt}
	v, err := c.Verify(as("victim"), &responsev1.VerifyRequest{Request: string(got.id), Prompt: pr, Completion: &got.text})
	if err != nil || !v.GetMatch() {
		t.Fatalf("verify: %v %v", v, err)
	}
	vkey, _ := p.Ledger.TreeVerifierKey()
	proof := make(tlog.RecordProof, len(v.GetEntry().GetProof()))
	for i, h := range v.GetEntry().GetProof() {
		copy(proof[i][:], h)
	}
	if _, err := audit.VerifyTenantInclusion([]byte(v.GetEntry().GetCheckpoint()), vkey, "victim", v.GetEntry().GetPosition(), v.GetEntry().GetPayload(), proof); err != nil {
		t.Fatalf("gRPC proof: %v", err)
	}
	if _, err := c.Verify(as("attacker"), &responsev1.VerifyRequest{Request: string(got.id), Prompt: pr, Completion: &got.text}); status.Code(err) != codes.NotFound {
		t.Fatalf("attacker verify: %v, want NotFound", err)
	}
	rep, err := c.Report(as("victim"), &responsev1.ReportRequest{Request: string(got.id), Reason: "unexpected-response"})
	if err != nil || rep.GetIncident() == "" || rep.GetStatus() != "under_assessment" {
		t.Fatalf("report: %v %v", rep, err)
	}
	if _, err := c.Report(as("attacker"), &responsev1.ReportRequest{Request: string(got.id), Reason: "other"}); status.Code(err) != codes.NotFound {
		t.Fatalf("attacker report: %v, want NotFound", err)
	}
	rp, err := c.Replay(as("victim"), &responsev1.ReplayRequest{Request: string(got.id), Prompt: pr})
	if err != nil || rp.GetVerdict() != string(audit.VerdictNotIsolationFailure) || rp.GetReport() != rep.GetReport() {
		t.Fatalf("replay: %v %v", rp, err)
	}
	// The reported entry is closed as not an isolation failure.
	f, err := p.Ledger.Incident(ctx, audit.Name(rep.GetIncident()))
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Versions[len(f.Versions)-1].Status; st != audit.IncidentClosed {
		t.Fatalf("after a clean replay the entry is %s, want closed", st)
	}
}

// verifyStandardWebhook is a receiver's check of a Standard Webhooks
// notice, written from the spec (standardwebhooks.com): the signed content
// is "id.timestamp.body", the signature list holds "v1,<base64 HMAC>", and a
// timestamp more than five minutes away is refused (replay).
func verifyStandardWebhook(h http.Header, secret, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("missing headers %q %q %q", id, ts, sigs)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return fmt.Errorf("timestamp %q out of tolerance", ts)
	}
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(sigs) {
		if v, b64, ok := strings.Cut(sig, ","); ok && v == "v1" {
			if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return fmt.Errorf("no valid v1 signature in %q", sigs)
}

// A forged notice (other secret, other body, old timestamp) fails the
// receiver's check; a server with a webhook and no secret does not start.
func TestReportWebhookSigned(t *testing.T) {
	secret := []byte("report-webhook-secret-0123456789")
	body := []byte(`{"event":"report.received","report":"r1"}`)
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	api.SignWebhook(h, secret, "r1", now, body)
	if err := verifyStandardWebhook(h, secret, body, now); err != nil {
		t.Fatalf("genuine notice refused: %v", err)
	}
	for name, check := range map[string]func() error{
		"other secret": func() error { return verifyStandardWebhook(h, []byte("another-secret-0123456789"), body, now) },
		"other body": func() error {
			return verifyStandardWebhook(h, secret, []byte(`{"event":"report.received","report":"r2"}`), now)
		},
		"replayed": func() error { return verifyStandardWebhook(h, secret, body, now.Add(time.Hour)) },
	} {
		if check() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, key := range [][]byte{nil, []byte("short")} {
		_, err := api.NewServer(api.Config{Responses: api.Responses{ReportWebhook: "http://127.0.0.1:1/hook", WebhookSecret: key}})
		if err == nil || !strings.Contains(err.Error(), "signing secret") {
			t.Fatalf("webhook with secret %q: %v, want the signing-secret refusal", key, err)
		}
	}
}
