//go:build faults

package platformtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// layer names one defence of the disaggregated path that the 2026 incident
// went through, from the admitting decode node to the arena it reads.
type layer int

const (
	attestation   layer = iota // nodes refuse to start when a pool cannot hold the served context
	admission                  // the decode node rejects what no pool can hold, before reserving
	prefillReject              // the prefill node rejects before allocating (2026: a placeholder instead)
	countCheck                 // the receiver verifies transferred == reserved
	digestCheck                // every page present once, with its digest; the manifest MAC
	decodeCount                // the decode engine checks the pool holds every reserved token
	fillCheck                  // the pool approves reads of written slots only
	kernelCheck                // the arena checks page tags and fills before reading
	scrub                      // pages are zeroed before they change tenant
	nLayers
)

var layerNames = [nLayers]string{"attestation", "admission", "prefill-reject", "count", "digests", "decode-count", "fill", "kernel", "scrub"}

type layers [nLayers]bool

func (l layers) String() string {
	var on, off []string
	for i, b := range l {
		if b {
			on = append(on, layerNames[i])
		} else {
			off = append(off, layerNames[i])
		}
	}
	switch {
	case len(off) == 0:
		return "all-on"
	case len(on) == 0:
		return "all-off"
	case len(on) == 1:
		return "only-" + on[0]
	}
	return "no-" + strings.Join(off, "-no-")
}

// scale is the incident's geometry: the model advertises context tokens,
// the prefill pool holds about 65% of it (681,280 of 1,048,576 in 2026), and
// the attack prompt lies between the two.
type scale struct {
	context, decodePages, prefillPages, attack, canary int
}

var (
	full    = scale{context: 1 << 20, decodePages: 1 << 16, prefillPages: 681280 / 16, attack: 700_000, canary: 2_000}
	reduced = scale{context: 4096, decodePages: 256, prefillPages: 166, attack: 2_800, canary: 400} // 1/256
)

// TestIncident2026 is the 2026 incident as a regression suite. A synthetic
// context-bag model advertises 1,048,576 tokens; prefill and decode run on
// separate nodes (PrefillService and the verified transfer over gRPC with
// mutual TLS); the prefill pool holds 681,280 tokens; a victim tenant's
// canary KV sits in the decode pool; the attacker sends a prompt longer than
// the prefill pool but within the advertised context, and the prefill node
// can be the 2026 one (a placeholder instead of a rejection, its one page
// announced as the whole reservation).
//
// The defences are switched off through test hooks: with all on, with each
// one off, and with each one alone, the attacker never sees a canary — by
// the context-bag oracle (the model only emits tokens of the KV it reads:
// every output character must be one of the attacker's own) and by the
// canary strings — and every refusal is a typed error with, for a refused
// transfer or an isolation failure, an incident in the register. With every
// layer off the oracle sees the leak: the suite can fail.
//
// Under the race detector or -short it runs at 1/256 scale; `make test`
// runs it at full size without the race detector.
func TestIncident2026(t *testing.T) {
	sc := full
	if raceEnabled || testing.Short() {
		sc = reduced
	}
	var cases []layers
	all := layers{}
	for i := range all {
		all[i] = true
	}
	cases = append(cases, all)
	for i := range nLayers {
		off := all
		off[i] = false
		cases = append(cases, off)
	}
	for i := range nLayers {
		var only layers
		only[i] = true
		cases = append(cases, only)
	}
	cases = append(cases, layers{})
	for _, l := range cases {
		t.Run(l.String(), func(t *testing.T) {
			t.Cleanup(debug.FreeOSMemory) // the full-size arenas are gigabytes
			run2026(t, sc, l, false)
		})
	}
	// The aligned deployment the 2026 articles ask for: the served context
	// lowered to what the prefill pool holds. Every layer on, it starts, and
	// the over-long prompt gets its original error.
	t.Run("aligned", func(t *testing.T) {
		t.Cleanup(debug.FreeOSMemory)
		run2026(t, sc, all, true)
	})
}

const (
	attackAlphabet = "abcdefghijklmnopqrstuvwxyz"
	canaryAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

func run2026(t *testing.T, sc scale, l layers, aligned bool) {
	o := platformtest.Options{
		Context: sc.context, Pages: sc.decodePages,
		SkipAdmission: !l[admission], SkipFillCheck: !l[fillCheck], SkipKernelCheck: !l[kernelCheck], SkipScrub: !l[scrub],
		Split: &platformtest.Split{PrefillPages: sc.prefillPages, SkipAttestation: !l[attestation], Placeholder: !l[prefillReject],
			SkipCountCheck: !l[countCheck], SkipDigestCheck: !l[digestCheck], SkipDecodeCount: !l[decodeCount]},
	}
	if aligned {
		// Both nodes serve what the smaller pool holds.
		o.Pages = sc.prefillPages
	}
	p, err := platformtest.Start(t, o)
	if l[attestation] && !aligned {
		// The deployment never starts: no client is ever served by it.
		if !errors.Is(err, attest.ErrFailed) || !strings.Contains(err.Error(), fmt.Sprintf("pool holds %d tokens", sc.prefillPages*16)) {
			t.Fatalf("got %v, want the prefill node's capacity attestation to fail", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// The victim's canary KV: unique strings, none of whose characters the
	// attacker's prompt holds.
	canaries := []string{"ZQX7J4KW", "M0RD3CA1", "Y9VUTP2B"}
	var vb strings.Builder
	for vb.Len() < sc.canary {
		vb.WriteString(canaries[vb.Len()%len(canaries)])
	}
	victim := vb.String()[:sc.canary]
	if st, text, code := complete(t, p, "victim", victim, 4); st != 200 || !onlyFrom(text, canaryAlphabet) {
		t.Fatalf("the victim's request: %d %q %s", st, text, code)
	}
	attack := strings.Repeat(attackAlphabet, sc.attack/len(attackAlphabet)+1)[:sc.attack]
	st, text, code := complete(t, p, "attacker", attack, 8)
	t.Logf("attacker: %d %q %s (prefill calls %d)", st, text, code, p.Prefill.Calls())

	leaked := !onlyFrom(text, attackAlphabet)
	for _, c := range canaries {
		leaked = leaked || strings.Contains(text, c[:3])
	}
	switch {
	case l == layers{}:
		if !leaked {
			t.Fatalf("with every layer off the oracle saw no leak in %q (%d %s): the suite cannot catch a regression", text, st, code)
		}
		return
	case leaked:
		t.Fatalf("LEAK: the attacker got %q (%d)", text, st)
	}
	incidents := func(want int) []audit.IncidentFile {
		t.Helper()
		var incs []audit.IncidentFile
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			incs, err = p.Ledger.Incidents(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(incs) >= want || time.Now().After(deadline) {
				break
			}
		}
		if len(incs) != want {
			t.Fatalf("%d incidents, want %d: %+v", len(incs), want, incs)
		}
		return incs
	}
	switch {
	case l[admission] || aligned:
		if st != 400 || code != string(cloison.CodeContextLengthExceeded) || p.Prefill.Calls() != 1 {
			t.Fatalf("got %d %s with %d prefill calls; want 400 context_length_exceeded before any prefill (the victim's only)", st, code, p.Prefill.Calls())
		}
		incidents(0)
	case l[prefillReject]:
		if st != 400 || code != string(cloison.CodeContextLengthExceeded) {
			t.Fatalf("got %d %s; want the prefill node's original context_length_exceeded", st, code)
		}
		incidents(0)
	case l[countCheck] || l[digestCheck]:
		if st == 200 || code != string(cloison.CodeTransferVerification) {
			t.Fatalf("got %d %s; want the transfer refused", st, code)
		}
		if inc := incidents(1); inc[0].Source != audit.SourceTransferFailure || inc[0].Latest().AffectedTenants[0] != "attacker" {
			t.Fatalf("incident %+v", inc[0])
		}
	case l[decodeCount] || l[fillCheck] || l[kernelCheck]:
		if st == 200 || code != string(cloison.CodeIsolationViolation) {
			t.Fatalf("got %d %s; want the output withheld with isolation_violation", st, code)
		}
		want := "pool-violation"
		switch {
		case l[decodeCount]:
			want = "transfer-count"
		case !l[fillCheck]:
			want = "kernel-"
		}
		if inc := incidents(1); inc[0].Source != audit.SourceIsolationViolation || !strings.Contains(inc[0].Latest().Circumstances, want) {
			t.Fatalf("incident %+v, want a %s* isolation violation", inc[0], want)
		}
	case l[scrub]:
		// Only zeroed (or never used) pages to read: a 200 without canary.
		if st != 200 {
			t.Fatalf("got %d %s", st, code)
		}
	}
	// The ledger holds counts, hashes and identifiers: no prompt text.
	if err := p.Ledger.Scan(context.Background(), 1, 0, func(r audit.Record) error {
		for _, c := range append(canaries, attack[:16]) {
			if bytes.Contains(r.Payload, []byte(c)) {
				t.Fatalf("prompt text in the ledger: %s", r.Payload)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.Pool.Check(); err != nil {
		t.Fatal(err)
	}
	if err := p.Prefill.Pool.Check(); err != nil {
		t.Fatal(err)
	}
}

// complete posts a completion at temperature 0 and returns the status, the
// text (200) and the error code (otherwise).
func complete(t *testing.T, p *platformtest.Platform, tenant cloison.TenantID, prompt string, maxTokens int) (int, string, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": maxTokens, "temperature": 0})
	req, _ := http.NewRequest("POST", p.URL+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.Token(t, tenant, tenancy.ScopeInfer))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var e api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, "", e.Error.Code
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("completion body: %v", err)
	}
	return 200, out.Choices[0].Text, ""
}

// onlyFrom reports whether every character of s is in alphabet.
func onlyFrom(s, alphabet string) bool {
	for _, r := range s {
		if !strings.ContainsRune(alphabet, r) {
			return false
		}
	}
	return true
}
