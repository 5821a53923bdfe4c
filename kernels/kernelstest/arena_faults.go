//go:build faults

package kernelstest

import (
	"testing"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// faultSubtests are the arena checks that need a pool defence switched off
// (isolation.Unsafe exists only in a faults build): the arena's own tags
// must hold without the pool's scrub.
func faultSubtests(t *testing.T, b kernels.Backend) {
	t.Run("unscrubbed reuse does not expose the previous owner's slots", func(t *testing.T) {
		p := newPool(t, isolation.Config{Pages: 4, Unsafe: isolation.Unsafe{SkipScrub: true}}, "a", "b")
		a := newArena(t, b)
		sa := allocate(t, p, "a", "r", 16)
		old := write(t, b, p, a, sa, 16)
		p.Release(sa.lease)
		p.ConfirmScrub(p.ScrubWork()) // nothing zeroed: SkipScrub
		sb := allocate(t, p, "b", "r", 16)
		nb := write(t, b, p, a, sb, 1) // one slot of a's full page
		wantMismatch(t, "old table", attend(t, b, a, old, 15))
		// b's page carries only b's slot: the transfer copy of the page
		// has zeros after slot 0 in every layer.
		buf := make([]byte, a.PageBytes())
		if err := a.CopyOut(buf, nb, 0); err != nil {
			t.Fatal(err)
		}
		checkOnlySlots(t, buf, 1, a.Config().KV)
	})
}
