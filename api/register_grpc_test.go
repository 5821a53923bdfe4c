package api_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// grpcConn serves p's gRPC API on loopback and returns a connection to it.
func grpcConn(t *testing.T, p *platformtest.Platform) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gs := p.Server.GRPCServer(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); gs.Stop(); cancel() })
	return conn
}

// TestIncidentDraftsGRPC is TestIncidentDraftsHTTP over real gRPC: the
// operator gets every draft, alpha only its own client draft (bravo not
// named), and the refusals carry the same codes as the HTTP statuses.
func TestIncidentDraftsGRPC(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo", "charlie"}})
	id, _ := coVictims(t, p)
	c := compliancev1.NewComplianceServiceClient(grpcConn(t, p))
	as := func(tenant cloison.TenantID, scopes ...tenancy.Scope) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+p.Token(t, tenant, scopes...))
	}
	op := as("alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	alpha := as("alpha", tenancy.ScopeComplianceRead)
	draft := func(ctx context.Context, kind, tenant string) (string, error) {
		d, err := c.GetIncidentDraft(ctx, &compliancev1.GetIncidentDraftRequest{Id: string(id), Kind: kind, Tenant: tenant})
		return d.GetText(), err
	}
	for _, kind := range []string{"cai", "persons"} {
		text, err := draft(op, kind, "")
		if fr, en := strings.Index(text, "FRANÇAIS"), strings.Index(text, "ENGLISH"); err != nil || fr < 0 || en < fr {
			t.Fatalf("operator %s: got %v %q", kind, err, text)
		}
	}
	if text, err := draft(op, "client", "bravo"); err != nil || !strings.Contains(text, "bravo — x@example.test") || strings.Contains(text, "alpha") {
		t.Fatalf("operator client draft for bravo: got %v %q", err, text)
	}
	if text, err := draft(alpha, "client", ""); err != nil || !strings.Contains(text, "alpha — x@example.test") || strings.Contains(text, "bravo") {
		t.Fatalf("alpha's client draft: got %v %q", err, text)
	}
	for _, tc := range []struct {
		name         string
		ctx          context.Context
		kind, tenant string
		want         codes.Code
	}{
		{"tenant cai", alpha, "cai", "", codes.PermissionDenied},
		{"tenant other's client draft", alpha, "client", "bravo", codes.NotFound},
		{"unaffected tenant", as("charlie", tenancy.ScopeComplianceRead), "client", "", codes.NotFound},
		{"operator without tenant", op, "client", "", codes.InvalidArgument},
		{"unknown kind", op, "public", "", codes.InvalidArgument},
		{"no compliance:read", as("alpha", tenancy.ScopeInfer), "client", "", codes.PermissionDenied},
	} {
		text, err := draft(tc.ctx, tc.kind, tc.tenant)
		if status.Code(err) != tc.want || text != "" {
			t.Errorf("%s: got %v %q, want %v and no draft", tc.name, err, text, tc.want)
		}
	}
}

// TestRegisterOrganisationGRPC is TestRegisterOrganisationAdmin over real
// gRPC: admin only, both parts required, the store's validation refused as
// INVALID_ARGUMENT, and a set version ledgered once (register.settings_set,
// its digest only, by the calling admin) and read back.
func TestRegisterOrganisationGRPC(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{})
	c := adminv1.NewAdminServiceClient(grpcConn(t, p))
	admin := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token(t, "victim", tenancy.ScopeAdmin))
	user := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token(t, "victim", tenancy.ScopeInfer, tenancy.ScopeComplianceRead))
	org := &adminv1.RegisterOrganization{Name: "Exemple inc.", Neq: "1234567890"}
	contact := &adminv1.RegisterContact{Name: "Élise Tremblay", Title: "Responsable PRP", Phone: "+1 514 555 0100", Email: "prp@exemple.qc.ca"}
	if _, err := c.SetRegisterSettings(user, &adminv1.SetRegisterSettingsRequest{Organization: org, Contact: contact}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("without admin: got %v, want PermissionDenied", err)
	}
	if _, err := c.GetRegisterSettings(user, &adminv1.GetRegisterSettingsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("read without admin: got %v, want PermissionDenied", err)
	}
	for _, bad := range []*adminv1.SetRegisterSettingsRequest{
		{Organization: org},
		{Contact: contact},
		{Organization: &adminv1.RegisterOrganization{Name: "X", Neq: "12"}, Contact: contact},
		{Organization: org, Contact: &adminv1.RegisterContact{Name: "Y", Email: "nope"}},
	} {
		if _, err := c.SetRegisterSettings(admin, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: got %v, want InvalidArgument", bad, err)
		}
	}
	set, err := c.SetRegisterSettings(admin, &adminv1.SetRegisterSettingsRequest{Organization: org, Contact: contact})
	if err != nil || set.GetVersion() != 1 || set.GetContact().GetName() != "Élise Tremblay" {
		t.Fatalf("set: got %v %v", set, err)
	}
	got, err := c.GetRegisterSettings(admin, &adminv1.GetRegisterSettingsRequest{})
	if err != nil || got.GetVersion() != 1 || got.GetOrganization().GetNeq() != "1234567890" || got.GetContact().GetEmail() != "prp@exemple.qc.ca" {
		t.Fatalf("get: got %v %v", got, err)
	}
	var events int
	if err := p.Ledger.Scan(ctx, 1, 0, func(r audit.Record) error {
		if r.Kind == audit.KindRegisterSettings {
			events++
			if strings.Contains(string(r.Payload), "Tremblay") || !strings.HasPrefix(string(r.Actor), "admin:") {
				t.Errorf("register.settings_set event %s by %s", r.Payload, r.Actor)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Errorf("%d register.settings_set events, want 1 (refused calls ledger nothing)", events)
	}
}
