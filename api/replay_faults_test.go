//go:build faults

package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// Replay, both verdicts, with the context-bag oracle (a model that can only
// emit tokens of the KV it attends over) on a deployment with the 2026
// placeholder bug and the defences that would stop it switched off (fill
// checks, arena checks, scrubbing): the attacker's over-long prompt is
// decoded over pages the victim's canaries left, and its answer carries
// the victim's tokens with HTTP 200. The attacker reports it; the replay,
// alone on the replay engine's own pool, produces what the prompt alone
// produces, differs from what was served, and confirms the incident. The
// victim's own (clean) request replays to exactly what it was served: not
// an isolation failure, its report closed.
func TestReplayVerdicts(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Pages: 64, PlaceholderOver: 32, SkipFillCheck: true, SkipKernelCheck: true, SkipScrub: true, ReplayPages: 64})
	canary := strings.Repeat("QZXW", 24)
	// Long enough that its reservation spans most of the pool, so pages
	// the canaries left are in it.
	attack := strings.Repeat("ab", 450)
	var clean, leak served
	for try := 0; try < 5 && leak.id == ""; try++ {
		for range 6 {
			clean = complete(t, p, "victim", mustJSON(map[string]any{"model": platformtest.Model, "prompt": canary, "max_tokens": 8, "temperature": 0}))
		}
		got := complete(t, p, "attacker", mustJSON(map[string]any{"model": platformtest.Model, "prompt": attack, "max_tokens": 8, "temperature": 0}))
		if strings.ContainsAny(got.text, "QZXW") {
			leak = got
		}
	}
	if leak.id == "" {
		t.Fatal("the oracle saw no leak with the defences off: the test cannot tell the verdicts apart")
	}
	t.Logf("served to the attacker: %q (its prompt holds only a and b)", leak.text)

	replay := func(tenant cloison.TenantID, id cloison.RequestID, prompt string) api.ReplayResult {
		t.Helper()
		tok := p.Token(t, tenant, tenancy.ScopeInfer)
		resp, b := send(t, "POST", p.URL+"/v1/reports", tok, mustJSON(map[string]any{"request": id, "reason": "foreign-content", "foreign_text": leak.text}))
		if resp.StatusCode != 201 {
			t.Fatalf("report: %d %s", resp.StatusCode, b)
		}
		resp, b = send(t, "POST", p.URL+"/v1/requests/"+string(id)+"/replay", tok, mustJSON(map[string]any{"prompt": prompt}))
		var r api.ReplayResult
		if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("replay: %d %s", resp.StatusCode, b)
		}
		t.Logf("%s: verdict %s, replay %d µs, original %d µs, cost %.2f× the original", id, r.Verdict, r.ReplayMicros, r.OriginalMicros,
			float64(r.ReplayMicros)/float64(r.OriginalMicros))
		return r
	}
	status := func(inc audit.Name) audit.StoredVersion {
		f, err := p.Ledger.Incident(context.Background(), inc)
		if err != nil {
			t.Fatal(err)
		}
		return f.Versions[len(f.Versions)-1]
	}

	r := replay("attacker", leak.id, attack)
	if r.Verdict != audit.VerdictConfirmed {
		t.Fatalf("leaking request: verdict %s (%s), want confirmed", r.Verdict, r.Reason)
	}
	if v := status(r.Incident); v.Status != audit.IncidentOpen || v.Assessment.Likelihood == "" || !strings.Contains(v.Circumstances, "differs") {
		t.Fatalf("confirmed entry %+v: want open, assessment prefilled", v.IncidentVersion)
	}

	r = replay("victim", clean.id, canary)
	if r.Verdict != audit.VerdictNotIsolationFailure {
		t.Fatalf("clean request: verdict %s (%s), want not-isolation-failure", r.Verdict, r.Reason)
	}
	if v := status(r.Incident); v.Status != audit.IncidentClosed || !strings.Contains(v.Circumstances, "not an isolation failure") {
		t.Fatalf("clean entry %+v: want closed as not an isolation failure", v.IncidentVersion)
	}
	if err := p.Ledger.VerifyRegister(context.Background()); err != nil {
		t.Fatal(err)
	}
}
