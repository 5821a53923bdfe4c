package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// cloisonctl verify-response checks a real server's answer and its proof
// offline (saved, then re-checked without the server), fails with exit
// status 3 on a completion that was not served and on a tampered saved
// answer; report and replay reach the server's routes.
func TestVerifyResponseReportReplay(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Pages: 64, ReplayPages: 16})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	prompt := "cloisonctl checks what it was served"
	body, _ := json.Marshal(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 6, "temperature": 0})
	req, _ := http.NewRequest("POST", p.URL+"/v1/completions", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var c api.Completion
	if err := json.Unmarshal(b, &c); err != nil || resp.StatusCode != 200 {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	id := resp.Header.Get("X-Request-Id")
	dir := t.TempDir()
	completion := filepath.Join(dir, "completion.txt")
	if err := os.WriteFile(completion, []byte(c.Choices[0].Text), 0o600); err != nil {
		t.Fatal(err)
	}
	vkey, _ := p.Ledger.TreeVerifierKey()
	saved := filepath.Join(dir, "answer.json")
	common := []string{"--server", p.URL, "--token", tok, "--request", id, "--verifier-key", vkey}
	out := mustRun(t, append([]string{"verify-response", "--prompt", prompt, "--completion", "@" + completion, "--tenant", "victim", "--save", saved}, common...)...)
	if !strings.Contains(out, "inclusion proof verified offline") || !strings.Contains(out, "OK:") {
		t.Fatalf("verify-response: %s", out)
	}
	if out := mustRun(t, "verify-response", "--offline", saved, "--verifier-key", vkey, "--tenant", "victim"); !strings.Contains(out, "OK:") {
		t.Fatalf("offline: %s", out)
	}
	// A completion that was not served: exit status 3.
	out, err = run(t, append([]string{"verify-response", "--prompt", prompt, "--completion", c.Choices[0].Text + " and more"}, common...)...)
	if !errors.Is(err, ErrNoMatch) || exitCode(err) != 3 || !strings.Contains(out, "completion match: false") {
		t.Fatalf("other completion: %v (exit %d)\n%s", err, exitCode(err), out)
	}
	// A saved answer edited afterwards fails its proof; so does claiming
	// to be another tenant.
	raw, _ := os.ReadFile(saved)
	tampered := filepath.Join(dir, "tampered.json")
	_ = os.WriteFile(tampered, []byte(strings.Replace(string(raw), `"prompt_tokens":`, `"prompt_tokens":1`, 1)), 0o600)
	if _, err := run(t, "verify-response", "--offline", tampered, "--verifier-key", vkey); err == nil {
		t.Fatal("a tampered saved answer verified")
	}
	if _, err := run(t, "verify-response", "--offline", saved, "--verifier-key", vkey, "--tenant", "attacker"); err == nil {
		t.Fatal("the victim's entry verified as the attacker's")
	}
	// report and replay.
	out = mustRun(t, "report", "--server", p.URL, "--token", tok, "--request", id, "--reason", "unexpected-response", "--details", "looked odd")
	if !strings.Contains(out, "status under_assessment") {
		t.Fatalf("report: %s", out)
	}
	out = mustRun(t, "replay", "--server", p.URL, "--token", tok, "--request", id, "--prompt", prompt)
	if !strings.Contains(out, "verdict: not-isolation-failure") || !strings.Contains(out, "incident") {
		t.Fatalf("replay: %s", out)
	}
	// Another tenant's request id: the server's 404.
	_, err = run(t, "report", "--server", p.URL, "--token", p.Token(t, "attacker", tenancy.ScopeInfer), "--request", id)
	if cloison.ErrorCode(err) != cloison.CodeNotFound {
		t.Fatalf("attacker report: %v, want not_found", err)
	}
}
