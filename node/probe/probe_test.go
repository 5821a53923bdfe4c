package probe_test

import (
	"context"
	"testing"

	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/node/probe"
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

// A split deployment (a prefill node behind the decode node): healthy, the
// probe passes (TestProbeSplitMisaligned: the probe reports a misaligned
// one).
func TestProbeSplit(t *testing.T) {
	// 16 pages of 16 tokens: the probe sends prompts of the whole served
	// context several times, each prefilled remotely.
	if rep := run(t, platformtest.Options{Pages: 16, Split: &platformtest.Split{}}); !rep.OK() {
		t.Fatalf("findings on a healthy split deployment: %+v", rep.Findings)
	}
}
