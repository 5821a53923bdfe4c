package api_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// ledgeredSince returns the ledger's records after seq of kind, by actor
// (any actor when it is empty).
func ledgeredSince(t *testing.T, p *platformtest.Platform, seq uint64, kind audit.Kind, actor audit.Name) []audit.Record {
	t.Helper()
	var out []audit.Record
	err := p.Ledger.Scan(context.Background(), seq+1, 0, func(r audit.Record) error {
		if r.Kind == kind && (actor == "" || r.Actor == actor) {
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Policy reloads are audited: a reload is ledgered (policy.reloaded,
// the bundle's digest, the admin who made it) before the new bundle
// serves; with the ledger down the reload is refused (503) and the old
// bundle keeps serving.
func TestAdminPolicyReloadLedgered(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	bundle := func(marker string) string {
		files := policies.Shipped()
		files["decision.rego"] += "\n# " + marker + "\n" // another digest, the same decisions
		b, err := json.Marshal(map[string]any{"files": files})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := p.Decider.Revision()
	code, _, body := call(t, p, "POST", "/admin/v1/policies/reload", admin, bundle("first"))
	var got struct{ Revision string }
	_ = json.Unmarshal(body, &got)
	if code != 200 || got.Revision == old || got.Revision != p.Decider.Revision() {
		t.Fatalf("reload: got %d %s (serving %s), want 200 with the new revision serving (was %s)", code, body, p.Decider.Revision(), old)
	}
	recs := ledgeredSince(t, p, head.Seq, audit.KindPolicyReloaded, "")
	if len(recs) != 1 {
		t.Fatalf("got %d policy.reloaded events, want 1", len(recs))
	}
	env, err := audit.DecodeEnvelope(recs[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := env.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	want, err := audit.ParseDigest(strings.TrimPrefix(got.Revision, "sha256:"))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := pl.(*audit.PolicyReloaded); !ok || r.Revision != want || r.Actor != "admin:test-victim" {
		t.Fatalf("policy.reloaded: got %+v, want revision %s by admin:test-victim", pl, got.Revision)
	}

	// The ledger is down: the reload is refused and changes nothing.
	serving := p.Decider.Revision()
	_ = p.Ledger.Close()
	if code, eb, body := call(t, p, "POST", "/admin/v1/policies/reload", admin, bundle("second")); code != 503 || eb.Error.Code != string(cloison.CodeUnavailable) {
		t.Fatalf("reload with the ledger down: got %d %s, want 503 unavailable", code, body)
	}
	if p.Decider.Revision() != serving {
		t.Fatalf("revision after a refused reload: got %s, want %s (unchanged)", p.Decider.Revision(), serving)
	}
}

// TestAdminGRPCChangesAndRevocations: admin changes take effect at once
// and are ledgered, over gRPC (as
// TestAdminChangesAndRevocations over HTTP): rotation within the minimum
// interval is refused with the keys unchanged; one key is retired; a
// tenant's quotas and models are updated; an API client and a single token
// are revoked and stop verifying at once; each change is in the ledger, by
// the admin who made it.
func TestAdminGRPCChangesAndRevocations(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := platformtest.New(t, platformtest.Options{})
	gs := p.Server.GRPCServer(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	adm, inf := adminv1.NewAdminServiceClient(conn), inferencev1.NewInferenceServiceClient(conn)
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	admin := as(p.Token(t, "victim", tenancy.ScopeAdmin))
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantCode := func(what string, err error, c codes.Code, code cloison.Code) {
		t.Helper()
		got, _ := rpcerr.Code(err)
		if status.Code(err) != c || got != code {
			t.Fatalf("%s: got %v (%s), want %v %s", what, err, got, c, code)
		}
	}

	before := p.Ring.Keys()
	_, err = adm.RotateKeys(admin, &adminv1.RotateKeysRequest{})
	wantCode("quick rotation", err, codes.AlreadyExists, cloison.CodeConflict)
	if got := p.Ring.Keys(); len(got) != len(before) || got[0].State != before[0].State || got[0].ID != before[0].ID {
		t.Fatalf("keys after a refused rotation: got %+v, want %+v", got, before)
	}
	var next, current string
	for _, k := range before {
		switch k.State {
		case tenancy.KeyNext:
			next = k.ID
		case tenancy.KeyCurrent:
			current = k.ID
		}
	}
	keys, err := adm.RetireKey(admin, &adminv1.RetireKeyRequest{Kid: next})
	if err != nil {
		t.Fatalf("retire next: %v", err)
	}
	for _, k := range keys.GetKeys() {
		if k.GetKid() == next && k.GetState() != "retired" {
			t.Fatalf("retire next: got state %s, want retired", k.GetState())
		}
	}
	_, err = adm.RetireKey(admin, &adminv1.RetireKeyRequest{Kid: current})
	wantCode("retire current", err, codes.AlreadyExists, cloison.CodeConflict)

	three := int64(3)
	upd, err := adm.UpdateTenant(admin, &adminv1.UpdateTenantRequest{Id: "attacker", Quotas: &adminv1.QuotasUpdate{MaxConcurrent: &three},
		AllowedModels: &adminv1.AllowedModels{Models: []string{platformtest.Model}}})
	if err != nil || upd.GetQuotas().GetMaxConcurrent() != 3 || len(upd.GetAllowedModels()) != 1 {
		t.Fatalf("update: got %v (%v), want max_concurrent 3 and one model", upd, err)
	}
	one := int64(1)
	_, err = adm.UpdateTenant(admin, &adminv1.UpdateTenantRequest{Id: "attacker", Quotas: &adminv1.QuotasUpdate{KvPages: &one}})
	wantCode("kv_pages update", err, codes.InvalidArgument, cloison.CodeInvalid)

	if _, err := adm.CreateClient(admin, &adminv1.CreateClientRequest{Client: &adminv1.Client{Id: "test-attacker", Tenant: "attacker", Name: "a", Scopes: []string{"infer"}}}); err != nil {
		t.Fatalf("create client: %v", err)
	}
	user := as(p.Token(t, "attacker", tenancy.ScopeInfer)) // subject test-attacker
	if _, err := inf.ListModels(user, &inferencev1.ListModelsRequest{}); err != nil {
		t.Fatalf("client token before revocation: %v", err)
	}
	if c, err := adm.RevokeClient(admin, &adminv1.RevokeClientRequest{Id: "test-attacker"}); err != nil || c.GetStatus() != "revoked" {
		t.Fatalf("revoke client: got %v (%v), want revoked", c, err)
	}
	_, err = inf.ListModels(user, &inferencev1.ListModelsRequest{})
	wantCode("revoked client's token", err, codes.Unauthenticated, cloison.CodeUnauthenticated)

	oneTok, other := p.Token(t, "victim", tenancy.ScopeInfer), p.Token(t, "victim", tenancy.ScopeInfer)
	var cl tenancy.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(oneTok, &cl); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.RevokeToken(admin, &adminv1.RevokeTokenRequest{Jti: cl.ID, Issuer: cl.Issuer,
		ExpiresAt: cl.ExpiresAt.Time.Format(time.RFC3339), Tenant: "victim"}); err != nil {
		t.Fatalf("revoke token: %v", err)
	}
	_, err = inf.ListModels(as(oneTok), &inferencev1.ListModelsRequest{})
	wantCode("revoked token", err, codes.Unauthenticated, cloison.CodeUnauthenticated)
	if _, err := inf.ListModels(as(other), &inferencev1.ListModelsRequest{}); err != nil {
		t.Fatalf("another token of the subject: %v", err)
	}

	for _, k := range []audit.Kind{audit.KindKeyRevoked, audit.KindTenantUpdated, audit.KindClientCreated, audit.KindClientRevoked, audit.KindTokenRevoked} {
		if len(ledgeredSince(t, p, head.Seq, k, "admin:test-victim")) == 0 {
			t.Errorf("ledger: no %s event by admin:test-victim", k)
		}
	}
}
