package audit_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// The public log serves in full only deployment facts that name no
// tenant; every other entry is its leaf hash, and the monitor's reading
// (CutServedEntry) gives every entry's leaf back.
func TestServedEntries(t *testing.T) {
	rec := func(tenant cloison.TenantID, p audit.Payload) audit.Record {
		r, err := audit.Event{OccurredAt: time.Unix(1_800_000_000, 0), Tenant: tenant, Actor: "admin:officer", Payload: p}.Prepare()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	capacity := audit.CapacityAttestation{Node: "n1", Model: "m", AdvertisedContext: 8, ServableContext: 8, PoolPages: 4, PageTokens: 16, Ready: true}
	key := audit.KeyChange{Op: audit.KeyCreated, Key: "k1", Purpose: "jwt"}
	tests := []struct {
		name   string
		rec    audit.Record
		public bool
	}{
		{"a tenant's request", tenantRecord(t, "alpha", 1), false},
		{"a violation naming two tenants", tenantRecord(t, "alpha", 2, "bravo"), false},
		{"an incident naming a tenant", rec("", audit.IncidentOpened{Incident: "inc-1", Source: "operator", Version: 1, Tenants: []cloison.TenantID{"alpha"}}), false},
		{"an incident naming none", rec("", audit.IncidentOpened{Incident: "inc-2", Source: "operator", Version: 1}), false},
		{"a node's capacity", rec("", capacity), true},
		{"a signing key", rec("", key), true},
		{"a public kind with a tenant column", rec("alpha", key), false},
	}
	var bundle []byte
	for _, tc := range tests {
		if got := audit.ServedPublic(tc.rec); got != tc.public {
			t.Errorf("%s: public %v, want %v", tc.name, got, tc.public)
		}
		e := audit.ServedEntry(tc.rec)
		if tc.public && !bytes.Equal(e, tc.rec.Payload) {
			t.Errorf("%s: served %q, want the payload", tc.name, e)
		}
		if lh := audit.LeafHash(tc.rec); !tc.public && !bytes.Equal(e, lh[:]) {
			t.Errorf("%s: served %q, want the leaf hash", tc.name, e)
		}
		var err error
		if bundle, err = audit.AppendBundleEntry(bundle, e); err != nil {
			t.Fatal(err)
		}
	}
	for i, rest := 0, bundle; len(rest) > 0; i++ {
		_, leaf, r, err := audit.CutServedEntry(rest)
		if err != nil {
			t.Fatal(err)
		}
		if leaf != audit.LeafHash(tests[i].rec) {
			t.Errorf("%s: the monitor's leaf is not the tree's", tests[i].name)
		}
		rest = r
	}
	var err error
	for rest := bundle[:len(bundle)-1]; err == nil && len(rest) > 0; {
		_, _, rest, err = audit.CutServedEntry(rest)
	}
	if !errors.Is(err, audit.ErrMalformed) {
		t.Errorf("truncated bundle: got %v, want ErrMalformed", err)
	}
	if _, err = audit.AppendBundleEntry(nil, make([]byte, audit.MaxServedEntry+1)); !errors.Is(err, audit.ErrInvalidEvent) {
		t.Errorf("oversized entry: got %v, want ErrInvalidEvent", err)
	}
}

func FuzzCutServedEntry(f *testing.F) {
	f.Add([]byte{0, 2, 'a', 'b'})
	f.Add(append([]byte{0, 32}, make([]byte, 32)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		entry, leaf, rest, err := audit.CutServedEntry(b)
		if err != nil {
			return
		}
		if len(entry)+len(rest)+2 != len(b) {
			t.Fatalf("cut %d + %d of %d bytes", len(entry), len(rest), len(b))
		}
		if len(entry) != tlog.HashSize && leaf != tlog.RecordHash(entry) {
			t.Fatal("a payload's leaf is not its record hash")
		}
	})
}
