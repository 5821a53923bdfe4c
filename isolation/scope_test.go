package isolation

import (
	"fmt"
	"testing"
)

// TestPrefixScope: pages published under one prefix-cache salt (what the
// engine derives from a LoRA adapter's digest) are found only under that
// salt — never under another adapter's, nor without one, nor the other way
// round — for the same tenant and the same tokens; within a salt the cache
// still hits, and no salt is AllocatePrefix's.
func TestPrefixScope(t *testing.T) {
	cfg := Config{Pages: 64, PrefixSecret: []byte("server secret")}
	prompt := seq(50, 1000) // three full pages and two tokens
	adA, adB, none := []byte("lora-digest-A"), []byte("lora-digest-B"), []byte(nil)
	for _, tc := range []struct {
		pub, look []byte
		want      int
	}{
		{adA, adA, 48},
		{none, none, 48},
		{adA, adB, 0},
		{adA, none, 0},
		{none, adA, 0},
		{adB, adA, 0},
	} {
		t.Run(fmt.Sprintf("%s→%s", tc.pub, tc.look), func(t *testing.T) {
			p := newPool(t, cfg, TenantConfig{ID: "a"})
			l1, cached, err := p.AllocatePrefixSalted("a", "r1", 60, prompt, tc.pub)
			if err != nil || cached != 0 {
				t.Fatalf("first: cached %d, %v", cached, err)
			}
			p.Write(l1, 50)
			if n, err := p.Publish(l1, prompt); err != nil || n != 3 {
				t.Fatalf("published %d, %v; want 3", n, err)
			}
			l2, cached, err := p.AllocatePrefixSalted("a", "r2", 60, prompt, tc.look)
			if err != nil || cached != tc.want {
				t.Fatalf("cached %d, %v; want %d", cached, err, tc.want)
			}
			if len(tc.look) == 0 {
				// AllocatePrefix is no salt.
				_, c2, err := p.AllocatePrefix("a", "r3", 60, prompt)
				if err != nil || c2 != cached {
					t.Fatalf("AllocatePrefix cached %d, %v; no salt %d", c2, err, cached)
				}
			}
			// What the second lease publishes under its salt is its own
			// chain: the first salt still finds its pages only.
			p.Write(l2, 50-cached)
			if _, err := p.Publish(l2, prompt); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, p)
			_, c3, err := p.AllocatePrefixSalted("a", "r4", 60, prompt, tc.pub)
			if err != nil || c3 != 48 {
				t.Fatalf("the publishing salt: cached %d, %v; want 48", c3, err)
			}
		})
	}
}
