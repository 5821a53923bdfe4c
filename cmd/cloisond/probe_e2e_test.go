package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/node/probe"
	"github.com/cloison/cloison/tenancy"
)

// cloisonctl probe against a real cloisond: a healthy deployment passes —
// the attestation aligns, over-long and edge-length prompts are refused with
// non-200 errors, within-context ones are served, aborted streams and a
// flood leave no canary of tenant A in tenant B's outputs, and the
// context-bag oracle sees nothing foreign.
func TestE2EProbe(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "alpha", nil)
	createTenant(t, db.AdminURL, "bravo", nil)
	rep, err := probe.Run(context.Background(), probe.Config{URL: n.base, Model: modelID, Bag: true, Canaries: 4, Flood: 8, Aborts: 3,
		TokenA: n.token("alpha", time.Hour, tenancy.ScopeInfer), TokenB: n.token("bravo", time.Hour, tenancy.ScopeInfer), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("findings on a healthy deployment: %+v", rep.Findings)
	}
	if rep.Refused == 0 || rep.Served == 0 || rep.Aborted != 3 || len(rep.Canaries) != 8 {
		t.Fatalf("the probe did not exercise refusals, service, aborts and canaries: %+v", rep)
	}
	// The pool holds no lease once the probe is done (aborted streams freed theirs).
	admin := n.token("alpha", time.Hour, tenancy.ScopeAdmin)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := n.do("GET", "/admin/v1/pool", admin, nil)
		if r.status == 200 && bytes.Contains(r.body, []byte(`"Leased":0`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pages still leased after the probe: %s", r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cloisonctl probe against a split deployment of real processes: a decode
// node serving the API and a prefill node behind it. The probe reads the
// prefill node's attestation through the decode node's and passes.
func TestE2EProbeSplit(t *testing.T) {
	c := newCluster(t, "prefill-1", "decode")
	db := pgtest.New(t)
	p := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey)
	n := c.decodeNode(t, db.AdminURL, p)
	createTenant(t, db.AdminURL, "alpha", nil)
	createTenant(t, db.AdminURL, "bravo", nil)
	rep, err := probe.Run(context.Background(), probe.Config{URL: n.base, Model: modelID, Bag: true, Canaries: 4, Flood: 6, Aborts: 2,
		TokenA: n.token("alpha", time.Hour, tenancy.ScopeInfer), TokenB: n.token("bravo", time.Hour, tenancy.ScopeInfer), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("findings on a healthy split deployment: %+v", rep.Findings)
	}
	peers, _ := rep.Attestation["prefill"].([]any)
	if len(peers) != 1 || rep.Refused == 0 || rep.Served == 0 || rep.Aborted != 2 {
		t.Fatalf("the probe did not see the prefill node or exercise the deployment: %+v", rep)
	}
	if !strings.Contains(p.logs.String(), `"msg":"prefill"`) {
		t.Fatalf("no prompt was prefilled on the prefill node:\n%s", p.logs)
	}
}
