package platformtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// writeLoRAOf writes a LoRA adapter (seed) of the GGUF model base to
// dir/name and returns its SHA-256 (hex).
func writeLoRAOf(t *testing.T, base []byte, dir, name string, seed uint64) string {
	t.Helper()
	f, err := gguf.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	lw, err := synth.LoRA(f, synth.LoRAConfig{Rank: 8, Seed: seed, Strength: 1, Output: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := lw.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// completion is one served completion: its request id (X-Request-Id) and
// text.
func completion(t *testing.T, p *platformtest.Platform, tok, body string) (cloison.RequestID, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", p.URL+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var c struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 {
		t.Errorf("completion %s: %d %s", body, resp.StatusCode, b)
		return "", ""
	}
	return cloison.RequestID(resp.Header.Get("X-Request-Id")), c.Choices[0].Text
}

// TestAdapterReplay: a completion served under a tenant's LoRA adapter (in
// a batch beside base requests) replays on the replay engine, alone and
// under the same adapter, to the same completion digest (verdict
// not-isolation-failure; the adapter changes the output, so the replay did
// run under it). Once the file changes the replay is inconclusive
// (adapter-file-changed); once the adapter is unregistered, or registered
// again from another file, it is inconclusive (adapter-not-registered):
// never a replay under another adapter or none. Another tenant cannot
// replay it (404, as for any request not its own), nor make it replay by
// holding an adapter of the same name. Every verdict is ledgered.
func TestAdapterReplay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"a", "b"}, Pages: 64, ReplayPages: 32, ModelDir: dir})
	digest := writeLoRAOf(t, p.ModelFile, dir, "sup.gguf", 1)
	writeLoRAOf(t, p.ModelFile, dir, "other.gguf", 2)
	admin := p.Token(t, "a", tenancy.ScopeAdmin)
	register := func(tenant, file string) {
		t.Helper()
		body := `{"tenant":"` + tenant + `","name":"sup","path":"` + file + `","model":"` + platformtest.Model + `"}`
		if code, b := call(t, p, "POST", "/admin/v1/adapters", admin, body); code != 201 {
			t.Fatalf("register %s: %d %s", body, code, b)
		}
	}
	unregister := func(tenant string) {
		t.Helper()
		if code, b := call(t, p, "DELETE", "/admin/v1/tenants/"+tenant+"/adapters/sup", admin, ""); code != 200 {
			t.Fatalf("unregister: %d %s", code, b)
		}
	}
	register("a", "sup.gguf")
	ta, tb := p.Token(t, "a", tenancy.ScopeInfer), p.Token(t, "b", tenancy.ScopeInfer)
	prompt := "abcabcabd hello hello adapters"
	body := func(model string, temp float64) string {
		return fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":12,"temperature":%g,"seed":5}`, model, prompt, temp)
	}

	// Served beside base requests (one batch when they overlap): greedy
	// and sampled under the adapter.
	var wg sync.WaitGroup
	var greedy, sampled cloison.RequestID
	var adText, baseText string
	wg.Add(4)
	go func() { defer wg.Done(); greedy, adText = completion(t, p, ta, body(platformtest.Model+":sup", 0)) }()
	go func() { defer wg.Done(); sampled, _ = completion(t, p, ta, body(platformtest.Model+":sup", 1)) }()
	go func() { defer wg.Done(); _, baseText = completion(t, p, ta, body(platformtest.Model, 0)) }()
	go func() { defer wg.Done(); completion(t, p, tb, body(platformtest.Model, 1)) }()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if adText == baseText {
		t.Fatalf("the adapter changed nothing (%q): the replay would prove nothing about it", adText)
	}

	replay := func(tok string, id cloison.RequestID) (int, audit.Name, audit.Name, []byte) {
		t.Helper()
		code, b := call(t, p, "POST", "/v1/requests/"+string(id)+"/replay", tok, `{"prompt":"`+prompt+`"}`)
		var r struct {
			Verdict audit.Name `json:"verdict"`
			Reason  audit.Name `json:"reason"`
		}
		_ = json.Unmarshal(b, &r)
		return code, r.Verdict, r.Reason, b
	}
	for _, id := range []cloison.RequestID{greedy, sampled} {
		if code, v, _, b := replay(ta, id); code != 200 || v != audit.VerdictNotIsolationFailure {
			t.Fatalf("replay of %s under its adapter: %d %s, want not-isolation-failure", id, code, b)
		}
	}
	// b: the request is not its own, whatever it holds.
	register("b", "sup.gguf")
	if code, _, _, b := replay(tb, greedy); code != 404 {
		t.Fatalf("b replays a's adapter request: %d %s, want 404", code, b)
	}
	unregister("b")

	// The file changes under the registered adapter.
	orig, err := os.ReadFile(filepath.Join(dir, "sup.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := os.ReadFile(filepath.Join(dir, "other.gguf"))
	if err := os.WriteFile(filepath.Join(dir, "sup.gguf"), other, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, v, why, b := replay(ta, greedy); code != 200 || v != audit.VerdictInconclusive || why != "adapter-file-changed" {
		t.Fatalf("replay after the file changed: %d %s, want inconclusive adapter-file-changed", code, b)
	}
	if err := os.WriteFile(filepath.Join(dir, "sup.gguf"), orig, 0o600); err != nil {
		t.Fatal(err)
	}
	// Unregistered; then the name registered again from another file.
	unregister("a")
	if code, v, why, b := replay(ta, greedy); code != 200 || v != audit.VerdictInconclusive || why != "adapter-not-registered" {
		t.Fatalf("replay once unregistered: %d %s, want inconclusive adapter-not-registered", code, b)
	}
	register("a", "other.gguf")
	if code, v, why, b := replay(ta, greedy); code != 200 || v != audit.VerdictInconclusive || why != "adapter-not-registered" {
		t.Fatalf("replay under a name now of another file: %d %s, want inconclusive adapter-not-registered", code, b)
	}
	unregister("a")
	register("a", "sup.gguf")
	if code, v, _, b := replay(ta, greedy); code != 200 || v != audit.VerdictNotIsolationFailure {
		t.Fatalf("replay once the adapter is registered again: %d %s", code, b)
	}

	// The ledger: every verdict, under a.
	var verdicts []string
	if err := p.Ledger.Scan(ctx, 1, 0, func(r audit.Record) error {
		if r.Kind != audit.KindRequestReplayed {
			return nil
		}
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			return err
		}
		var ev audit.RequestReplayed
		if err := json.Unmarshal(env.Data, &ev); err != nil {
			return err
		}
		if r.Tenant != "a" {
			t.Errorf("request.replayed under %q", r.Tenant)
		}
		verdicts = append(verdicts, string(ev.Verdict)+"/"+string(ev.Reason))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := "not-isolation-failure/ not-isolation-failure/ inconclusive/adapter-file-changed inconclusive/adapter-not-registered inconclusive/adapter-not-registered not-isolation-failure/"
	if strings.Join(verdicts, " ") != want {
		t.Fatalf("ledgered verdicts %v, want %s (adapter %s)", verdicts, want, digest)
	}
}
