package platformtest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestAdapterAttestation: a model's attestation names the LoRA adapters
// loaded for it, by digest, without telling one tenant of another's. A
// tenant's GET /v1/attestation?model=M (and gRPC GetAttestation) lists its
// own adapters of M only, with no tenant id, and none of another model; an
// admin's pool status (HTTP and gRPC) lists every served model's pool, each
// attestation with every tenant's adapters of it and their tenants.
func TestAdapterAttestation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	aDigest := writeRandomWithLoRA(t, dir) // rnd.gguf, lora.gguf
	base, err := os.ReadFile(filepath.Join(dir, "rnd.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	bDigest := writeLoRAOf(t, base, dir, "lora-b.gguf", 9)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"a", "b"}, ModelDir: dir,
		Models: []node.ModelFile{{Path: filepath.Join(dir, "rnd.gguf"), Name: "rnd"}}})
	sys := tenancy.WithActor(ctx, "admin:test")
	for _, id := range []cloison.TenantID{"a", "b"} {
		if _, err := p.Tenants.UpdateTenant(sys, id, func(tn *tenancy.Tenant) error {
			tn.AllowedModels = []string{platformtest.Model, "rnd"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	admin := p.Token(t, "a", tenancy.ScopeAdmin)
	for _, body := range []string{`{"tenant":"a","name":"sup","path":"lora.gguf","model":"rnd"}`, `{"tenant":"b","name":"secret-b","path":"lora-b.gguf","model":"rnd"}`} {
		if code, b := call(t, p, "POST", "/admin/v1/adapters", admin, body); code != 201 {
			t.Fatalf("register %s: %d %s", body, code, b)
		}
	}
	ta, tb := p.Token(t, "a", tenancy.ScopeInfer), p.Token(t, "b", tenancy.ScopeInfer)
	attestation := func(tok, query string) (attest.Attestation, string) {
		t.Helper()
		code, b := call(t, p, "GET", "/v1/attestation"+query, tok, "")
		if code != 200 {
			t.Fatalf("GET /v1/attestation%s: %d %s", query, code, b)
		}
		var a attest.Attestation
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		return a, string(b)
	}
	for _, c := range []struct {
		tok, own, ownDigest string
		other               []string // what must not appear
	}{
		{ta, "sup", aDigest, []string{bDigest, "secret-b", `"b"`}},
		{tb, "secret-b", bDigest, []string{aDigest, `"sup"`, `"a"`}},
	} {
		a, raw := attestation(c.tok, "?model=rnd")
		if len(a.Adapters) != 1 || a.Adapters[0] != (attest.AttestedAdapter{Name: c.own, Digest: c.ownDigest, Rank: 8}) {
			t.Errorf("attestation of rnd lists %+v, want only %s (%s) without a tenant", a.Adapters, c.own, c.ownDigest)
		}
		for _, s := range c.other {
			if strings.Contains(raw, s) {
				t.Errorf("a tenant's attestation holds %s, another tenant's: %s", s, raw)
			}
		}
		if a, _ := attestation(c.tok, ""); len(a.Adapters) != 0 || a.Model != platformtest.Model {
			t.Errorf("the first model's attestation lists %+v (model %q): the adapters are rnd's", a.Adapters, a.Model)
		}
	}

	conn, gctx := p.GRPC(t)
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
	}
	ga, err := inferencev1.NewInferenceServiceClient(conn).GetAttestation(as(tb), &inferencev1.GetAttestationRequest{Model: "rnd"})
	if err != nil {
		t.Fatal(err)
	}
	if ads := ga.GetAdapters(); len(ads) != 1 || ads[0].GetDigest() != bDigest || ads[0].GetTenant() != "" || ads[0].GetName() != "secret-b" {
		t.Errorf("gRPC attestation of rnd for b: %v, want b's adapter only, no tenant", ads)
	}

	// The admin: every model's pool, every tenant's adapters with tenants.
	code, b := call(t, p, "GET", "/admin/v1/pool", admin, "")
	if code != 200 {
		t.Fatalf("GET /admin/v1/pool: %d %s", code, b)
	}
	var pool struct {
		Attestation attest.Attestation `json:"attestation"`
		Models      []struct {
			Attestation attest.Attestation `json:"attestation"`
			Pool        struct {
				Pages int `json:"pages"`
			} `json:"pool"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &pool); err != nil {
		t.Fatal(err)
	}
	want := []attest.AttestedAdapter{{Tenant: "a", Name: "sup", Digest: aDigest, Rank: 8}, {Tenant: "b", Name: "secret-b", Digest: bDigest, Rank: 8}}
	if len(pool.Models) != 2 || pool.Models[0].Attestation.Model != platformtest.Model || pool.Models[1].Attestation.Model != "rnd" ||
		pool.Attestation.Model != platformtest.Model || pool.Models[1].Pool.Pages == 0 {
		t.Fatalf("admin pool status: %s, want the first model's then rnd's", b)
	}
	if !slices.Equal(pool.Models[1].Attestation.Adapters, want) || len(pool.Models[0].Attestation.Adapters) != 0 {
		t.Fatalf("admin pool status adapters: %+v and %+v, want %+v on rnd", pool.Models[0].Attestation.Adapters, pool.Models[1].Attestation.Adapters, want)
	}
	if code, b := call(t, p, "GET", "/admin/v1/pool", ta, ""); code != 403 {
		t.Fatalf("pool status with an inference token: %d %s", code, b)
	}
	gp, err := adminv1.NewAdminServiceClient(conn).PoolStatus(as(admin), &adminv1.PoolStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ms := gp.GetModels(); len(ms) != 2 || ms[1].GetAttestation().GetModel() != "rnd" || len(ms[1].GetAttestation().GetAdapters()) != 2 ||
		ms[1].GetAttestation().GetAdapters()[1].GetTenant() != "b" || gp.GetAttestation().GetModel() != platformtest.Model {
		t.Fatalf("gRPC pool status: %v", gp)
	}
}
