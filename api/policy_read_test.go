package api_test

import (
	"encoding/json"
	"testing"

	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// TestAdminPolicyReadBack: GET /admin/v1/policies is the serving bundle,
// before and after a reload, for admin only (a tenant token gets 403).
func TestAdminPolicyReadBack(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	tenant := p.Token(t, "victim", tenancy.ScopeComplianceRead)
	type current struct {
		Revision string            `json:"revision"`
		Files    map[string]string `json:"files"`
	}
	read := func() current {
		t.Helper()
		code, _, body := call(t, p, "GET", "/admin/v1/policies", admin, "")
		var c current
		if err := json.Unmarshal(body, &c); code != 200 || err != nil {
			t.Fatalf("read: %d %s %v", code, body, err)
		}
		return c
	}
	if code, _, body := call(t, p, "GET", "/admin/v1/policies", tenant, ""); code != 403 {
		t.Errorf("a tenant token: %d %s, want 403", code, body)
	}
	files := policies.Shipped()
	if c := read(); c.Revision != p.Decider.Revision() || c.Revision != policies.Digest(c.Files) || len(c.Files) != len(files) {
		t.Errorf("before a reload: revision %s (serving %s), %d files, want the shipped %d", c.Revision, p.Decider.Revision(), len(c.Files), len(files))
	}
	files["decision.rego"] += "\n# read back\n"
	b, _ := json.Marshal(map[string]any{"files": files})
	if code, _, body := call(t, p, "POST", "/admin/v1/policies/reload", admin, string(b)); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	c := read()
	if c.Revision != policies.Digest(files) || c.Files["decision.rego"] != files["decision.rego"] {
		t.Errorf("after a reload: revision %s, want %s with the reloaded sources", c.Revision, policies.Digest(files))
	}
}
