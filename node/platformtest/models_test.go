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
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// writeBag writes a context bag of ctxLen tokens to dir/name and returns
// its SHA-256 (the model's digest).
func writeBag(t *testing.T, dir, name string, ctxLen int) string {
	t.Helper()
	w, err := synth.ContextBag(synth.BagConfig{Context: ctxLen, GapTokens: ctxLen})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// listModels is GET /v1/models' ids.
func listModels(t *testing.T, p *platformtest.Platform, tok string) []string {
	t.Helper()
	code, b := call(t, p, "GET", "/v1/models", tok, "")
	if code != 200 {
		t.Fatalf("GET /v1/models: %d %s", code, b)
	}
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range out.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// errCode is a JSON error body's code.
func errCode(b []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Error.Code
}

// TestSeveralModels: one node serves two models, each with its own pool
// and attestation, routed by the model field over HTTP and gRPC. A tenant
// allowed only the first neither sees nor uses the second: the same 404
// model_not_found as for a model the node does not serve. Every
// request.completed names its model's digest. An admin loads a third model
// at run time and unloads it, each ledgered by the admin before it takes
// effect.
func TestSeveralModels(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	digestB := writeBag(t, dir, "bag-b.gguf", 1024)
	digestC := writeBag(t, dir, "bag-c.gguf", 512)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"both", "first"}, ModelDir: dir,
		Models: []node.ModelFile{{Path: filepath.Join(dir, "bag-b.gguf")}}})
	// "both" may use every model, "first" only the context bag.
	sys := tenancy.WithActor(ctx, "admin:test")
	if _, err := p.Tenants.UpdateTenant(sys, "both", func(tn *tenancy.Tenant) error {
		tn.AllowedModels = []string{platformtest.Model, "bag-b", "bag-c"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	both, first := p.Token(t, "both", tenancy.ScopeInfer), p.Token(t, "first", tenancy.ScopeInfer)
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The model id is the file name when general.name is the built-in bag's.
	if got, want := listModels(t, p, both), []string{platformtest.Model, "bag-b"}; !slices.Equal(got, want) {
		t.Fatalf("models of a tenant allowed both: got %v, want %v", got, want)
	}
	if got, want := listModels(t, p, first), []string{platformtest.Model}; !slices.Equal(got, want) {
		t.Fatalf("models of a tenant allowed the first: got %v, want %v", got, want)
	}
	complete := func(tok, model string) (int, []byte) {
		return call(t, p, "POST", "/v1/completions", tok, `{"model":"`+model+`","prompt":"hello","max_tokens":2,"temperature":0}`)
	}
	for _, model := range []string{platformtest.Model, "bag-b"} {
		code, b := complete(both, model)
		var c struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(b, &c)
		if code != 200 || c.Model != model {
			t.Fatalf("completion on %s: got %d %s, want 200 naming the model", model, code, b)
		}
	}
	// Not allowed and not served: one answer.
	for _, model := range []string{"bag-b", "no-such-model"} {
		if code, b := complete(first, model); code != 404 || errCode(b) != string(cloison.CodeModelNotFound) {
			t.Fatalf("%s for a tenant not allowed it: got %d %s, want 404 model_not_found", model, code, b)
		}
		if code, b := call(t, p, "GET", "/v1/models/"+model, first, ""); code != 404 || errCode(b) != string(cloison.CodeModelNotFound) {
			t.Fatalf("GET /v1/models/%s: got %d %s, want 404 model_not_found", model, code, b)
		}
	}

	// Each model's pool is attested, its digest in the attestation.
	for model, digest := range map[string]string{"bag-b": digestB, "": ""} {
		code, b := call(t, p, "GET", "/v1/attestation?model="+model, both, "")
		var a struct {
			Model         string `json:"model"`
			ModelDigest   string `json:"model_digest"`
			ServedContext int    `json:"served_context"`
			OK            bool   `json:"ok"`
		}
		_ = json.Unmarshal(b, &a)
		if model == "" {
			model, digest = platformtest.Model, hex.EncodeToString(func() []byte { s := sha256.Sum256(p.ModelFile); return s[:] }())
		}
		if code != 200 || a.Model != model || a.ModelDigest != digest || !a.OK {
			t.Fatalf("attestation of %s: got %d %s", model, code, b)
		}
		if model == "bag-b" && a.ServedContext != 1024 {
			t.Fatalf("bag-b's served context %d, want its own 1024", a.ServedContext)
		}
	}
	if code, b := call(t, p, "GET", "/v1/attestation?model=bag-b", first, ""); code != 404 || errCode(b) != string(cloison.CodeModelNotFound) {
		t.Fatalf("attestation of a model the tenant may not use: got %d %s, want 404", code, b)
	}

	t.Run("grpc", func(t *testing.T) {
		conn, gctx := p.GRPC(t)
		client := inferencev1.NewInferenceServiceClient(conn)
		auth := func(tok string) context.Context {
			return metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
		}
		lm, err := client.ListModels(auth(first), &inferencev1.ListModelsRequest{})
		if err != nil || len(lm.GetModels()) != 1 || lm.GetModels()[0].GetId() != platformtest.Model {
			t.Fatalf("ListModels of a tenant allowed the first: got %v, %v", lm, err)
		}
		if lm, err = client.ListModels(auth(both), &inferencev1.ListModelsRequest{}); err != nil || len(lm.GetModels()) != 2 {
			t.Fatalf("ListModels of a tenant allowed both: got %v, %v", lm, err)
		}
		gen := func(tok, model string) error {
			mt := int64(2)
			st, err := client.Generate(auth(tok), &inferencev1.GenerateRequest{Model: model, Prompt: &inferencev1.GenerateRequest_Text{Text: "hello"}, MaxTokens: &mt})
			if err != nil {
				return err
			}
			for {
				m, err := st.Recv()
				if err != nil {
					return err
				}
				if m.GetFinal() != nil {
					return nil
				}
			}
		}
		if err := gen(both, "bag-b"); err != nil {
			t.Fatalf("Generate on bag-b: %v", err)
		}
		if a, err := client.GetAttestation(auth(both), &inferencev1.GetAttestationRequest{Model: "bag-b"}); err != nil || a.GetModel() != "bag-b" || a.GetModelDigest() != digestB {
			t.Fatalf("GetAttestation of bag-b: got %v, %v", a, err)
		}
		if _, err := client.GetAttestation(auth(first), &inferencev1.GetAttestationRequest{Model: "bag-b"}); status.Code(err) != codes.NotFound {
			t.Fatalf("GetAttestation of a model the tenant may not use: got %v, want NOT_FOUND", err)
		}
		// The admin service: list, and a load and unload refused
		// without the admin scope or for the first model.
		ac := adminv1.NewAdminServiceClient(conn)
		sm, err := ac.ListModels(auth(p.Token(t, "both", tenancy.ScopeAdmin)), &adminv1.ListServedModelsRequest{})
		if err != nil || len(sm.GetModels()) != 2 || sm.GetModels()[1].GetId() != "bag-b" || sm.GetModels()[1].GetDigest() != digestB {
			t.Fatalf("admin ListModels: got %v, %v", sm, err)
		}
		if _, err := ac.LoadModel(auth(both), &adminv1.LoadModelRequest{Path: "bag-c.gguf"}); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("LoadModel without the admin scope: got %v, want PERMISSION_DENIED", err)
		}
		if _, err := ac.UnloadModel(auth(p.Token(t, "both", tenancy.ScopeAdmin)), &adminv1.UnloadModelRequest{Id: platformtest.Model}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("UnloadModel of the first model: got %v, want INVALID_ARGUMENT", err)
		}
		for _, model := range []string{"bag-b", "no-such-model"} {
			if err := gen(first, model); status.Code(err) != codes.NotFound {
				t.Fatalf("Generate on %s by a tenant not allowed it: got %v, want NOT_FOUND", model, err)
			}
		}
	})

	// Run-time load and unload, by an admin, on the record.
	admin := p.Token(t, "both", tenancy.ScopeAdmin)
	for _, bad := range []string{`{"path":"../bag-c.gguf"}`, `{"path":"/etc/passwd"}`, `{"path":"missing.gguf"}`, `{"path":"bag-c.gguf","id":"has space"}`, `{"path":"bag-c.gguf","pages":4}`} {
		if code, b := call(t, p, "POST", "/admin/v1/models", admin, bad); code != 400 {
			t.Fatalf("load %s: got %d %s, want 400", bad, code, b)
		}
	}
	if code, b := call(t, p, "POST", "/admin/v1/models", both, `{"path":"bag-c.gguf"}`); code != 403 {
		t.Fatalf("load without the admin scope: got %d %s, want 403", code, b)
	}
	code, b := call(t, p, "POST", "/admin/v1/models", admin, `{"path":"bag-c.gguf"}`)
	if code != 201 || !strings.Contains(string(b), digestC) {
		t.Fatalf("load bag-c: got %d %s, want 201 with its digest", code, b)
	}
	if code, _ := call(t, p, "POST", "/admin/v1/models", admin, `{"path":"bag-c.gguf"}`); code != 409 {
		t.Fatalf("second load of bag-c: got %d, want 409", code)
	}
	if code, b := complete(both, "bag-c"); code != 200 {
		t.Fatalf("completion on the loaded model: got %d %s", code, b)
	}
	if code, b := complete(first, "bag-c"); code != 404 || errCode(b) != string(cloison.CodeModelNotFound) {
		t.Fatalf("loaded model, tenant not allowed: got %d %s, want 404", code, b)
	}
	if code, b := call(t, p, "DELETE", "/admin/v1/models/"+platformtest.Model, admin, ""); code != 400 {
		t.Fatalf("unload of the first model: got %d %s, want 400", code, b)
	}
	if code, b := call(t, p, "DELETE", "/admin/v1/models/bag-c", admin, ""); code != 200 {
		t.Fatalf("unload bag-c: got %d %s", code, b)
	}
	if code, b := complete(both, "bag-c"); code != 404 || errCode(b) != string(cloison.CodeModelNotFound) {
		t.Fatalf("completion on an unloaded model: got %d %s, want 404", code, b)
	}

	// The ledger: request.completed names each model's digest; the load
	// and unload are the admin's, the load after its pool's attestation.
	sum := sha256.Sum256(p.ModelFile)
	digests := map[string]string{platformtest.Model: hex.EncodeToString(sum[:]), "bag-b": digestB, "bag-c": digestC}
	var kinds []audit.Kind
	completed := 0
	err = p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			return err
		}
		switch r.Kind {
		case audit.KindRequestCompleted:
			var rc audit.RequestCompleted
			if err := json.Unmarshal(env.Data, &rc); err != nil {
				return err
			}
			if rc.ModelDigest == nil || rc.ModelDigest.String() != digests[string(rc.Model)] {
				t.Errorf("request.completed of %s names digest %v, want %s", rc.Model, rc.ModelDigest, digests[string(rc.Model)])
			}
			completed++
		case audit.KindCapacityAttestation:
			var ca audit.CapacityAttestation
			if err := json.Unmarshal(env.Data, &ca); err != nil {
				return err
			}
			if ca.Model != "bag-c" || ca.ModelDigest == nil || ca.ModelDigest.String() != digestC || !ca.Ready {
				t.Errorf("capacity.attestation %+v, want bag-c's, ready", ca)
			}
			kinds = append(kinds, r.Kind)
		case audit.KindModelLoaded, audit.KindModelUnloaded:
			if r.Actor != "admin:test-both" {
				t.Errorf("%s by %s, want admin:test-both", r.Kind, r.Actor)
			}
			kinds = append(kinds, r.Kind)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if completed < 4 {
		t.Errorf("%d request.completed, want at least 4", completed)
	}
	if want := []audit.Kind{audit.KindCapacityAttestation, audit.KindModelLoaded, audit.KindModelUnloaded}; !slices.Equal(kinds, want) {
		t.Errorf("model events %v, want %v", kinds, want)
	}
}

// TestModelMemoryBudget: a load that does not fit the node's memory budget
// is refused with the figures, nothing ledgered, nothing served; the node's
// models keep serving.
func TestModelMemoryBudget(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeBag(t, dir, "bag-b.gguf", 1024)
	// The budget is what the first model holds: nothing else fits.
	probe := platformtest.New(t, platformtest.Options{})
	need := probe.Node.ServedModels()[0].Bytes
	p := platformtest.New(t, platformtest.Options{ModelDir: dir, MemoryBudget: need})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code, b := call(t, p, "POST", "/admin/v1/models", admin, `{"path":"bag-b.gguf"}`)
	if code != 400 || !strings.Contains(string(b), "budget of") || !strings.Contains(string(b), "needs") {
		t.Fatalf("load over budget: got %d %s, want 400 with the figures", code, b)
	}
	if got := p.Server.Models(); len(got) != 1 {
		t.Fatalf("models served after a refused load: %v", got)
	}
	err = p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		if r.Kind == audit.KindModelLoaded || r.Kind == audit.KindCapacityAttestation {
			t.Errorf("a refused load ledgered %s", r.Kind)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A budget smaller than the first model: the node does not start.
	if _, err := platformtest.Start(t, platformtest.Options{MemoryBudget: need - 1}); err == nil {
		t.Fatal("a node whose first model exceeds the budget started")
	}
}

// TestDevTenantEveryModel: the newcomer path. A tenant created at start
// without allowed models (cloisond's --dev tenant) may use every model
// served at start, and one an admin loads later (its tenant.updated on
// the record, by that admin).
func TestDevTenantEveryModel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeBag(t, dir, "bag-b.gguf", 1024)
	writeBag(t, dir, "bag-c.gguf", 512)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"dev"}, EveryModel: true, ModelDir: dir,
		Models: []node.ModelFile{{Path: filepath.Join(dir, "bag-b.gguf"), Name: "second"}}})
	dev := p.Token(t, "dev", tenancy.ScopeInfer)
	// An alias names the model (id=, node.ModelFile.Name).
	if got, want := listModels(t, p, dev), []string{platformtest.Model, "second"}; !slices.Equal(got, want) {
		t.Fatalf("models of the dev tenant: got %v, want %v", got, want)
	}
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code, b := call(t, p, "POST", "/admin/v1/models", p.Token(t, "dev", tenancy.ScopeAdmin), `{"path":"bag-c.gguf"}`); code != 201 {
		t.Fatalf("load: got %d %s", code, b)
	}
	if got, want := listModels(t, p, dev), []string{platformtest.Model, "bag-c", "second"}; !slices.Equal(got, want) {
		t.Fatalf("models of the dev tenant after a load: got %v, want %v", got, want)
	}
	if code, b := call(t, p, "POST", "/v1/completions", dev, `{"model":"bag-c","prompt":"hi","max_tokens":1}`); code != 200 {
		t.Fatalf("completion on the loaded model: got %d %s", code, b)
	}
	updated := false
	err = p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		updated = updated || (r.Kind == audit.KindTenantUpdated && r.Actor == "admin:test-dev")
		return nil
	})
	if err != nil || !updated {
		t.Fatalf("no tenant.updated by the admin who loaded the model (%v)", err)
	}
}

// TestConcurrentLoads: two admins loading the same model at once: one is
// served, the other refused (409), and the ledger records one load — never
// a load that did not happen.
func TestConcurrentLoads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeBag(t, dir, "bag-b.gguf", 1024)
	p := platformtest.New(t, platformtest.Options{ModelDir: dir})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			code, _ := call(t, p, "POST", "/admin/v1/models", admin, `{"path":"bag-b.gguf"}`)
			codes <- code
		}()
	}
	got := []int{<-codes, <-codes}
	slices.Sort(got)
	if !slices.Equal(got, []int{201, 409}) {
		t.Fatalf("two concurrent loads: got %v, want 201 and 409", got)
	}
	loads := 0
	err = p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		if r.Kind == audit.KindModelLoaded {
			loads++
		}
		return nil
	})
	if err != nil || loads != 1 {
		t.Fatalf("model.loaded events: %d (%v), want 1", loads, err)
	}
}
