package audit_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"pgregory.net/rapid"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// tenantKeys returns the signer of each tenant log (the log key under the
// tenant origin's name) and the log's published verifier key.
func tenantKeys(t testing.TB) (func(cloison.TenantID) note.Signer, string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(nil)
	vk, err := audit.TreeVerifierKey("tl-test", priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return func(tn cloison.TenantID) note.Signer {
		s, err := audit.TenantSigner("tl-test", priv, tn)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, vk
}

func tenantRecord(t interface{ Fatal(...any) }, tenant cloison.TenantID, i int, affected ...cloison.TenantID) audit.Record {
	var p audit.Payload = audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-%d", i)), Model: "m",
		PromptTokens: int64(i), CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}
	if len(affected) > 0 {
		p = audit.IsolationViolation{Request: cloison.RequestID(fmt.Sprintf("req-%d", i)), Invariant: "owner_tag", AffectedTenants: affected}
	}
	r, err := audit.Event{OccurredAt: time.Unix(1_800_000_000+int64(i), 0), Tenant: tenant, Actor: "engine:t", Payload: p}.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A tenant log holds exactly the entries that name the tenant, in ledger
// order — verbatim when they name it alone, as a redacted view (other
// tenants counted, never named, bound to the entry by its chain hash)
// otherwise — and every inclusion proof of it is computed from its leaves
// alone: the tree built from the tenant's leaves without the rest of the
// ledger gives the same root and the same proofs, so no proof hash carries
// another tenant's entry, and positions are 1..n whatever the global seq
// was.
func TestTenantLogIsOwnEntriesOnly(t *testing.T) {
	signer, vkey := tenantKeys(t)
	rapid.Check(t, func(rt *rapid.T) {
		tenants := []cloison.TenantID{"alpha", "beta", "gamma"}
		n := rapid.IntRange(1, 60).Draw(rt, "n")
		var ledger []audit.Record
		var head audit.Head
		for i := 0; i < n; i++ {
			tn := tenants[rapid.IntRange(0, 2).Draw(rt, "tenant")]
			var r audit.Record
			if rapid.IntRange(0, 9).Draw(rt, "shared") == 0 {
				r = tenantRecord(rt, tn, i, tn, tenants[(i+1)%3]) // names another tenant: a redacted view in each log
			} else {
				r = tenantRecord(rt, tn, i)
			}
			r = audit.Rechain(r, head)
			head = r.Head()
			ledger = append(ledger, r)
		}
		for _, tn := range tenants {
			full := &audit.MemTree{}
			var own [][]byte
			for _, r := range ledger {
				leaf, ok := audit.TenantLeaf(r, tn)
				named, _ := audit.TenantsNamed(r)
				if ok != slices.Contains(named, tn) {
					rt.Fatalf("entry naming %v: in %s's log: %v", named, tn, ok)
				}
				if !ok {
					continue
				}
				if _, err := full.Append(leaf); err != nil {
					rt.Fatal(err)
				}
				own = append(own, leaf)
				// Its own payload when it names tn alone; otherwise a view
				// for tn that names no other tenant.
				if v, redacted := audit.DecodeTenantView(leaf); redacted {
					if v.Tenant != tn || v.Entry != r.Hash || v.OtherTenants != int64(len(named)-1) {
						rt.Fatalf("view %+v of an entry naming %v", v, named)
					}
				} else if len(named) != 1 || string(leaf) != string(r.Payload) {
					rt.Fatalf("tenant %s's log holds an entry naming %v verbatim", tn, named)
				}
				for _, other := range tenants {
					if other != tn && bytes.Contains(leaf, []byte(other)) {
						rt.Fatalf("tenant %s's leaf names %s: %s", tn, other, leaf)
					}
				}
			}
			if full.Size() == 0 {
				continue
			}
			alone := &audit.MemTree{}
			for _, p := range own {
				_, _ = alone.Append(p)
			}
			origin, _ := audit.TenantOrigin("tl-test", tn)
			h, err := full.Head(origin, full.Size())
			if err != nil {
				rt.Fatal(err)
			}
			h2, _ := alone.Head(origin, alone.Size())
			if h != h2 {
				rt.Fatalf("root depends on other tenants' entries")
			}
			cp, err := audit.SignTenantHead(signer(tn), tn, h)
			if err != nil {
				rt.Fatal(err)
			}
			for pos := uint64(1); pos <= full.Size(); pos++ {
				p, err := full.ProveRecord(pos, full.Size())
				if err != nil {
					rt.Fatal(err)
				}
				p2, _ := alone.ProveRecord(pos, alone.Size())
				if fmt.Sprint(p) != fmt.Sprint(p2) {
					rt.Fatalf("proof of %d depends on other tenants' entries", pos)
				}
				if _, err := audit.VerifyTenantInclusion(cp, vkey, tn, pos, own[pos-1], p); err != nil {
					rt.Fatalf("inclusion of %d: %v", pos, err)
				}
				// Another position, another tenant, or the global log's
				// reading of the same note is refused.
				if pos > 1 {
					if _, err := audit.VerifyTenantInclusion(cp, vkey, tn, pos-1, own[pos-1], p); !errors.Is(err, audit.ErrNotIncluded) {
						rt.Fatalf("wrong position: got %v, want ErrNotIncluded", err)
					}
				}
			}
			other := tenants[0]
			if other == tn {
				other = tenants[1]
			}
			// The key name (the tenant origin) already refuses them.
			if _, err := audit.OpenTenantHead(cp, vkey, other); !errors.Is(err, audit.ErrBadSignature) {
				t.Fatalf("tenant %s's checkpoint read as %s's: got %v, want ErrBadSignature", tn, other, err)
			}
			if _, err := audit.OpenTreeHead(cp, vkey); !errors.Is(err, audit.ErrBadSignature) {
				t.Fatalf("tenant checkpoint read as the global one: got %v, want ErrBadSignature", err)
			}
		}
	})
}

// A tenant holding a checkpoint of its log detects a shorter log and a
// rewritten one through consistency, as for the global log.
func TestTenantLogConsistency(t *testing.T) {
	signer, vkey := tenantKeys(t)
	origin, _ := audit.TenantOrigin("tl-test", "alpha")
	build := func(n int, rewrite int) *audit.MemTree {
		m := &audit.MemTree{}
		for i := 1; i <= n; i++ {
			r := tenantRecord(t, "alpha", i)
			if i == rewrite {
				r = tenantRecord(t, "alpha", 1000+i)
			}
			if _, err := m.Append(r.Payload); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	sign := func(m *audit.MemTree) []byte {
		h, err := m.Head(origin, m.Size())
		if err != nil {
			t.Fatal(err)
		}
		cp, err := audit.SignTenantHead(signer("alpha"), "alpha", h)
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	honest := build(20, 0)
	trusted := sign(build(12, 0))
	tests := []struct {
		name string
		now  *audit.MemTree
		want error
	}{
		{"grown", honest, nil},
		{"same", build(12, 0), nil},
		{"truncated", build(9, 0), audit.ErrSmallerTree},
		{"rewritten below the trusted size", build(20, 5), audit.ErrFork},
		{"rewritten at the trusted size", build(12, 5), audit.ErrFork},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var proof tlog.TreeProof
			if tc.now.Size() >= 12 {
				var err error
				if proof, err = tc.now.ProveTree(12, tc.now.Size()); err != nil {
					t.Fatal(err)
				}
			}
			_, err := audit.VerifyTenantConsistency(vkey, "alpha", trusted, sign(tc.now), proof)
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := audit.SignTenantHead(signer("beta"), "beta", audit.TreeHead{Origin: origin, Size: 1}); !errors.Is(err, audit.ErrInvalidEvent) {
		t.Errorf("signing alpha's head as beta's: got %v, want ErrInvalidEvent", err)
	}
}

// TenantVisible (the rows a tenant reads verbatim) is the tenant's own
// entries that name no other tenant: an entry naming another tenant, or
// an incident event without a tenant column, is in the tenant's log only
// as a leaf it reads through the log.
func TestTenantVisibleIsVerbatimOnly(t *testing.T) {
	own := tenantRecord(t, "alpha", 1)
	shared := tenantRecord(t, "alpha", 2, "alpha", "beta")
	inc, err := audit.Event{OccurredAt: time.Unix(1_800_000_000, 0), Actor: "engine:t", Payload: audit.IncidentOpened{
		Incident: "inc-1", Source: "isolation_violation", Version: 1, Tenants: []cloison.TenantID{"alpha"}}}.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		rec     audit.Record
		visible bool
		leaf    bool
	}{
		{"own", own, true, true},
		{"shared", shared, false, true},
		{"incident", inc, false, true},
	} {
		_, leaf := audit.TenantLeaf(c.rec, "alpha")
		if got := audit.TenantVisible(c.rec, "alpha"); got != c.visible || leaf != c.leaf {
			t.Errorf("%s: visible %v, leaf %v; want %v, %v", c.name, got, leaf, c.visible, c.leaf)
		}
		if audit.TenantVisible(c.rec, "beta") {
			t.Errorf("%s: visible to beta", c.name)
		}
	}
}

// A tenant checkpoint's key name is its origin (C2SP tlog-checkpoint), so a
// plain note client opens it with the tenant key derived from the published
// one; tenant checkpoints signed before, under the log's key name, still
// open with OpenTenantHead, and neither key opens another tenant's.
func TestTenantCheckpointKeyNameIsOrigin(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	vkey, err := audit.TreeVerifierKey("tl-test", priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	m := &audit.MemTree{}
	for i := 1; i <= 3; i++ {
		if _, err := m.Append(tenantRecord(t, "alpha", i).Payload); err != nil {
			t.Fatal(err)
		}
	}
	origin, _ := audit.TenantOrigin("tl-test", "alpha")
	h, _ := m.Head(origin, m.Size())
	s, err := audit.TenantSigner("tl-test", priv, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.SignTenantHead(s, "alpha", h)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(cp), "\n")
	sig := string(cp[strings.LastIndex(string(cp), "\n\n")+2:])
	if name := strings.Fields(sig)[1]; name != first || name != string(origin) {
		t.Fatalf("key name %q, origin line %q: want both %q", name, first, origin)
	}
	tkey, err := audit.TenantVerifierKey(vkey, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(tkey)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := note.Open(cp, note.VerifierList(v)); err != nil || !strings.HasPrefix(n.Text, string(origin)+"\n") {
		t.Fatalf("note.Open with the derived tenant key: %v", err)
	}
	if got, err := audit.OpenTenantHead(cp, vkey, "alpha"); err != nil || got != h {
		t.Fatalf("OpenTenantHead: got %v, %v, want %v", got, err, h)
	}
	// A checkpoint signed before, under the log's key name.
	logSigner, _ := audit.TreeSigner("tl-test", priv)
	legacy, err := note.Sign(&note.Note{Text: h.TreeNoteText()}, logSigner)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := audit.OpenTenantHead(legacy, vkey, "alpha"); err != nil || got != h {
		t.Fatalf("legacy tenant checkpoint: got %v, %v, want %v", got, err, h)
	}
	if _, err := audit.OpenTenantHead(legacy, vkey, "beta"); !errors.Is(err, audit.ErrMalformed) {
		t.Fatalf("legacy checkpoint of alpha read as beta's: got %v, want ErrMalformed", err)
	}
	if _, err := audit.SignTenantHead(logSigner, "alpha", h); !errors.Is(err, audit.ErrInvalidEvent) {
		t.Fatalf("signing a tenant head under the log's key name: got %v, want ErrInvalidEvent", err)
	}
}
