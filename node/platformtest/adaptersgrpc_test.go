package platformtest_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// The admin gRPC adapter methods are the HTTP routes' calls: the admin
// scope required, the same refusals, the adapter served to its tenant only
// once registered and no longer once unregistered, both ledgered (signed,
// under the tenant, with the digest; the path recorded for a restart).
func TestTenantAdaptersGRPC(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	adDigest := writeRandomWithLoRA(t, dir)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"a", "b"}, ModelDir: dir,
		Models: []node.ModelFile{{Path: filepath.Join(dir, "rnd.gguf"), Name: "rnd"}}})
	sys := tenancy.WithActor(ctx, "admin:test")
	if _, err := p.Tenants.UpdateTenant(sys, "a", func(tn *tenancy.Tenant) error {
		tn.AllowedModels = []string{platformtest.Model, "rnd"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	conn, gctx := p.GRPC(t)
	adm := adminv1.NewAdminServiceClient(conn)
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+token)
	}
	ta, tb := p.Token(t, "a", tenancy.ScopeInfer), p.Token(t, "b", tenancy.ScopeInfer)
	admin := as(p.Token(t, "a", tenancy.ScopeAdmin))
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	good := &adminv1.RegisterAdapterRequest{Tenant: "a", Name: "sup", Path: "lora.gguf", Model: "rnd"}
	if _, err := adm.RegisterAdapter(as(ta), good); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("register without the admin scope: %v, want PermissionDenied", err)
	}
	if _, err := adm.ListAdapters(as(ta), &adminv1.ListAdaptersRequest{Tenant: "a"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("list without the admin scope: %v, want PermissionDenied", err)
	}
	for _, c := range []struct {
		req  *adminv1.RegisterAdapterRequest
		want codes.Code
	}{
		{&adminv1.RegisterAdapterRequest{Tenant: "a", Name: "sup", Path: "../lora.gguf", Model: "rnd"}, codes.InvalidArgument},
		{&adminv1.RegisterAdapterRequest{Tenant: "a", Name: "sup", Path: "rnd.gguf", Model: "rnd"}, codes.InvalidArgument},
		{&adminv1.RegisterAdapterRequest{Tenant: "b", Name: "sup", Path: "lora.gguf", Model: "rnd"}, codes.InvalidArgument},
		{&adminv1.RegisterAdapterRequest{Tenant: "nobody", Name: "sup", Path: "lora.gguf", Model: "rnd"}, codes.NotFound},
		{&adminv1.RegisterAdapterRequest{Tenant: "a", Name: "sup", Path: "lora.gguf", Model: "nope"}, codes.NotFound},
	} {
		if _, err := adm.RegisterAdapter(admin, c.req); status.Code(err) != c.want {
			t.Fatalf("register %v: %v, want %v", c.req, err, c.want)
		}
	}
	got, err := adm.RegisterAdapter(admin, good)
	if err != nil || got.GetDigest() != adDigest || got.GetId() != "rnd:sup" || got.GetTenant() != "a" || got.GetRank() != 8 {
		t.Fatalf("register: %v %v", got, err)
	}
	if _, err := adm.RegisterAdapter(admin, good); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second register: %v, want AlreadyExists", err)
	}
	list, err := adm.ListAdapters(admin, &adminv1.ListAdaptersRequest{Tenant: "a"})
	if err != nil || len(list.GetAdapters()) != 1 || list.GetAdapters()[0].GetDigest() != adDigest {
		t.Fatalf("a's adapters: %v %v", list, err)
	}
	if list, err := adm.ListAdapters(admin, &adminv1.ListAdaptersRequest{Tenant: "b"}); err != nil || len(list.GetAdapters()) != 0 {
		t.Fatalf("b's adapters: %v %v", list, err)
	}
	complete := func(tok string) int {
		code, _ := call(t, p, "POST", "/v1/completions", tok, `{"model":"rnd:sup","prompt":"ok","max_tokens":4,"temperature":0}`)
		return code
	}
	if code := complete(ta); code != 200 {
		t.Fatalf("a under its adapter: %d", code)
	}
	if code := complete(tb); code != 404 {
		t.Fatalf("b under a's adapter: %d, want 404", code)
	}

	if _, err := adm.UnregisterAdapter(admin, &adminv1.UnregisterAdapterRequest{Tenant: "b", Name: "sup", Model: "rnd"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unregister b's (none): %v, want NotFound", err)
	}
	un, err := adm.UnregisterAdapter(admin, &adminv1.UnregisterAdapterRequest{Tenant: "a", Name: "sup", Model: "rnd"})
	if err != nil || un.GetDigest() != adDigest {
		t.Fatalf("unregister: %v %v", un, err)
	}
	if code := complete(ta); code != 404 {
		t.Fatalf("a under its unregistered adapter: %d, want 404", code)
	}
	if list, err := adm.ListAdapters(admin, &adminv1.ListAdaptersRequest{Tenant: "a"}); err != nil || len(list.GetAdapters()) != 0 {
		t.Fatalf("a's adapters once unregistered: %v %v", list, err)
	}

	var kinds []audit.Kind
	if err := p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		if r.Kind != audit.KindAdapterRegistered && r.Kind != audit.KindAdapterUnregistered {
			return nil
		}
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			return err
		}
		kinds = append(kinds, r.Kind)
		if r.Tenant != "a" || !strings.Contains(string(env.Data), adDigest) || env.Sig == "" {
			t.Errorf("%s: tenant %q, payload %s, signed %v", r.Kind, r.Tenant, env.Data, env.Sig != "")
		}
		if r.Kind == audit.KindAdapterRegistered && !strings.Contains(string(env.Data), `"path":"lora.gguf"`) {
			t.Errorf("adapter.registered records no path: %s", env.Data)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, []audit.Kind{audit.KindAdapterRegistered, audit.KindAdapterUnregistered}) {
		t.Fatalf("adapter events %v", kinds)
	}
}
