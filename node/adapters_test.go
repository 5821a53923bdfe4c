package node_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/tenancy"
)

// writeModelWithLoRA writes a small random model to dir/rnd.gguf and a
// LoRA adapter of it (seed) to dir/lora.gguf.
func writeModelWithLoRA(t *testing.T, dir string, seed uint64) {
	t.Helper()
	w, err := synth.Random(synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 320, Context: 512, DType: gguf.F32, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rnd.gguf"), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	base, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	lw, err := synth.LoRA(base, synth.LoRAConfig{Rank: 8, Seed: seed, Strength: 1, Output: true})
	if err != nil {
		t.Fatal(err)
	}
	var ab bytes.Buffer
	if _, err := lw.WriteTo(&ab); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lora.gguf"), ab.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A node restarted on the same ledger serves again the adapters registered
// on it (same digest; a's requests under it run, b's are 404) and not those
// unregistered; one whose file changed since it was registered is not
// served (404: never a different adapter under the registered name) and is
// reported in the log; so is one whose ledger entry is not signed by the
// node's log keys.
func TestAdaptersSurviveRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	dir := t.TempDir()
	writeModelWithLoRA(t, dir, 1)
	sys := tenancy.WithActor(ctx, "admin:test")
	for _, id := range []cloison.TenantID{"a", "b"} {
		if _, err := f.store.CreateTenant(sys, tenancy.Tenant{ID: id, Name: string(id), Status: tenancy.StatusActive, Tier: isolation.TierShared,
			Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal, IncidentContact: "x@example.test", AllowedModels: []string{"rnd"},
			Quotas: tenancy.Quotas{MaxConcurrent: 4, KVPages: 64, TokensPerMinute: 100000, MaxContext: 1024}}); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	issuer := tenancy.NewIssuer(f.api.Keys)
	keys := audit.KeySet(f.key.Public().(ed25519.PublicKey))
	start := func() *node.Node {
		t.Helper()
		cfg := f.config(256)
		cfg.ModelDir, cfg.EventKeys = dir, keys
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		mf := node.ModelFile{Path: filepath.Join(dir, "rnd.gguf"), Name: "rnd"}
		inst, err := mf.Load(mf.Options)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(inst.Close)
		inst.Name = "rnd"
		cfg.Models = []node.Model{inst.Model}
		n, err := node.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.Start()
		return n
	}
	// complete is tenant's completion under the adapter: its status.
	complete := func(n *node.Node, tenant cloison.TenantID) int {
		t.Helper()
		tok, err := issuer.Issue(tenancy.TokenRequest{Subject: "test-" + string(tenant), Tenant: tenant, Scopes: []tenancy.Scope{tenancy.ScopeInfer}, Audience: "cloison"})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"model":"rnd:sup","prompt":"ok","max_tokens":4,"temperature":0}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		n.Server.Handler().ServeHTTP(w, req)
		return w.Code
	}
	// incidents are the register's automatic entries of invariant
	// adapter_restore:<cause> on rnd: per cause, the tenants and ledger
	// entries they name.
	incidents := func() map[string]string {
		t.Helper()
		files, err := f.ledger.Incidents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, fl := range files {
			v := fl.Versions[len(fl.Versions)-1]
			if cause, ok := strings.CutPrefix(v.DetectionGroup, "isolation_violation/adapter_restore:"); ok {
				out[cause] = fmt.Sprint(v.AffectedTenants, len(v.LedgerEvents))
			}
		}
		return out
	}
	n := start()
	info, err := n.RegisterAdapter(ctx, "admin:test", api.AdapterRegister{Tenant: "a", Name: "sup", Path: "lora.gguf", Model: "rnd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.RegisterAdapter(ctx, "admin:test", api.AdapterRegister{Tenant: "a", Name: "gone", Path: "lora.gguf", Model: "rnd"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.UnregisterAdapter(ctx, "admin:test", "a", "rnd", "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.RegisterAdapter(ctx, "admin:test", api.AdapterRegister{Tenant: "a", Name: "s p", Path: "lora.gguf", Model: "rnd"}); err == nil {
		t.Fatal("a name that is no identifier was registered")
	}
	n.Close(ctx)

	n = start()
	got := n.TenantAdapters("a")
	if len(got) != 1 || got[0] != info {
		t.Fatalf("after a restart a's adapters are %+v, want only %+v", got, info)
	}
	if got := n.TenantAdapters("b"); len(got) != 0 {
		t.Fatalf("after a restart b's adapters are %+v", got)
	}
	if code := complete(n, "a"); code != 200 {
		t.Fatalf("a under its restored adapter: %d, want 200", code)
	}
	if code := complete(n, "b"); code != 404 {
		t.Fatalf("b under a's restored adapter: %d, want 404", code)
	}
	if got := incidents(); len(got) != 0 {
		t.Fatalf("a restart that restored every adapter opened register entries %v", got)
	}
	n.Close(ctx)
	logs.Reset()

	// Registrations not signed by the node's log keys (as one a database
	// writer states would be) are not restored.
	_, other, _ := ed25519.GenerateKey(nil)
	keys = audit.KeySet(other.Public().(ed25519.PublicKey))
	n = start()
	if code := complete(n, "a"); code != 404 {
		t.Fatalf("a under an adapter whose registration is not signed by the log keys: %d, want 404", code)
	}
	if l := logs.String(); !strings.Contains(l, "adapter not restored") || !strings.Contains(l, "no valid signature") {
		t.Fatalf("the unsigned registration is not reported; logs:\n%s", l)
	}
	// In the register too: an automatic entry naming a and the entry.
	if got := incidents(); len(got) != 1 || got["signature/rnd"] != "[a] 1" {
		t.Fatalf("register entries for the unsigned registration: %v, want signature/rnd naming a and its ledger entry", got)
	}
	n.Close(ctx)
	logs.Reset()
	keys = audit.KeySet(f.key.Public().(ed25519.PublicKey))

	// The file changes (another adapter of the same model): not served.
	writeModelWithLoRA(t, dir, 2)
	n = start()
	defer n.Close(ctx)
	if got := n.TenantAdapters("a"); len(got) != 0 {
		t.Fatalf("an adapter whose file changed is served after a restart: %+v", got)
	}
	if code := complete(n, "a"); code != 404 {
		t.Fatalf("a under an adapter whose file changed: %d, want 404", code)
	}
	if l := logs.String(); !strings.Contains(l, "adapter not restored") || !strings.Contains(l, "changed since it was registered") {
		t.Fatalf("the unrestored adapter is not reported; logs:\n%s", l)
	}
	if got := incidents(); len(got) != 2 || got["file_changed/rnd"] != "[a] 1" {
		t.Fatalf("register entries once the file changed: %v, want file_changed/rnd naming a and its registration", got)
	}
	// The register holds identifiers only: no path, no adapter name.
	files, err := f.ledger.Incidents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fl := range files {
		if b := fmt.Sprintf("%+v", fl.Versions); strings.Contains(b, "lora.gguf") || strings.Contains(b, "sup") {
			t.Fatalf("a register entry names the adapter's file or name: %s", b)
		}
	}
}

// A tenant's uploaded adapter (UploadAdapter) is stored in the model
// directory and its registration ledgered with that path: a restarted node
// serves it again, to its tenant only, with the same digest.
func TestUploadedAdapterSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	dir := t.TempDir()
	writeModelWithLoRA(t, dir, 4)
	data, err := os.ReadFile(filepath.Join(dir, "lora.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "lora.gguf")); err != nil { // the upload is the only copy
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	sys := tenancy.WithActor(ctx, "admin:test")
	for _, id := range []cloison.TenantID{"a", "b"} {
		if _, err := f.store.CreateTenant(sys, tenancy.Tenant{ID: id, Name: string(id), Status: tenancy.StatusActive, Tier: isolation.TierShared,
			Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal, IncidentContact: "x@example.test", AllowedModels: []string{"rnd"},
			Quotas: tenancy.Quotas{MaxConcurrent: 4, KVPages: 64, TokensPerMinute: 100000, MaxContext: 1024}}); err != nil {
			t.Fatal(err)
		}
	}
	start := func() *node.Node {
		t.Helper()
		cfg := f.config(256)
		cfg.ModelDir, cfg.EventKeys = dir, audit.KeySet(f.key.Public().(ed25519.PublicKey))
		mf := node.ModelFile{Path: filepath.Join(dir, "rnd.gguf"), Name: "rnd"}
		inst, err := mf.Load(mf.Options)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(inst.Close)
		inst.Name = "rnd"
		cfg.Models = []node.Model{inst.Model}
		n, err := node.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.Start()
		return n
	}
	n := start()
	up := api.AdapterUpload{Tenant: "a", Model: "rnd", Name: "up", Digest: hex.EncodeToString(sum[:]), Data: data}
	bad := up
	bad.Digest = hex.EncodeToString(make([]byte, 32))
	if _, err := n.UploadAdapter(ctx, "tenant:a/test", bad); !errors.Is(err, node.ErrAdapterDigest) {
		t.Fatalf("upload under another digest: %v, want ErrAdapterDigest", err)
	}
	info, err := n.UploadAdapter(ctx, "tenant:a/test", up)
	if err != nil {
		t.Fatal(err)
	}
	n.Close(ctx)
	n = start()
	defer n.Close(ctx)
	if got := n.TenantAdapters("a"); len(got) != 1 || got[0] != info {
		t.Fatalf("after a restart a's adapters are %+v, want %+v", got, info)
	}
	if got := n.TenantAdapters("b"); len(got) != 0 {
		t.Fatalf("after a restart b's adapters are %+v", got)
	}
}
