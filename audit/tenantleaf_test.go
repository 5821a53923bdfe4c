package audit_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Each register kind that names several tenants enters each one's log as
// a view for that tenant alone: the other tenants counted, their ids and
// the content digest (which hashes a version naming them) absent, the
// entry's chain hash present; an entry naming one tenant is its own leaf.
func TestTenantLeafRegisterKinds(t *testing.T) {
	both := []cloison.TenantID{"alpha", "bravo"}
	digest := audit.Sum([]byte("version content naming alpha and bravo"))
	for _, c := range []struct {
		name string
		p    audit.Payload
		keep string // a field the view keeps
	}{
		{"opened", audit.IncidentOpened{Incident: "inc-1", Source: "isolation_violation", Version: 1, ContentDigest: digest, Tenants: both}, `"source":"isolation_violation"`},
		{"updated", audit.IncidentUpdated{Incident: "inc-1", Version: 2, ContentDigest: digest, Tenants: both}, `"version":2`},
		{"purged", audit.IncidentPurged{Incident: "inc-1", Versions: 2, Notices: 3, LastContentDigest: digest, RetainUntil: "2031-12-02", Tenants: both}, `"notices":3`},
		{"violation", audit.IsolationViolation{Request: "req-bravo", Invariant: "epoch", AffectedTenants: both, AffectedRequests: []cloison.RequestID{"req-bravo"}}, `"invariant":"epoch"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := audit.Event{OccurredAt: time.Unix(1_800_000_000, 0), Actor: "admin:elise", Payload: c.p}
			if c.name == "violation" {
				e.Tenant = "bravo"
			}
			rec, err := e.Prepare()
			if err != nil {
				t.Fatal(err)
			}
			rec = audit.Rechain(rec, audit.Head{})
			leaf, ok := audit.TenantLeaf(rec, "alpha")
			if !ok {
				t.Fatal("not in alpha's log")
			}
			v, redacted := audit.DecodeTenantView(leaf)
			if !redacted || v.Tenant != "alpha" || v.OtherTenants != 1 || v.Entry != rec.Hash || v.Kind != rec.Kind {
				t.Fatalf("view %+v (redacted %v) of %s", v, redacted, rec.Payload)
			}
			for _, hidden := range []string{"bravo", digest.String()} {
				if bytes.Contains(leaf, []byte(hidden)) {
					t.Errorf("alpha's leaf holds %q: %s", hidden, leaf)
				}
			}
			if !bytes.Contains(leaf, []byte(c.keep)) {
				t.Errorf("alpha's leaf lacks %s: %s", c.keep, leaf)
			}
			if _, err := audit.DecodeEnvelope(leaf); err == nil {
				t.Errorf("a view decodes as a ledger envelope")
			}
			if _, ok := audit.TenantLeaf(rec, "charlie"); ok {
				t.Errorf("in the log of a tenant it does not name")
			}
			if c.name == "violation" {
				if own, _ := audit.TenantLeaf(rec, "bravo"); !bytes.Contains(own, []byte("req-bravo")) {
					t.Errorf("bravo's view lacks its own request: %s", own)
				}
			}
		})
	}
	one, err := audit.Event{OccurredAt: time.Unix(1_800_000_000, 0), Actor: "admin:elise",
		Payload: audit.IncidentOpened{Incident: "inc-2", Source: "admin", Version: 1, ContentDigest: digest, Tenants: []cloison.TenantID{"alpha"}}}.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if leaf, ok := audit.TenantLeaf(one, "alpha"); !ok || !bytes.Equal(leaf, one.Payload) {
		t.Errorf("an entry naming alpha alone: got %s, want its payload", leaf)
	}
}

// FuzzTenantLeaf: whatever the bytes of an entry, TenantLeaf does not
// panic, gives a leaf only to a tenant the entry names, and a view it
// gives is canonical, for that tenant, and keeps none of the fields that
// name tenants or hash what does.
func FuzzTenantLeaf(f *testing.F) {
	for _, p := range []audit.Payload{
		audit.IsolationViolation{Request: "r", Invariant: "epoch", AffectedTenants: []cloison.TenantID{"a", "b"}},
		audit.IncidentOpened{Incident: "i", Source: "admin", Version: 1, Tenants: []cloison.TenantID{"a", "b"}},
		audit.RequestCompleted{Request: "r", Model: "m", Tier: "always"},
	} {
		rec, err := audit.Event{OccurredAt: time.Unix(1_800_000_000, 0), Tenant: "a", Actor: "x", Payload: p}.Prepare()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec.Payload, "a")
		f.Add(rec.Payload, "b")
	}
	f.Fuzz(func(t *testing.T, payload []byte, tenant string) {
		rec := audit.Record{Seq: 1, Payload: payload}
		leaf, ok := audit.TenantLeaf(rec, cloison.TenantID(tenant))
		if !ok {
			return
		}
		named, _ := audit.TenantsNamed(rec)
		var found bool
		for _, n := range named {
			found = found || n == cloison.TenantID(tenant)
		}
		if !found {
			t.Fatalf("a leaf for %q, which the entry (naming %v) does not name", tenant, named)
		}
		if v, redacted := audit.DecodeTenantView(leaf); redacted {
			if v.Tenant != cloison.TenantID(tenant) || !audit.IsCanonical(leaf) {
				t.Fatalf("view %+v for %q", v, tenant)
			}
			var data map[string]json.RawMessage
			if err := json.Unmarshal(v.Data, &data); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"tenants", "affected_tenants", "affected_requests", "content_digest", "last_content_digest", "recipient_id"} {
				if _, ok := data[k]; ok {
					t.Fatalf("view for %q keeps %s: %s", tenant, k, leaf)
				}
			}
		} else if !bytes.Equal(leaf, payload) || len(named) != 1 {
			t.Fatalf("a verbatim leaf of an entry naming %v", named)
		}
	})
}

// TenantLeaves is TenantLeaf for every tenant an entry names.
func TestTenantLeavesIsTenantLeafForEach(t *testing.T) {
	rec, err := audit.Event{OccurredAt: time.Unix(1_800_000_000, 0), Tenant: "alpha", Actor: "engine:t", Payload: audit.IsolationViolation{
		Request: "r", Invariant: "epoch", AffectedTenants: []cloison.TenantID{"alpha", "bravo", "charlie"}}}.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	all := audit.TenantLeaves(rec)
	if len(all) != 3 {
		t.Fatalf("got %d leaves, want 3", len(all))
	}
	for _, l := range all {
		if one, ok := audit.TenantLeaf(rec, l.Tenant); !ok || !bytes.Equal(one, l.Leaf) {
			t.Errorf("%s: TenantLeaves gives %s, TenantLeaf %s", l.Tenant, l.Leaf, one)
		}
	}
}
