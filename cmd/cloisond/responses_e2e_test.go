package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// Stored responses on the real binary: a streamed completion's request.completed
// holds its keyed digests (under the --served-digest-key id), the tenant
// verifies what it was served, reports it and replays it on the
// --replay-pages engine; another tenant gets 404 on all three.
func TestE2EVerifyReportReplay(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles(), "--replay-pages", "32", "--served-digest-key", "sd-2026")
	createTenant(t, db.AdminURL, "acme", nil)
	createTenant(t, db.AdminURL, "globex", nil)
	acme := n.token("acme", time.Hour, tenancy.ScopeInfer)
	globex := n.token("globex", time.Hour, tenancy.ScopeInfer)
	r := n.do("POST", "/v1/completions", acme, completion("aaab", 6, true))
	texts, _, done, _ := sse(t, r.body)
	if r.status != 200 || !done {
		t.Fatalf("stream: %d %s", r.status, r.body)
	}
	id := r.header.Get("X-Request-Id")
	body, _ := json.Marshal(map[string]any{"prompt": "aaab", "completion": strings.Join(texts, "")})
	v := n.do("POST", "/v1/requests/"+id+"/verify", acme, body)
	var res struct {
		Match bool `json:"match"`
		Entry struct {
			Payload json.RawMessage `json:"payload"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(v.body, &res); err != nil || v.status != 200 || !res.Match || !strings.Contains(string(res.Entry.Payload), `"key":"sd-2026"`) {
		t.Fatalf("verify: %d %s", v.status, v.body)
	}
	if g := n.do("POST", "/v1/requests/"+id+"/verify", globex, body); g.status != 404 {
		t.Fatalf("globex verify: %d %s", g.status, g.body)
	}
	rep := n.do("POST", "/v1/reports", acme, []byte(`{"request":"`+id+`","reason":"unexpected-response"}`))
	if rep.status != 201 || !strings.Contains(string(rep.body), "under_assessment") {
		t.Fatalf("report: %d %s", rep.status, rep.body)
	}
	if g := n.do("POST", "/v1/reports", globex, []byte(`{"request":"`+id+`","reason":"other"}`)); g.status != 404 {
		t.Fatalf("globex report: %d %s", g.status, g.body)
	}
	rp := n.do("POST", "/v1/requests/"+id+"/replay", acme, []byte(`{"prompt":"aaab"}`))
	if rp.status != 200 || !strings.Contains(string(rp.body), `"verdict":"not-isolation-failure"`) {
		t.Fatalf("replay: %d %s", rp.status, rp.body)
	}
	if g := n.do("POST", "/v1/requests/"+id+"/replay", globex, []byte(`{"prompt":"aaab"}`)); g.status != 404 {
		t.Fatalf("globex replay: %d %s", g.status, g.body)
	}
}
