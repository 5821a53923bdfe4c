//go:build faults

package probe_test

import (
	"strings"
	"testing"

	"github.com/cloison/cloison/node/platformtest"
)

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

// With a prefill pool below the served context (the attestation switched
// off, as the 2026 operators had no such check; faults builds only), the
// probe reports the misalignment — and the edge lengths probe the smaller
// pool.
func TestProbeSplitMisaligned(t *testing.T) {
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
