package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestForgedTenantFailsClosed: the review's attack, end to end. With
// only cloisond's database credentials a tenant's concurrency is raised
// from 16 to 24 and its zeroing set to never: a column UPDATE is refused;
// row_apply with the attacker's own (unsigned) tenant.updated writes the
// row, and the node then refuses the tenant's requests (503, never served
// with the forged settings) and opens a register entry naming the tenant.
func TestForgedTenantFailsClosed(t *testing.T) {
	ctx := context.Background()
	q := tenancy.Quotas{MaxConcurrent: 16, KVPages: 256, TokensPerMinute: 10_000_000, MaxContext: 1 << 20}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Quotas: &q})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	body, _ := json.Marshal(map[string]any{"model": platformtest.Model, "prompt": "hello hello", "max_tokens": 2, "temperature": 0})
	if resp, b := send(t, "POST", p.URL+"/v1/completions", tok, string(body)); resp.StatusCode != 200 {
		t.Fatalf("before: got %d %s, want 200", resp.StatusCode, b)
	}
	rt := p.DB.RuntimePool(t)
	if _, err := rt.Exec(ctx, `UPDATE tenants SET max_concurrent = 24, zeroing = 'never' WHERE id = 'victim'`); err == nil {
		t.Fatal("column UPDATE as the runtime role: got nil, want permission denied")
	}
	var row map[string]any
	var prev int64
	if err := rt.QueryRow(ctx, `SELECT to_jsonb(t) - $1::text[], ledger_seq FROM tenants t WHERE id = 'victim'`, audit.RowStateExcluded).Scan(&row, &prev); err != nil {
		t.Fatal(err)
	}
	row["max_concurrent"], row["zeroing"] = 24, "never"
	st, err := audit.RowState(audit.RowTenants, uint64(prev), row)
	if err != nil {
		t.Fatal(err)
	}
	d := audit.Sum(st)
	payload, err := audit.Event{OccurredAt: time.Now(), Tenant: "victim", Actor: "admin:mallory",
		Payload: audit.TenantChange{Op: audit.TenantUpdated, Tier: "shared", State: &d}}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Exec(ctx, `SELECT * FROM row_apply($1, $2)`, payload, st); err != nil {
		t.Fatalf("row_apply as the runtime role: %v (the attack this test needs)", err)
	}
	resp, b := send(t, "POST", p.URL+"/v1/completions", tok, string(body))
	if resp.StatusCode != 503 {
		t.Fatalf("after the forgery: got %d %s, want 503", resp.StatusCode, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		files, err := p.Ledger.Incidents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			v := f.Versions[len(f.Versions)-1]
			if v.DetectionGroup == "isolation_violation/row_state:tenants/" && len(v.AffectedTenants) == 1 && v.AffectedTenants[0] == "victim" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no incident for the forged tenant among %d", len(files))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
