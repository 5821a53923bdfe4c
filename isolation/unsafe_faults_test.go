//go:build faults

package isolation

import (
	"errors"
	"testing"
)

// The test-only switches disable exactly the defence they name, so that
// later tests can prove the remaining layers fail closed.
func TestUnsafeSwitches(t *testing.T) {
	t.Run("SkipFillCheck approves unwritten slots", func(t *testing.T) {
		p := newPool(t, Config{Pages: 4, Unsafe: Unsafe{SkipFillCheck: true}}, TenantConfig{ID: "a"})
		l, _ := p.Allocate("a", "r", 64)
		p.Write(l, 1)
		bt, err := p.BlockTable(l, 64)
		if err != nil || bt.Tokens() != 64 {
			t.Fatalf("got %v, want an approved 64-token table", err)
		}
		// Ownership is still checked.
		p.Release(l)
		if _, err := p.BlockTable(l, 1); !errors.Is(err, ErrStaleLease) {
			t.Fatalf("got %v, want ErrStaleLease", err)
		}
	})
	t.Run("SkipScrub hands dirty pages across tenants", func(t *testing.T) {
		p := newPool(t, Config{Pages: 2, DefaultZeroing: ZeroAlways, Unsafe: Unsafe{SkipScrub: true}}, TenantConfig{ID: "a"}, TenantConfig{ID: "b"})
		la, _ := p.Allocate("a", "r", 32)
		p.Write(la, 32)
		p.Release(la)
		lb, err := p.Allocate("b", "r", 32)
		if err != nil {
			t.Fatalf("got %v, want a's dirty pages at once", err)
		}
		for _, pg := range leasePages(p, lb) {
			if snapshot(p)[pg].tag.Tenant != 1 {
				t.Fatalf("page %d is not a's dirty page", pg)
			}
		}
		mustCheck(t, p)
	})
}
