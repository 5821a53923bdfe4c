package api_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// A tenant's replays count against its token quota: once a minute's tokens
// are spent on replays, the next one is refused 429 with Retry-After, and
// the tenant's ordinary requests are refused too.
func TestReplayChargedToTheTenantsQuota(t *testing.T) {
	// The request (about 8 prompt tokens and 12 completion tokens) and a
	// few replays of it fit; a minute of them does not.
	q := tenancy.Quotas{MaxConcurrent: 8, KVPages: 64, TokensPerMinute: 150, MaxContext: 1 << 20}
	p := platformtest.New(t, platformtest.Options{Pages: 64, ReplayPages: 16, Quotas: &q})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	prompt := "abcabcabd hello hello"
	got := complete(t, p, "victim", mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 12, "temperature": 0}))
	url := p.URL + "/v1/requests/" + string(got.id) + "/replay"
	for i := range 20 {
		resp, b := send(t, "POST", url, tok, mustJSON(map[string]any{"prompt": prompt}))
		if resp.StatusCode == 200 {
			continue
		}
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("replay %d: %d (Retry-After %q) %s, want 429 with Retry-After", i, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
		if i == 0 {
			t.Fatal("the first replay was refused")
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
		}
		return
	}
	t.Fatal("20 replays of a 20-token request served under a quota of 150 tokens a minute")
}

// One tenant replaying without pause does not take the replay engine from
// another: its extra replays are refused 429 with Retry-After (one at a
// time per tenant), and the other tenant's replays are all served.
func TestReplaysSharedBetweenTenants(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Pages: 64, ReplayPages: 16})
	prompt := "abcabcabd hello hello"
	body := mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 24, "temperature": 0})
	ids := map[cloison.TenantID]string{}
	toks := map[cloison.TenantID]string{}
	for _, tn := range []cloison.TenantID{"attacker", "victim"} {
		ids[tn] = string(complete(t, p, tn, body).id)
		toks[tn] = p.Token(t, tn, tenancy.ScopeInfer)
	}
	replay := func(tn cloison.TenantID) (int, string) {
		resp, _ := send(t, "POST", p.URL+"/v1/requests/"+ids[tn]+"/replay", toks[tn], mustJSON(map[string]any{"prompt": prompt}))
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	var stop atomic.Bool
	var flood sync.WaitGroup
	var served, refused, bad atomic.Int64
	for range 4 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for !stop.Load() {
				switch code, ra := replay("attacker"); {
				case code == 200:
					served.Add(1)
				case code == 429 && ra != "":
					refused.Add(1)
				default:
					bad.Add(1)
				}
			}
		}()
	}
	victim := 0
	for range 10 {
		if code, ra := replay("victim"); code == 200 {
			victim++
		} else {
			t.Errorf("victim's replay during the flood: %d (Retry-After %q), want 200", code, ra)
		}
	}
	stop.Store(true)
	flood.Wait()
	if bad.Load() != 0 || served.Load() == 0 {
		t.Fatalf("attacker: %d served, %d refused 429 with Retry-After, %d other answers", served.Load(), refused.Load(), bad.Load())
	}
	t.Logf("victim %d/10 served; attacker %d served, %d refused", victim, served.Load(), refused.Load())
}
