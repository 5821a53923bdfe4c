package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// cloisonctl adapter upload sends the token's tenant's own adapter file
// with its SHA-256 (POST /v1/adapters): registered under the tenant with
// that digest with adapters:write, refused (permission_denied) without it.
func TestAdapterUpload(t *testing.T) {
	dir := t.TempDir()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"a"}, ModelDir: t.TempDir()})
	base, ad := filepath.Join(dir, "base.gguf"), filepath.Join(dir, "ad.gguf")
	if err := os.WriteFile(base, p.ModelFile, 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "model", "synth", "--lora", base, "--rank", "4", "--seed", "5", ad)
	data, err := os.ReadFile(ad)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	args := func(tok string) []string {
		return []string{"adapter", "upload", "--server", p.URL, "--token", tok, "--name", "mine", ad}
	}
	if out, err := run(t, args(p.Token(t, "a", tenancy.ScopeInfer))...); cloison.ErrorCode(err) != cloison.CodePermissionDenied {
		t.Fatalf("upload without adapters:write: %v\n%s", err, out)
	}
	out := mustRun(t, args(p.Token(t, "a", tenancy.ScopeAdaptersWrite))...)
	if !strings.Contains(out, platformtest.Model+":mine") || !strings.Contains(out, hex.EncodeToString(sum[:])) || !strings.Contains(out, "tenant a") {
		t.Fatalf("upload: %s", out)
	}
}
