//go:build faults

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// layers names the defences a case leaves on.
type layers struct {
	admission bool // admission's length check (layer 1)
	fill      bool // the pool's fill-count check in BlockTable (layer 3)
	kernel    bool // the arena's tag and fill checks before reads (layer 3, in the kernel)
	scrub     bool // zeroing before a page changes tenant (layer 5)
}

func (l layers) String() string {
	var on []string
	for _, x := range []struct {
		b bool
		n string
	}{{l.admission, "admission"}, {l.fill, "fill"}, {l.kernel, "kernel"}, {l.scrub, "scrub"}} {
		if x.b {
			on = append(on, x.n)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, "+")
}

// TestIncidentLayers reproduces the 2026 failure with the placeholder bug
// switched on in the scheduler: an over-long prompt is "rejected", replaced
// by a one-token placeholder, and decoding runs over the pages reserved for
// the full prompt, which a canary tenant filled just before. Each defence is
// switched off in turn (defence layers 1, admission; 3, ownership tags; 5, scrubbing): with any one of
// them on, no canary token reaches the attacker — admission rejects with the
// original error; the pool's fill check and the arena's checks fail closed
// with an incident and no output; scrubbing leaves only zeros to read. With
// every layer off the leak oracle sees the canary's tokens, which proves
// the test would catch a regression.
func TestIncidentLayers(t *testing.T) {
	safe := bagModelOpts(t, kernels.Options{})
	unsafe := bagModelOpts(t, kernels.Options{Unsafe: kernels.Unsafe{SkipOwnershipChecks: true}})
	const served, pt, pages = 256, 16, 40
	canary := func(i int) int32 { return 200 + int32(i%50) } // tokens 200–249
	attack := make([]int32, 600)                             // tokens 0–49, far over the served context
	for i := range attack {
		attack[i] = int32(i % 50)
	}
	var cases []layers
	for m := range 16 {
		cases = append(cases, layers{m&1 != 0, m&2 != 0, m&4 != 0, m&8 != 0})
	}
	for _, lc := range cases {
		t.Run(lc.String(), func(t *testing.T) {
			l := safe
			if !lc.kernel {
				l = unsafe
			}
			zeroing := isolation.ZeroCrossTenant
			r := newRig(t, l, rigConfig{
				pool: isolation.Config{Pages: pages, PageTokens: pt, DefaultZeroing: zeroing,
					Unsafe: isolation.Unsafe{SkipFillCheck: !lc.fill, SkipScrub: !lc.scrub}},
				tenants: []isolation.TenantConfig{{ID: "victim"}, {ID: "attacker"}},
				served:  served,
				unsafe:  Unsafe{SkipLengthCheck: !lc.admission, PlaceholderOver: served},
				sched:   SchedulerConfig{Unsafe: Unsafe{PlaceholderOver: served}, MaxBatchTokens: 1024, ChunkTokens: 1024},
			})
			// The victim's KV fills pages, then the victim leaves.
			vp := make([]int32, served-8)
			for i := range vp {
				vp[i] = canary(i)
			}
			s, err := r.e.Submit(context.Background(), GenerateRequest{ID: "canary", Tenant: "victim", Prompt: vp, MaxTokens: 8, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := collect(t, s); err != nil {
				t.Fatal(err)
			}
			// The over-long prompt.
			s, err = r.e.Submit(context.Background(), GenerateRequest{ID: "long", Tenant: "attacker", Prompt: attack, MaxTokens: 8, IgnoreEOS: true})
			if lc.admission {
				if !errors.Is(err, ErrContextLength) || cloison.ErrorCode(err) != cloison.CodeContextLengthExceeded {
					t.Fatalf("got %v, want the original context_length_exceeded error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := collect(t, s)
			r.close()
			var leaked []int32
			for _, tok := range got {
				if tok >= 50 {
					leaked = append(leaked, tok)
				}
			}
			switch {
			case lc.fill || lc.kernel:
				if !errors.Is(err, ErrWithheld) || cloison.ErrorCode(err) != cloison.CodeIsolationViolation {
					t.Fatalf("got %v, want the output withheld with isolation_violation", err)
				}
				if len(got) != 0 {
					t.Fatalf("tokens %v reached the client of a request that failed isolation", got)
				}
				inc := r.incidents()
				want := "pool-violation"
				if !lc.fill {
					want = "kernel-"
				}
				if len(inc) != 1 || inc[0].Request != "long" || inc[0].Tenant != "attacker" || !strings.HasPrefix(inc[0].Kind, want) {
					t.Fatalf("incidents %+v, want one %s* incident for the attacker's request", inc, want)
				}
			case lc.scrub:
				if err != nil || len(leaked) != 0 || len(r.incidents()) != 0 {
					t.Fatalf("got tokens %v err %v incidents %v; want output from zeroed pages only", got, err, r.incidents())
				}
			default:
				if len(leaked) == 0 {
					t.Fatalf("with every layer off the oracle saw no leak in %v (err %v): the test cannot catch a regression", got, err)
				}
				t.Logf("every layer off: the oracle caught leaked canary tokens %v", leaked)
			}
		})
	}
}

func bagModelOpts(t testing.TB, o kernels.Options) *loaded {
	w, err := synth.ContextBag(synth.BagConfig{Vocab: 320, Context: 4096})
	return loadWriterOpts(t, w, err, o)
}

var _ = fmt.Sprint
