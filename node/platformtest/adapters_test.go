package platformtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// writeRandomWithLoRA writes a small random model to dir/rnd.gguf and a
// rank-8 LoRA adapter of it to dir/lora.gguf; it returns the adapter's
// SHA-256.
func writeRandomWithLoRA(t *testing.T, dir string) string {
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
	lw, err := synth.LoRA(base, synth.LoRAConfig{Rank: 8, Seed: 1, Strength: 1, Output: true})
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
	sum := sha256.Sum256(ab.Bytes())
	return hex.EncodeToString(sum[:])
}

// TestTenantAdapters: an admin registers a LoRA adapter of a served model
// for tenant a (ledgered, signed, under a, with its digest and the model's);
// a's requests naming "<model>:<adapter>" run under it over HTTP and gRPC
// (an output other than the base model's) and their request.completed
// names the adapter's digest; a prompt cached under the base model is not
// served from cache under the adapter. Tenant b neither lists nor uses it:
// the same 404 model_not_found, byte for byte, as once the adapter is gone.
func TestTenantAdapters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	adDigest := writeRandomWithLoRA(t, dir)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"a", "b", "c"}, ModelDir: dir, PrefixCache: true,
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
	ta, tb := p.Token(t, "a", tenancy.ScopeInfer), p.Token(t, "b", tenancy.ScopeInfer)
	admin := p.Token(t, "a", tenancy.ScopeAdmin)
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Registration: refused without the admin scope, for a path outside
	// the model directory, a file that is no adapter of the model, an
	// unknown tenant, a tenant not allowed the base model (c: nothing is
	// ledgered for it, checked below); then registered.
	reg := `{"tenant":"a","name":"sup","path":"lora.gguf","model":"rnd"}`
	if code, b := call(t, p, "POST", "/admin/v1/adapters", ta, reg); code != 403 {
		t.Fatalf("register without the admin scope: got %d %s, want 403", code, b)
	}
	for body, want := range map[string]int{
		`{"tenant":"a","name":"sup","path":"../lora.gguf","model":"rnd"}`:   400,
		`{"tenant":"a","name":"sup","path":"rnd.gguf","model":"rnd"}`:       400,
		`{"tenant":"a","name":"s p","path":"lora.gguf","model":"rnd"}`:      400,
		`{"tenant":"nobody","name":"sup","path":"lora.gguf","model":"rnd"}`: 404,
		`{"tenant":"a","name":"sup","path":"lora.gguf","model":"nope"}`:     404,
		`{"tenant":"c","name":"sup","path":"lora.gguf","model":"rnd"}`:      400,
	} {
		if code, b := call(t, p, "POST", "/admin/v1/adapters", admin, body); code != want {
			t.Fatalf("register %s: got %d %s, want %d", body, code, b, want)
		}
	}
	if code, b := call(t, p, "POST", "/admin/v1/adapters", admin, reg); code != 201 || !strings.Contains(string(b), adDigest) || !strings.Contains(string(b), `"id":"rnd:sup"`) {
		t.Fatalf("register: got %d %s, want 201 with the adapter's digest", code, b)
	}
	if code, b := call(t, p, "POST", "/admin/v1/adapters", admin, reg); code != 409 {
		t.Fatalf("second register: got %d %s, want 409", code, b)
	}

	// Listing: a's own adapters only.
	if ids := listModels(t, p, ta); !slices.Contains(ids, "rnd:sup") {
		t.Fatalf("a's models %v lack its adapter", ids)
	}
	if ids := listModels(t, p, tb); slices.Contains(ids, "rnd:sup") {
		t.Fatalf("b's models %v list a's adapter", ids)
	}

	// The prompt is one whose output under the adapter is whole UTF-8
	// characters token by token (gRPC chunks carry each token's text).
	complete := func(tok, model string) (int, []byte) {
		return call(t, p, "POST", "/v1/completions", tok, `{"model":"`+model+`","prompt":"ok","max_tokens":12,"temperature":0}`)
	}
	text := func(b []byte) string {
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("completion body %s", b)
		}
		return c.Choices[0].Text
	}
	code, baseOut := complete(ta, "rnd")
	if code != 200 {
		t.Fatalf("base completion: %d %s", code, baseOut)
	}
	code, adOut := complete(ta, "rnd:sup")
	if code != 200 {
		t.Fatalf("adapter completion: %d %s", code, adOut)
	}
	if text(baseOut) == text(adOut) {
		t.Fatalf("the adapter changed nothing: %q both", text(baseOut))
	}
	// b: the same answer as for an adapter that does not exist.
	code, bBody := complete(tb, "rnd:sup")
	if code != 404 || errCode(bBody) != string(cloison.CodeModelNotFound) {
		t.Fatalf("b on a's adapter: got %d %s, want 404 model_not_found", code, bBody)
	}
	if code, b := complete(ta, "rnd:zzz"); code != 404 || string(bytes.ReplaceAll(b, []byte("zzz"), []byte("sup"))) != string(bBody) {
		t.Fatalf("a missing adapter: got %d %s, want %s", code, b, bBody)
	}
	if code, b := call(t, p, "GET", "/v1/models/rnd:sup", tb, ""); code != 404 || errCode(b) != string(cloison.CodeModelNotFound) {
		t.Fatalf("GET /v1/models/rnd:sup by b: got %d %s", code, b)
	}
	if code, b := call(t, p, "GET", "/v1/models/rnd:sup", ta, ""); code != 200 {
		t.Fatalf("GET /v1/models/rnd:sup by a: got %d %s", code, b)
	}
	// An adapter of another model is not that model's.
	if code, b := complete(ta, platformtest.Model+":sup"); code != 404 {
		t.Fatalf("the adapter under the other model: got %d %s, want 404", code, b)
	}

	t.Run("grpc", func(t *testing.T) {
		conn, gctx := p.GRPC(t)
		client := inferencev1.NewInferenceServiceClient(conn)
		auth := func(tok string) context.Context {
			return metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
		}
		gen := func(tok, model string) (string, error) {
			mt, temp := int64(12), 0.0
			st, err := client.Generate(auth(tok), &inferencev1.GenerateRequest{Model: model, Prompt: &inferencev1.GenerateRequest_Text{Text: "ok"},
				MaxTokens: &mt, Temperature: &temp})
			if err != nil {
				return "", err
			}
			var out strings.Builder
			for {
				m, err := st.Recv()
				if err != nil {
					return "", err
				}
				out.WriteString(m.GetChunk().GetText())
				if m.GetFinal() != nil {
					return out.String(), nil
				}
			}
		}
		got, err := gen(ta, "rnd:sup")
		if err != nil || got != text(adOut) {
			t.Fatalf("gRPC under the adapter: got %q, %v; want HTTP's %q", got, err, text(adOut))
		}
		if _, err := gen(tb, "rnd:sup"); status.Code(err) != codes.NotFound {
			t.Fatalf("gRPC by b under a's adapter: got %v, want NOT_FOUND", err)
		}
		lm, err := client.ListModels(auth(tb), &inferencev1.ListModelsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lm.GetModels() {
			if m.GetId() == "rnd:sup" {
				t.Fatal("gRPC ListModels of b names a's adapter")
			}
		}
	})

	// The prefix cache at the API: a long prompt served under the base
	// model is not served from cache under the adapter, and the adapter's
	// own is (the ledger's cached_tokens, checked below).
	long := strings.Repeat("ok ", 60)
	for _, m := range []string{"rnd", "rnd", "rnd:sup", "rnd:sup"} {
		if code, b := call(t, p, "POST", "/v1/completions", ta, `{"model":"`+m+`","prompt":"`+long+`","max_tokens":1,"temperature":0}`); code != 200 {
			t.Fatalf("long prompt on %s: %d %s", m, code, b)
		}
	}

	// Unregister: b's unknown name, then a's; after it the request is
	// refused, and b's answer is the one it got while the adapter existed.
	if code, b := call(t, p, "DELETE", "/admin/v1/tenants/b/adapters/sup?model=rnd", admin, ""); code != 404 {
		t.Fatalf("unregister b's (none): got %d %s, want 404", code, b)
	}
	if code, b := call(t, p, "DELETE", "/admin/v1/tenants/a/adapters/sup?model=rnd", admin, ""); code != 200 {
		t.Fatalf("unregister: got %d %s", code, b)
	}
	if code, b := complete(ta, "rnd:sup"); code != 404 {
		t.Fatalf("a after unregister: got %d %s, want 404", code, b)
	}
	if code, b := complete(tb, "rnd:sup"); code != 404 || string(b) != string(bBody) {
		t.Fatalf("b once the adapter is gone: got %d %s, want what it got before: %s", code, b, bBody)
	}

	// The ledger: registration and removal under a, signed, with the
	// digests; request.completed names the adapter's digest only for the
	// adapter's requests.
	var kinds []audit.Kind
	withAdapter, without := 0, 0
	var longCached [][2]int64 // per long-prompt request: under the adapter (1) or not (0), cached tokens
	if err := p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			return err
		}
		switch r.Kind {
		case audit.KindAdapterRegistered, audit.KindAdapterUnregistered:
			kinds = append(kinds, r.Kind)
			if r.Tenant != "a" || !strings.Contains(string(env.Data), adDigest) || env.Sig == "" {
				t.Errorf("%s: tenant %q, payload %s, signed %v", r.Kind, r.Tenant, env.Data, env.Sig != "")
			}
		case audit.KindRequestCompleted:
			var rc audit.RequestCompleted
			if err := json.Unmarshal(env.Data, &rc); err != nil {
				return err
			}
			if rc.Model != "rnd" {
				return nil
			}
			if rc.PromptTokens > 50 {
				longCached = append(longCached, [2]int64{map[bool]int64{true: 1}[rc.AdapterDigest != nil], rc.CachedTokens})
			}
			if rc.AdapterDigest != nil {
				withAdapter++
				if rc.AdapterDigest.String() != adDigest {
					t.Errorf("request.completed names adapter %s, want %s", rc.AdapterDigest, adDigest)
				}
			} else {
				without++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, []audit.Kind{audit.KindAdapterRegistered, audit.KindAdapterUnregistered}) {
		t.Fatalf("adapter events %v", kinds)
	}
	if withAdapter != 4 || without != 3 {
		t.Fatalf("request.completed with the adapter %d (want 4), without %d (want 3)", withAdapter, without)
	}
	if len(longCached) != 4 || longCached[1][1] == 0 {
		t.Fatalf("long prompts (adapter, cached): %v: the base's second is not served from cache, the test exercises nothing", longCached)
	}
	if longCached[2] != [2]int64{1, 0} || longCached[3][0] != 1 || longCached[3][1] == 0 {
		t.Fatalf("long prompts (adapter, cached): %v; want the adapter's first uncached (the base's KV is not its), its second cached", longCached)
	}
}
