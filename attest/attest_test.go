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
	f16 := func(p PrefillPeer) PrefillPeer { p.Attestation.KVType = "f16"; return p }
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
		{"another KV type", []PrefillPeer{peer("p1", 1<<20, 0, "m"), f16(peer("p2", 1<<20, 0, "m"))}, []string{"p2"}, 1 << 20},
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

// Residency labels (region, tier): published as given, a malformed one fails
// the attestation (a node must not start claiming a label it cannot), and
// Serves decides a tenant's requirement, unlabelled nodes serving only
// tenants that require nothing.
func TestLabels(t *testing.T) {
	ok := Config{ModelContext: 4096, PoolPages: 256, PageTokens: 16, Labels: Labels{Region: "ca-qc", Tier: "dedicated"}}
	a, err := Capacity(ok)
	if err != nil || a.Labels != ok.Labels {
		t.Fatalf("got %+v, %v, want the labels published", a.Labels, err)
	}
	for _, bad := range []Labels{{Region: "CA-QC"}, {Region: "ca_qc"}, {Tier: "-dedicated"}, {Region: "ca-qc-"}, {Region: string(make([]byte, 64))}} {
		c := ok
		c.Labels = bad
		if a, err := Capacity(c); !errors.Is(err, ErrFailed) || a.OK {
			t.Errorf("labels %+v: got ok=%v %v, want ErrFailed", bad, a.OK, err)
		}
	}
	// A prefill peer that publishes a malformed label fails the decode
	// node's check.
	decode, _ := Capacity(Config{ModelContext: 4096, PoolPages: 256, PageTokens: 16})
	peer := PrefillPeer{Addr: "p", ModelDigest: "m", Attestation: decode}
	peer.Attestation.Labels = Labels{Region: "Not A Label"}
	if _, _, err := Prefill(decode, "m", []PrefillPeer{peer}); !errors.Is(err, ErrFailed) {
		t.Errorf("peer with a malformed label: got %v, want ErrFailed", err)
	}

	qc := Labels{Region: "ca-qc", Tier: "dedicated"}
	tests := []struct {
		name    string
		l       Labels
		regions []string
		tier    string
		want    bool
	}{
		{"no requirement", qc, nil, "", true},
		{"unlabelled, no requirement", Labels{}, nil, "", true},
		{"region allowed", qc, []string{"ca-on", "ca-qc"}, "", true},
		{"region not allowed", qc, []string{"us-east"}, "", false},
		{"unlabelled, region required", Labels{}, []string{"ca-qc"}, "", false},
		{"tier matches", qc, nil, "dedicated", true},
		{"tier differs", Labels{Region: "ca-qc", Tier: "shared"}, []string{"ca-qc"}, "dedicated", false},
		{"unlabelled, tier required", Labels{Region: "ca-qc"}, nil, "dedicated", false},
		{"both", qc, []string{"ca-qc"}, "dedicated", true},
	}
	for _, tt := range tests {
		if got := tt.l.Serves(tt.regions, tt.tier); got != tt.want {
			t.Errorf("%s: Serves = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A prefill node attests exactly the labels its certificate names
// (Certified); without a certificate, none.
func TestPrefillLabelsCertified(t *testing.T) {
	decode, _ := Capacity(Config{ModelContext: 4096, PoolPages: 256, PageTokens: 16})
	qc, us := Labels{Region: "ca-qc"}, Labels{Region: "us-east"}
	peer := func(attested Labels, certified *Labels) PrefillPeer {
		a := decode
		a.Labels = attested
		return PrefillPeer{Addr: "p", ModelDigest: "m", Attestation: a, Certified: certified}
	}
	tests := []struct {
		name string
		p    PrefillPeer
		ok   bool
	}{
		{"no labels, no certificate", peer(Labels{}, nil), true},
		{"no labels, certificate names none", peer(Labels{}, &Labels{}), true},
		{"labels its certificate names", peer(qc, &qc), true},
		{"another region than its certificate's", peer(qc, &us), false},
		{"labels its certificate does not name", peer(qc, &Labels{}), false},
		{"no labels, certificate names some", peer(Labels{}, &qc), false},
		{"labels without a certificate", peer(qc, nil), false},
	}
	for _, tt := range tests {
		a, _, err := Prefill(decode, "m", []PrefillPeer{tt.p})
		if (err == nil) != tt.ok || a.Prefill[0].OK != tt.ok {
			t.Errorf("%s: got ok=%v (%v), want %v", tt.name, err == nil, err, tt.ok)
		}
	}
}
