package platformtest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

var expositionLine = regexp.MustCompile(`^([a-z0-9_]+)\{([^}]*)\} (\S+)$`)

// byModel sums each model's samples of metric name in a text exposition
// (by model_name).
func byModel(t *testing.T, text, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		m := expositionLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		model := regexp.MustCompile(`model_name="([^"]*)"`).FindStringSubmatch(m[2])
		if model == nil {
			t.Fatalf("%s without model_name: %s", name, line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[model[1]] += v
	}
	return out
}

// TestPerModelMetricsAndReadiness: on a node serving two models, each
// model's requests, pool, load and attestation are its own series
// (model_name), the admin pool status lists both (TestAdapterAttestation
// checks its fields), and /readyz is 200 only while every served model is
// ready: a model whose engine stopped makes it 503 (and its
// cloison_model_ready 0) until it is no longer served.
func TestPerModelMetricsAndReadiness(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeRandomWithLoRA(t, dir)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"a"}, ModelDir: dir,
		Models: []node.ModelFile{{Path: filepath.Join(dir, "rnd.gguf"), Name: "rnd"}}})
	if _, err := p.Tenants.UpdateTenant(tenancy.WithActor(ctx, "admin:test"), "a", func(tn *tenancy.Tenant) error {
		tn.AllowedModels = []string{platformtest.Model, "rnd"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tok := p.Token(t, "a", tenancy.ScopeInfer)
	for i, model := range []string{platformtest.Model, "rnd", "rnd", platformtest.Model, "rnd"} {
		if code, b := call(t, p, "POST", "/v1/completions", tok, fmt.Sprintf(`{"model":%q,"prompt":"count %d","max_tokens":3,"temperature":0}`, model, i)); code != 200 {
			t.Fatalf("completion on %s: %d %s", model, code, b)
		}
	}
	if code, b := call(t, p, "POST", "/tokenize", tok, `{"model":"rnd","prompt":"four words or so"}`); code != 200 {
		t.Fatalf("tokenize on rnd: %d %s", code, b)
	}
	scrape := func() string {
		rec := httptest.NewRecorder()
		p.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	text := scrape()
	if got := byModel(t, text, "cloison_request_success_total"); got[platformtest.Model] != 2 || got["rnd"] != 3 {
		t.Errorf("cloison_request_success_total by model: %v, want 2 on %s and 3 on rnd", got, platformtest.Model)
	}
	if got := byModel(t, text, "cloison_e2e_request_latency_seconds_count"); got[platformtest.Model] != 2 || got["rnd"] != 3 {
		t.Errorf("cloison_e2e_request_latency_seconds_count by model: %v", got)
	}
	if got := byModel(t, text, "cloison_tokenize_tokens_total"); got["rnd"] == 0 || got[platformtest.Model] != 0 {
		t.Errorf("cloison_tokenize_tokens_total by model: %v, want rnd's only", got)
	}
	for _, name := range []string{"cloison_capacity_attestation_ok", "cloison_model_ready"} {
		if got := byModel(t, text, name); len(got) != 2 || got[platformtest.Model] != 1 || got["rnd"] != 1 {
			t.Errorf("%s by model: %v, want 1 for both", name, got)
		}
	}
	if got := byModel(t, text, "cloison_served_context_tokens"); got[platformtest.Model] != 4096 || got["rnd"] != 512 {
		t.Errorf("cloison_served_context_tokens by model: %v, want each model's own (4096, 512)", got)
	}
	for _, name := range []string{"cloison_pool_tokens", "cloison_num_requests_running", "cloison_kv_cache_usage_ratio"} {
		if got := byModel(t, text, name); len(got) != 2 {
			t.Errorf("%s by model: %v, want both models", name, got)
		}
	}
	if code, b := call(t, p, "GET", "/readyz", "", ""); code != 200 {
		t.Fatalf("/readyz with both models ready: %d %s", code, b)
	}

	// A model whose engine stopped: a real engine of its own, run and
	// stopped.
	mf := node.ModelFile{Path: filepath.Join(dir, "rnd.gguf")}
	inst, err := mf.Load(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Close)
	pool, err := isolation.NewPool(isolation.Config{Pages: 64, PageTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	att, err := attest.Capacity(attest.Config{ModelContext: inst.Model.Model.Context, ServedContext: 512, PoolPages: 64, PageTokens: 16, KVType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	arena, err := inst.Backend.NewArena(inst.Model.Model.ArenaConfig(64, 16, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Model: inst.Model.Model, Tokenizer: inst.Tokenizer, Pool: pool, Arena: arena, Attestation: att})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	stop()
	_ = eng.Run(rctx)
	if !eng.Stopped() {
		t.Fatal("the engine does not report that it stopped")
	}
	if err := p.Server.AddModel(api.Model{Name: "halted", Engine: eng, Tokenizer: inst.Tokenizer}); err != nil {
		t.Fatal(err)
	}
	if code, b := call(t, p, "GET", "/readyz", "", ""); code != 503 || strings.Contains(string(b), "halted") {
		t.Fatalf("/readyz with a model's engine stopped: %d %s, want 503 naming no model", code, b)
	}
	if got := byModel(t, scrape(), "cloison_model_ready"); got["halted"] != 0 || got["rnd"] != 1 || len(got) != 3 {
		t.Fatalf("cloison_model_ready by model: %v, want halted 0", got)
	}
	if _, err := p.Server.RemoveModel("halted"); err != nil {
		t.Fatal(err)
	}
	if code, b := call(t, p, "GET", "/readyz", "", ""); code != 200 {
		t.Fatalf("/readyz once the stopped model is no longer served: %d %s", code, b)
	}
	if got := byModel(t, scrape(), "cloison_model_ready"); len(got) != 2 {
		t.Fatalf("cloison_model_ready by model once halted is unloaded: %v", got)
	}
}
