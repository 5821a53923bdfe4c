package probe_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cloison/cloison/internal/platformtest"
	"github.com/cloison/cloison/internal/probe"
	"github.com/cloison/cloison/tenancy"
)

func run(t *testing.T, o platformtest.Options) *probe.Report {
	p := platformtest.New(t, o)
	rep, err := probe.Run(context.Background(), probe.Config{URL: p.URL, Model: platformtest.Model, Bag: true, Canaries: 4, Flood: 6, Aborts: 2,
		TokenA: p.Token(t, "victim", tenancy.ScopeInfer), TokenB: p.Token(t, "attacker", tenancy.ScopeInfer), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The probe passes a healthy deployment in process too (the e2e test in
// cmd/cloisond runs it against a real cloisond).
func TestProbeHealthy(t *testing.T) {
	if rep := run(t, platformtest.Options{Pages: 64}); !rep.OK() {
		t.Fatalf("findings: %+v", rep.Findings)
	}
}

// The probe can fail: on a deployment with the 2026 placeholder bug and
// every defence off (fill checks, arena checks, scrubbing), it reports that
// tenant B's outputs carry what tenant A's canaries left in the pool.
func TestProbeFindsThe2026Leak(t *testing.T) {
	rep := run(t, platformtest.Options{Pages: 64, PlaceholderOver: 32, SkipFillCheck: true, SkipKernelCheck: true, SkipScrub: true})
	leaks := 0
	for _, f := range rep.Findings {
		if f.Check == "oracle-leak" || f.Check == "canary-leak" {
			leaks++
		}
	}
	if leaks == 0 {
		t.Fatalf("the probe saw no leak on a deployment with every defence off: %+v", rep)
	}
	t.Logf("%d leak findings, e.g. %s", leaks, rep.Findings[0].Detail)
}

// With the same bug but the defences on, the deployment fails closed: no
// leak finding (the attacker's requests end in errors instead).
func TestProbeDefencesHoldAgainstTheBug(t *testing.T) {
	rep := run(t, platformtest.Options{Pages: 64, PlaceholderOver: 32})
	for _, f := range rep.Findings {
		if f.Check == "oracle-leak" || f.Check == "canary-leak" || f.Check == "over-long-served" {
			t.Fatalf("finding with every defence on: %+v", f)
		}
	}
}

// A split deployment (a prefill node behind the decode node): healthy, the
// probe passes; with a prefill pool below the served context (attestation
// bypassed, as the 2026 operators had no such check), it reports the
// misalignment — and the edge lengths probe the smaller pool.
func TestProbeSplit(t *testing.T) {
	// 16 pages of 16 tokens: the probe sends prompts of the whole served
	// context several times, each prefilled remotely.
	if rep := run(t, platformtest.Options{Pages: 16, Split: &platformtest.Split{}}); !rep.OK() {
		t.Fatalf("findings on a healthy split deployment: %+v", rep.Findings)
	}
	rep := run(t, platformtest.Options{Pages: 16, Split: &platformtest.Split{PrefillPages: 10, SkipAttestation: true}})
	var found bool
	for _, f := range rep.Findings {
		found = found || (f.Check == "attestation" && strings.Contains(f.Detail, "prefill node"))
		if f.Check == "oracle-leak" || f.Check == "canary-leak" || f.Check == "over-long-served" {
			t.Fatalf("finding: %+v", f)
		}
	}
	if !found {
		t.Fatalf("the probe did not report the 160-token prefill pool under a 256-token served context: %+v", rep.Findings)
	}
}
