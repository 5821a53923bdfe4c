package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// Residency over gRPC on a split platform: a tenant's data is processed
// only where its residency allows. The decode node in
// ca-qc, its one prefill node in us-east. An admin sets the attacker
// tenant's residency with UpdateTenant (ledgered as tenant.updated); with
// ca-qc only, no prefill node complies, so a request is refused with 403
// before the prefill node is asked, and GetAttestation says so (compliant
// false, no reachable prefill node); widened to us-east it is served and
// the view lists the us-east node.
func TestResidencyGRPC(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Labels: attest.Labels{Region: "ca-qc", Tier: "shared"},
		Split: &platformtest.Split{Labels: attest.Labels{Region: "us-east", Tier: "shared"}}})
	conn, ctx := p.GRPC(t)
	adm, inf := adminv1.NewAdminServiceClient(conn), inferencev1.NewInferenceServiceClient(conn)
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	admin := as(p.Token(t, "victim", tenancy.ScopeAdmin))
	attacker := as(p.Token(t, "attacker", tenancy.ScopeInfer))
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	upd, err := adm.UpdateTenant(admin, &adminv1.UpdateTenantRequest{Id: "attacker", Residency: &adminv1.Residency{Regions: []string{"ca-qc"}}})
	if err != nil || len(upd.GetResidency().GetRegions()) != 1 || upd.GetResidency().GetRegions()[0] != "ca-qc" {
		t.Fatalf("update: %v (%v)", upd, err)
	}
	if _, err := adm.UpdateTenant(admin, &adminv1.UpdateTenantRequest{Id: "attacker", Residency: &adminv1.Residency{Tier: "Dedicated!"}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a malformed tier: got %v, want InvalidArgument", err)
	}
	a, err := inf.GetAttestation(attacker, &inferencev1.GetAttestationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if tp := a.GetTenant(); tp.GetTenant() != "attacker" || tp.GetCompliant() || len(tp.GetPrefill()) != 0 || tp.GetDecode().GetRegion() != "ca-qc" ||
		a.GetLabels().GetRegion() != "ca-qc" || len(tp.GetAllowedRegions()) != 1 || tp.GetZeroing() != "cross-tenant" || tp.GetIsolationTier() != "shared" {
		t.Fatalf("attestation view with no compliant prefill node: %v", a)
	}
	body := fmt.Sprintf(`{"model":%q,"prompt":"the quick brown fox","max_tokens":2}`, platformtest.Model)
	pl := &platform{Platform: p, srvURL: p.URL}
	if r := pl.post(t, "attacker", body); r.StatusCode != 403 {
		t.Fatalf("no compliant prefill node: got %d, want 403", r.StatusCode)
	}
	if n := p.Prefill.Calls(); n != 0 {
		t.Fatalf("the us-east prefill node was asked %d times for a ca-qc-only tenant", n)
	}

	if _, err := adm.UpdateTenant(admin, &adminv1.UpdateTenantRequest{Id: "attacker", Residency: &adminv1.Residency{Regions: []string{"ca-qc", "us-east"}}}); err != nil {
		t.Fatal(err)
	}
	if r := pl.post(t, "attacker", body); r.StatusCode != 200 {
		t.Fatalf("widened residency: got %d, want 200", r.StatusCode)
	}
	if n := p.Prefill.Calls(); n != 1 {
		t.Fatalf("widened residency: the prefill node was asked %d times, want 1", n)
	}
	a, err = inf.GetAttestation(attacker, &inferencev1.GetAttestationRequest{})
	if tp := a.GetTenant(); err != nil || !tp.GetCompliant() || len(tp.GetPrefill()) != 1 || tp.GetPrefill()[0].GetRegion() != "us-east" {
		t.Fatalf("attestation view after widening: %v (%v)", a, err)
	}
	// Both changes are on the record, and where the request went.
	updates := 0
	for _, r := range ledgeredSince(t, p, head.Seq, audit.KindTenantUpdated, "") {
		if r.Tenant == "attacker" {
			updates++
		}
	}
	if updates != 2 {
		t.Fatalf("got %d tenant.updated events for attacker, want 2", updates)
	}
	done := ledgeredSince(t, p, head.Seq, audit.KindRequestCompleted, "")
	if len(done) != 1 {
		t.Fatalf("got %d request.completed records, want 1", len(done))
	}
	if !strings.Contains(string(done[0].Payload), `"placement":{"node":`) ||
		!strings.Contains(string(done[0].Payload), `"prefill":{"node":`) || !strings.Contains(string(done[0].Payload), `"region":"us-east"`) {
		t.Fatalf("request.completed: %d records, %s", len(done), done[0].Payload)
	}
}

// A replay processes the prompt on this node: a tenant whose residency
// (changed since the request) no longer allows it is refused with 403, and
// nothing is replayed; allowed again, the replay runs.
func TestReplayRespectsResidency(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Pages: 64, ReplayPages: 16, Labels: attest.Labels{Region: "ca-qc"}})
	prompt := "abcabcabd hello hello"
	got := complete(t, p, "victim", mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 4, "temperature": 0}))
	setRegions := func(r ...string) {
		if _, err := p.Tenants.UpdateTenant(context.Background(), "victim", func(tn *tenancy.Tenant) error {
			tn.Residency.Regions = append([]string{}, r...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	replay := func() (int, []byte) {
		resp, b := send(t, "POST", p.URL+"/v1/requests/"+string(got.id)+"/replay", p.Token(t, "victim", tenancy.ScopeInfer), mustJSON(map[string]any{"prompt": prompt}))
		return resp.StatusCode, b
	}
	setRegions("eu-fr")
	if code, b := replay(); code != 403 || !strings.Contains(string(b), "residency") {
		t.Fatalf("replay outside the residency: %d %s, want 403", code, b)
	}
	setRegions("ca-qc")
	if code, b := replay(); code != 200 || !strings.Contains(string(b), string(audit.VerdictNotIsolationFailure)) {
		t.Fatalf("replay inside the residency: %d %s, want 200 not-isolation-failure", code, b)
	}
}
