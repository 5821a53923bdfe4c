package platformtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestTenantAdapterUpload: a tenant whose token carries adapters:write
// uploads its own LoRA adapter (POST /v1/adapters): refused (403) without
// the scope, (400) when the body is over the limit, its SHA-256 is not the
// digest stated or it is no adapter of the model, (404) for a model the
// tenant may not use; once accepted it is ledgered (adapter.registered,
// signed, under the tenant, the tenant's subject as actor, the stored path)
// and serves the tenant's requests as "<model>:<name>", while another
// tenant still gets the 404 model_not_found it gets for an adapter that
// does not exist — also when it tries to delete it (DELETE
// /v1/adapters/{name}, the owner's with adapters:write).
func TestTenantAdapterUpload(t *testing.T) {
	ctx := context.Background()
	dir, scratch := t.TempDir(), t.TempDir()
	writeRandomWithLoRA(t, scratch) // scratch/lora.gguf: an adapter of another model
	foreign, err := os.ReadFile(filepath.Join(scratch, "lora.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"a", "b"}, ModelDir: dir,
		API: func(c *api.Config) { c.MaxAdapterBytes = limit }})
	digest := writeLoRAOf(t, p.ModelFile, scratch, "mine.gguf", 3)
	file, err := os.ReadFile(filepath.Join(scratch, "mine.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(file) > limit {
		t.Fatalf("the test adapter is %d bytes, over the test's limit", len(file))
	}
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	upload := func(tok, query string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", p.URL+"/v1/adapters"+query, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	infer := p.Token(t, "a", tenancy.ScopeInfer)
	writer := p.Token(t, "a", tenancy.ScopeInfer, tenancy.ScopeAdaptersWrite)
	good := "?model=" + platformtest.Model + "&name=mine&digest=" + digest
	over := append(bytes.Repeat([]byte{0}, limit), file...)
	for _, c := range []struct {
		name, tok, query string
		body             []byte
		want             int
	}{
		{"no adapters:write", infer, good, file, 403},
		{"over the limit", writer, "?model=" + platformtest.Model + "&name=mine&digest=" + sum(over), over, 400},
		{"another digest", writer, "?model=" + platformtest.Model + "&name=mine&digest=" + sum(foreign), file, 400},
		{"no digest", writer, "?model=" + platformtest.Model + "&name=mine", file, 400},
		{"not an adapter of the model", writer, "?model=" + platformtest.Model + "&name=mine&digest=" + sum(foreign), foreign, 400},
		{"a model not the tenant's", writer, "?model=rnd&name=mine&digest=" + digest, file, 404},
		{"a bad name", writer, "?model=" + platformtest.Model + "&name=a%20b&digest=" + digest, file, 400},
		{"an unknown parameter", writer, good + "&tenant=b", file, 400},
	} {
		if code, b := upload(c.tok, c.query, c.body); code != c.want {
			t.Fatalf("%s: got %d %s, want %d", c.name, code, b, c.want)
		}
	}
	code, b := upload(writer, good, file)
	var info api.AdapterInfo
	if code != 201 || json.Unmarshal(b, &info) != nil || info.Digest != digest || info.Tenant != "a" || info.ID != platformtest.Model+":mine" {
		t.Fatalf("upload: %d %s", code, b)
	}
	if code, b := upload(writer, good, file); code != 409 {
		t.Fatalf("second upload under the name: %d %s, want 409", code, b)
	}
	complete := func(tok, model string) (int, []byte) {
		return call(t, p, "POST", "/v1/completions", tok, `{"model":"`+model+`","prompt":"ok","max_tokens":4,"temperature":0}`)
	}
	if code, b := complete(infer, platformtest.Model+":mine"); code != 200 {
		t.Fatalf("a under its uploaded adapter: %d %s", code, b)
	}
	tb := p.Token(t, "b", tenancy.ScopeInfer, tenancy.ScopeAdaptersWrite)
	code, bBody := complete(tb, platformtest.Model+":mine")
	_, none := complete(tb, platformtest.Model+":none")
	if code != 404 || errCode(bBody) != string(cloison.CodeModelNotFound) || string(bBody) != strings.ReplaceAll(string(none), "none", "mine") {
		t.Fatalf("b under a's uploaded adapter: %d %s, want the 404 of an adapter that does not exist (%s)", code, bBody, none)
	}
	if _, err := os.Stat(filepath.Join(dir, "adapters", "a", digest+".gguf")); err != nil {
		t.Fatalf("the uploaded file is not stored for a restart: %v", err)
	}

	// Removal: the tenant's own only. b gets the 404 of a name it does
	// not have; a needs adapters:write; then a's adapter stops serving.
	code, bDel := call(t, p, "DELETE", "/v1/adapters/mine", tb, "")
	_, noneDel := call(t, p, "DELETE", "/v1/adapters/none", tb, "")
	if code != 404 || string(bDel) != strings.ReplaceAll(string(noneDel), "none", "mine") {
		t.Fatalf("b deletes a's adapter: %d %s, want the 404 of a name it does not have (%s)", code, bDel, noneDel)
	}
	if code, b := call(t, p, "DELETE", "/v1/adapters/mine", infer, ""); code != 403 {
		t.Fatalf("delete without adapters:write: %d %s", code, b)
	}
	if code, b := call(t, p, "DELETE", "/v1/adapters/mine", writer, ""); code != 200 {
		t.Fatalf("a deletes its adapter: %d %s", code, b)
	}
	if code, b := complete(infer, platformtest.Model+":mine"); code != 404 {
		t.Fatalf("a under its deleted adapter: %d %s", code, b)
	}

	// The ledger: one adapter.registered, under a, signed, by a's
	// subject, then one adapter.unregistered by it.
	n, removed := 0, 0
	if err := p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		if r.Kind == audit.KindAdapterUnregistered && r.Tenant == "a" {
			removed++
		}
		if r.Kind != audit.KindAdapterRegistered {
			return nil
		}
		n++
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			return err
		}
		var ev audit.AdapterRegistered
		if err := json.Unmarshal(env.Data, &ev); err != nil {
			return err
		}
		if r.Tenant != "a" || env.Sig == "" || ev.Digest.String() != digest || !strings.HasPrefix(string(ev.Actor), "tenant:a/") ||
			string(ev.Path) != "adapters/a/"+digest+".gguf" {
			t.Errorf("adapter.registered: tenant %q, signed %v, %+v", r.Tenant, env.Sig != "", ev)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 || removed != 1 {
		t.Fatalf("%d adapter.registered and %d adapter.unregistered events, want 1 and 1", n, removed)
	}
}
