package isolation

import (
	"fmt"
	"testing"
)

// TestPrefixScope: pages published under one prefix-cache scope (a LoRA
// adapter's digest) are found only under that scope — never under another
// adapter's, nor without one, nor the other way round — for the same
// tenant and the same tokens; within a scope the cache still hits, and the
// zero scope is AllocatePrefix's.
func TestPrefixScope(t *testing.T) {
	cfg := Config{Pages: 64, PrefixSecret: []byte("server secret")}
	prompt := seq(50, 1000) // three full pages and two tokens
	adA, adB, none := [32]byte{1}, [32]byte{2}, [32]byte{}
	for _, tc := range []struct {
		pub, look [32]byte
		want      int
	}{
		{adA, adA, 48},
		{none, none, 48},
		{adA, adB, 0},
		{adA, none, 0},
		{none, adA, 0},
		{adB, adA, 0},
	} {
		t.Run(fmt.Sprintf("%x→%x", tc.pub[:1], tc.look[:1]), func(t *testing.T) {
			p := newPool(t, cfg, TenantConfig{ID: "a"})
			l1, cached, err := p.AllocatePrefixScoped("a", "r1", 60, prompt, tc.pub)
			if err != nil || cached != 0 {
				t.Fatalf("first: cached %d, %v", cached, err)
			}
			p.Write(l1, 50)
			if n, err := p.Publish(l1, prompt); err != nil || n != 3 {
				t.Fatalf("published %d, %v; want 3", n, err)
			}
			l2, cached, err := p.AllocatePrefixScoped("a", "r2", 60, prompt, tc.look)
			if err != nil || cached != tc.want {
				t.Fatalf("cached %d, %v; want %d", cached, err, tc.want)
			}
			if tc.look == none {
				// AllocatePrefix is the zero scope.
				_, c2, err := p.AllocatePrefix("a", "r3", 60, prompt)
				if err != nil || c2 != cached {
					t.Fatalf("AllocatePrefix cached %d, %v; the zero scope %d", c2, err, cached)
				}
			}
			// What the second lease publishes under its scope is its own
			// chain: the first scope still finds its pages only.
			p.Write(l2, 50-cached)
			if _, err := p.Publish(l2, prompt); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, p)
			_, c3, err := p.AllocatePrefixScoped("a", "r4", 60, prompt, tc.pub)
			if err != nil || c3 != 48 {
				t.Fatalf("the publishing scope: cached %d, %v; want 48", c3, err)
			}
		})
	}
}
