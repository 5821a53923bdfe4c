package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/testwait"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// Residency, in a split deployment of real processes: a decode node in
// ca-qc with one prefill node in ca-qc and one in us-east. A tenant whose
// residency allows only ca-qc has every prompt prefilled in ca-qc — the
// us-east node's own log shows none of its requests, while a tenant
// without a residency is spread over both (so the filter, not chance,
// keeps the first off us-east). A tenant no node can serve (eu-fr only, or
// a node tier only the decode node has) is refused with 403 permission_denied before any
// prefill node hears of it. The ledger's request.completed records where
// each request was processed, GET /v1/attestation tells the tenant, and an
// admin change of the residency (ledgered) applies to the next request.
func TestE2EResidencySplitDeployment(t *testing.T) {
	c := newCluster(t, "prefill-qc", "prefill-us", "decode", "prefill-liar")
	// The CA signs each node's labels into its certificate; a node attests
	// exactly those.
	c.label(t, "prefill-qc", pki.RolePrefill, pki.Labels{Region: "ca-qc", Tier: "shared"})
	c.label(t, "prefill-us", pki.RolePrefill, pki.Labels{Region: "us-east", Tier: "shared"})
	c.label(t, "decode", pki.RoleDecode, pki.Labels{Region: "ca-qc", Tier: "dedicated"})
	c.label(t, "prefill-liar", pki.RolePrefill, pki.Labels{Region: "us-east", Tier: "shared"})
	db := pgtest.New(t)
	// A node whose flags claim labels its certificate does not name does
	// not start.
	if logs := startNodeExpectExit(t, db.AdminURL, t.TempDir(), c.flags("prefill-liar", "prefill", c.clusterKey, "--prefill-addr", "127.0.0.1:0",
		"--node-region", "ca-qc", "--node-tier", "shared")...); !strings.Contains(logs, `names region \"us-east\" tier \"shared\", but --node-region is \"ca-qc\"`) {
		t.Fatalf("a node claiming a region its certificate does not name:\n%s", logs)
	}
	pqc := c.prefillNode(t, db.AdminURL, "prefill-qc", c.clusterKey, "--node-region", "ca-qc", "--node-tier", "shared")
	pus := c.prefillNode(t, db.AdminURL, "prefill-us", c.clusterKey, "--node-region", "us-east", "--node-tier", "shared")
	// A dedicated tenant stored before the decode node starts: its
	// reservation is in the node's attestation, and no other tenant's view
	// may show it.
	// Signed with the decode node's log key, made first: a node refuses a
	// tenant whose last event its key did not sign.
	logKey := filepath.Join(t.TempDir(), "log.key")
	if _, err := keyfile.Write(logKey); err != nil {
		t.Fatal(err)
	}
	nodeLogKeys.Store(db.AdminURL, nodeLogKey{file: logKey})
	createTenant(t, db.AdminURL, "secretco", func(tn *tenancy.Tenant) { tn.Tier, tn.Quotas.KVPages = isolation.TierDedicated, 8 })
	d := startNode(t, db.AdminURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey, "--log-key-file", logKey, "--transfer-addr", "127.0.0.1:0",
		"--prefill-peers", pqc.grpcAddr+","+pus.grpcAddr, "--node-region", "ca-qc", "--node-tier", "dedicated")...)
	residency := func(regions []string, tier string) func(*tenancy.Tenant) {
		return func(tn *tenancy.Tenant) { tn.Residency = tenancy.Residency{Regions: regions, Tier: tier} }
	}
	createTenant(t, db.AdminURL, "qc", residency([]string{"ca-qc"}, ""))
	createTenant(t, db.AdminURL, "anywhere", residency([]string{}, ""))
	createTenant(t, db.AdminURL, "eu", residency([]string{"eu-fr"}, ""))
	createTenant(t, db.AdminURL, "ded", residency([]string{"ca-qc"}, "dedicated"))
	// prefilled counts the prefills a prefill node itself logged for tenant.
	prefilled := func(p *daemon, tenant string) int {
		n := 0
		for _, line := range strings.Split(p.logs.String(), "\n") {
			if strings.Contains(line, `"msg":"prefill"`) && strings.Contains(line, `"tenant":"`+tenant+`"`) {
				n++
			}
		}
		return n
	}
	var count int
	complete := func(tenant cloison.TenantID, n int, wantStatus int, wantCode string) {
		t.Helper()
		tok := d.token(tenant, time.Hour, tenancy.ScopeInfer)
		for range n {
			count++ // a new prompt each time: a repeat could be served from the decode node's prefix cache
			st, _, code := completionText(t, d, tok, strconv.Itoa(count)+" the quick brown fox jumps", 4)
			if st != wantStatus || (wantCode != "" && code != wantCode) {
				t.Fatalf("tenant %s: got %d %q, want %d %q\ndecode:\n%s", tenant, st, code, wantStatus, wantCode, d.logs)
			}
		}
	}

	complete("qc", 6, 200, "")
	complete("anywhere", 6, 200, "")
	// A prefill node logs its prefill as the transfer ends, so the last
	// line may be written after the decode node answered: wait for all 12.
	testwait.Eventually(t, 10*time.Second, func() bool {
		return prefilled(pqc, "qc")+prefilled(pus, "qc")+prefilled(pqc, "anywhere")+prefilled(pus, "anywhere") >= 12
	}, "12 prefills logged by the two prefill nodes")
	if got := prefilled(pus, "qc"); got != 0 {
		t.Errorf("the us-east prefill node received %d of the ca-qc tenant's prompts, want 0", got)
	}
	if got := prefilled(pqc, "qc"); got != 6 {
		t.Errorf("the ca-qc prefill node received %d of the ca-qc tenant's 6 prompts, want 6", got)
	}
	// Without a residency, round robin reaches both: the us-east node is
	// live and would have been asked but for the filter.
	if a, b := prefilled(pqc, "anywhere"), prefilled(pus, "anywhere"); a == 0 || b == 0 || a+b != 6 {
		t.Errorf("a tenant without residency: ca-qc %d, us-east %d prefills, want both used, 6 in all", a, b)
	}

	// No compliant node: 403 before any prefill node is asked — eu-fr: not
	// this node; dedicated in ca-qc: this node, but no prefill node (the
	// one in ca-qc is shared), and a prompt is never prefilled locally
	// instead nor sent elsewhere.
	complete("eu", 2, 403, string(cloison.CodePermissionDenied))
	complete("ded", 2, 403, string(cloison.CodePermissionDenied))
	for _, p := range []*daemon{pqc, pus} {
		if n := prefilled(p, "eu") + prefilled(p, "ded"); n != 0 {
			t.Errorf("a refused tenant's prompt reached a prefill node %d times", n)
		}
	}

	// The tenant's own view: its isolation, its residency, this node's
	// labels, only the prefill nodes it may reach, and no other tenant.
	var view struct {
		Reserved []struct {
			Tenant string `json:"tenant"`
		} `json:"reserved"`
		Tenant struct {
			Tenant        string `json:"tenant"`
			IsolationTier string `json:"isolation_tier"`
			Zeroing       string `json:"zeroing"`
			Residency     struct {
				Regions []string `json:"regions"`
			} `json:"residency"`
			Node struct {
				Region, Tier string
			} `json:"node"`
			Prefill []struct {
				Region, Tier string
			} `json:"prefill_nodes"`
			Compliant bool `json:"compliant"`
		} `json:"tenant"`
	}
	r := d.do("GET", "/v1/attestation", d.token("qc", time.Hour, tenancy.ScopeInfer), nil)
	if err := json.Unmarshal(r.body, &view); err != nil || r.status != 200 {
		t.Fatalf("attestation: %d %s (%v)", r.status, r.body, err)
	}
	tv := view.Tenant
	if tv.Tenant != "qc" || tv.IsolationTier != "shared" || tv.Zeroing != "cross-tenant" || !tv.Compliant || tv.Node.Region != "ca-qc" ||
		len(tv.Prefill) != 1 || tv.Prefill[0].Region != "ca-qc" || len(tv.Residency.Regions) != 1 {
		t.Errorf("the ca-qc tenant's attestation view: %s", r.body)
	}
	for _, res := range view.Reserved {
		if res.Tenant != "qc" {
			t.Errorf("the attestation view names another tenant: %s", r.body)
		}
	}
	if strings.Contains(string(r.body), "secretco") {
		t.Errorf("the ca-qc tenant's view names the dedicated tenant: %s", r.body)
	}
	if r := d.do("GET", "/v1/attestation", d.token("secretco", time.Hour, tenancy.ScopeInfer), nil); !strings.Contains(string(r.body), `"reserved":[{"tenant":"secretco","pages":8}]`) {
		t.Errorf("the dedicated tenant's own view lacks its reservation: %s", r.body)
	}
	r = d.do("GET", "/v1/attestation", d.token("eu", time.Hour, tenancy.ScopeInfer), nil)
	if err := json.Unmarshal(r.body, &view); err != nil || view.Tenant.Compliant || len(view.Tenant.Prefill) != 0 {
		t.Errorf("the eu-fr tenant's view: %s (%v), want compliant false and no prefill node", r.body, err)
	}

	// An admin widens eu's residency to ca-qc (ledgered with the change):
	// served from the next request, and in ca-qc only.
	admin := d.token("qc", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	if r := d.do("PATCH", "/admin/v1/tenants/eu", admin, []byte(`{"residency": {"regions": ["eu-fr", "ca-qc"], "tier": ""}}`)); r.status != 200 {
		t.Fatalf("residency update: %d %s", r.status, r.body)
	}
	if r := d.do("PATCH", "/admin/v1/tenants/eu", admin, []byte(`{"residency": {"regions": ["CA QC"]}}`)); r.status != 400 {
		t.Fatalf("a malformed region: %d %s, want 400", r.status, r.body)
	}
	complete("eu", 4, 200, "")
	// A prefill node counts a prompt once its transfer is done, which may
	// be after the decode node answered.
	testwait.Eventually(t, 10*time.Second, func() bool { return prefilled(pqc, "eu")+prefilled(pus, "eu") >= 4 }, "eu's prompts counted")
	if a, b := prefilled(pqc, "eu"), prefilled(pus, "eu"); a != 4 || b != 0 {
		t.Errorf("after the update: ca-qc %d, us-east %d of eu's 4 prompts, want 4 and 0", a, b)
	}

	// The ledger shows where each request was processed.
	placed, updated, attested := map[string]int{}, false, false
	for _, row := range d.ledgerRows(admin) {
		data := payloadData(row)
		switch row["kind"] {
		case "request.completed":
			pl, _ := data["placement"].(map[string]any)
			pre, _ := pl["prefill"].(map[string]any)
			if pl["region"] != "ca-qc" || pl["node"] == nil {
				t.Errorf("request.completed placement %v, want the decode node in ca-qc", pl)
			}
			if pre != nil {
				placed[row["tenant"].(string)+"@"+pre["region"].(string)]++
			}
		case "tenant.updated":
			updated = true
		case "capacity.attestation":
			pre, _ := data["prefill"].([]any)
			regions := map[any]bool{}
			for _, p := range pre {
				regions[p.(map[string]any)["region"]] = true
			}
			attested = data["region"] == "ca-qc" && data["tier"] == "dedicated" && len(pre) == 2 && regions["ca-qc"] && regions["us-east"]
		}
	}
	if placed["qc@ca-qc"] != 6 || placed["qc@us-east"] != 0 || placed["eu@ca-qc"] != 4 || placed["anywhere@us-east"] == 0 {
		t.Errorf("ledgered placements %v", placed)
	}
	if !attested {
		t.Error("capacity.attestation does not record the nodes' labels")
	}
	if !updated {
		t.Error("the residency update was not ledgered (tenant.updated)")
	}
}
