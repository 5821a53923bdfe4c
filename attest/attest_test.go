package attest

import (
	"errors"
	"slices"
	"testing"
)

func TestCapacity(t *testing.T) {
	tests := []struct {
		name   string
		c      Config
		ok     bool
		served int
	}{
		{"fits", Config{ModelContext: 4096, PoolPages: 256, PageTokens: 16}, true, 4096},
		{"2026: advertised 1,048,576, pool 681,280", Config{ModelContext: 1 << 20, PoolPages: 681280 / 16, PageTokens: 16}, false, 1 << 20},
		{"operator lowers the served context", Config{ModelContext: 1 << 20, ServedContext: 681280, PoolPages: 681280 / 16, PageTokens: 16}, true, 681280},
		{"k = 2 as in the remediation", Config{ModelContext: 4096, PoolPages: 256, PageTokens: 16, K: 2}, false, 4096},
		{"k = 2 fits a larger pool", Config{ModelContext: 4096, PoolPages: 512, PageTokens: 16, K: 2}, true, 4096},
		{"served above the model", Config{ModelContext: 4096, ServedContext: 8192, PoolPages: 1024, PageTokens: 16}, false, 8192},
		{"empty pool", Config{ModelContext: 4096}, false, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Capacity(tt.c)
			if (err == nil) != tt.ok || a.OK != tt.ok {
				t.Fatalf("got ok=%v err=%v, want ok=%v", a.OK, err, tt.ok)
			}
			if err != nil && (!errors.Is(err, ErrFailed) || a.Reason == "") {
				t.Fatalf("got %v (reason %q), want ErrFailed with a reason", err, a.Reason)
			}
			if a.ServedContext != tt.served || a.PoolTokens != tt.c.PoolPages*tt.c.PageTokens {
				t.Fatalf("got served %d pool %d", a.ServedContext, a.PoolTokens)
			}
		})
	}
}

// A decode node checks its prefill nodes: same model, a pool that holds a
// whole request of the served context, and their own attestation passed.
func TestPrefill(t *testing.T) {
	decode, err := Capacity(Config{ModelContext: 1 << 20, PoolPages: 1 << 16, PageTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	peer := func(addr string, pool, served int, digest string) PrefillPeer {
		a, _ := Capacity(Config{ModelContext: 1 << 20, ServedContext: served, PoolPages: pool / 16, PageTokens: 16})
		return PrefillPeer{Addr: addr, ModelDigest: digest, Attestation: a}
	}
	tests := []struct {
		name     string
		peers    []PrefillPeer
		bad      []string // addresses refused
		capacity int
	}{
		{"aligned", []PrefillPeer{peer("p1", 1<<20, 0, "m"), peer("p2", 2<<20, 0, "m")}, nil, 1 << 20},
		{"2026: a prefill pool of 681,280 tokens", []PrefillPeer{peer("p1", 1<<20, 0, "m"), peer("p2", 681280, 0, "m")}, []string{"p2"}, 681280},
		{"2026 pool with a lowered served context", []PrefillPeer{peer("p1", 681280, 681280, "m")}, []string{"p1"}, 681280},
		{"another model", []PrefillPeer{peer("p1", 1<<20, 0, "other")}, []string{"p1"}, 1 << 20},
		{"no prefill node", nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, capacity, err := Prefill(decode, "m", tt.peers)
			wantOK := len(tt.bad) == 0 && len(tt.peers) > 0
			if (err == nil) != wantOK || a.OK != wantOK || (err != nil && (!errors.Is(err, ErrFailed) || a.Reason == "")) {
				t.Fatalf("got ok=%v err=%v reason %q, want ok=%v", a.OK, err, a.Reason, wantOK)
			}
			if capacity != tt.capacity || len(a.Prefill) != len(tt.peers) {
				t.Fatalf("capacity %d, %d peers listed; want %d, %d", capacity, len(a.Prefill), tt.capacity, len(tt.peers))
			}
			for _, p := range a.Prefill {
				if p.OK == slices.Contains(tt.bad, p.Addr) || (!p.OK && p.Reason == "") {
					t.Fatalf("peer %s: ok=%v reason %q", p.Addr, p.OK, p.Reason)
				}
			}
		})
	}
}
