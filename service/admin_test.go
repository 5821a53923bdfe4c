package service

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// kv_pages is the tenant's partition on every node: an update may restate
// it, never change it, and a refused update changes nothing else.
func TestUpdateTenantKVPagesFixed(t *testing.T) {
	st := &fakeTenants{tenants: map[cloison.TenantID]tenancy.Tenant{"acme": {ID: "acme", Quotas: tenancy.Quotas{KVPages: 8, MaxConcurrent: 2}}}}
	a := NewAdmin(AdminDeps{Tenants: st})
	n, pages := 5, 9
	u := TenantUpdate{}
	u.Quotas = &struct {
		MaxConcurrent   *int `json:"max_concurrent"`
		KVPages         *int `json:"kv_pages"`
		TokensPerMinute *int `json:"tokens_per_minute"`
		MaxContext      *int `json:"max_context"`
	}{MaxConcurrent: &n, KVPages: &pages}
	if _, err := a.UpdateTenant(context.Background(), "admin:alice", "acme", u); !errors.Is(err, ErrKVPagesFixed) {
		t.Fatalf("got %v, want ErrKVPagesFixed", err)
	}
	if got := st.tenants["acme"].Quotas.MaxConcurrent; got != 2 {
		t.Fatalf("refused update changed max_concurrent to %d", got)
	}
	pages = 8
	got, err := a.UpdateTenant(context.Background(), "admin:alice", "acme", u)
	if err != nil || got.Quotas.MaxConcurrent != 5 || got.Quotas.KVPages != 8 {
		t.Fatalf("got %+v, %v; want max_concurrent 5, kv_pages 8", got.Quotas, err)
	}
}

// A residency given without regions is stored as "any region" (an empty
// list, never null).
func TestUpdateTenantResidencyRegionsNeverNil(t *testing.T) {
	st := &fakeTenants{tenants: map[cloison.TenantID]tenancy.Tenant{"acme": {ID: "acme"}}}
	got, err := NewAdmin(AdminDeps{Tenants: st}).UpdateTenant(context.Background(), "admin:alice", "acme", TenantUpdate{Residency: &tenancy.Residency{Tier: "t1"}})
	if err != nil || got.Residency.Regions == nil || got.Residency.Tier != "t1" {
		t.Fatalf("got %+v, %v; want regions [] and tier t1", got.Residency, err)
	}
}

// A create the store refused after the pool made the partition is retried
// onto that partition; a partition that does not fit the tenant is not
// reused.
func TestCreateTenantReusesLeftoverPartition(t *testing.T) {
	tn := tenancy.Tenant{ID: "acme", Name: "Acme", Status: tenancy.StatusActive, Classification: tenancy.ClassInternal, Tier: isolation.TierShared, Zeroing: isolation.ZeroAlways,
		Quotas: tenancy.Quotas{MaxConcurrent: 1, KVPages: 4, TokensPerMinute: 100, MaxContext: 64}}
	if err := tn.Validate(); err != nil {
		t.Fatalf("test tenant invalid: %v", err)
	}
	for _, c := range []struct {
		name string
		left isolation.Partition
		ok   bool
	}{
		{"fits", isolation.Partition{Tenant: "acme", Tier: isolation.TierShared, Zeroing: isolation.ZeroAlways}, true},
		{"other tier", isolation.Partition{Tenant: "acme", Tier: isolation.TierDedicated, Zeroing: isolation.ZeroAlways, Reserved: 4}, false},
	} {
		st := &fakeTenants{tenants: map[cloison.TenantID]tenancy.Tenant{}}
		pool := &fakePool{addErr: isolation.ErrInvalidConfig, parts: map[cloison.TenantID]isolation.Partition{"acme": c.left}}
		_, err := NewAdmin(AdminDeps{Tenants: st, Pool: pool}).CreateTenant(context.Background(), "admin:alice", tn)
		if (err == nil) != c.ok || (st.changes == 1) != c.ok {
			t.Errorf("%s: got err %v, %d stored; want ok %v", c.name, err, st.changes, c.ok)
		}
	}
}

// fakeReloader prepares a bundle and swaps it only when commit succeeds.
type fakeReloader struct{ swapped bool }

func (f *fakeReloader) ReloadWith(_ context.Context, _ map[string]string, commit func(string) error) (string, error) {
	if err := commit("sha256:x"); err != nil {
		return "", err
	}
	f.swapped = true
	return "sha256:x", nil
}

// A policy bundle serves only once its policy.reloaded event is recorded,
// by the actor who asked.
func TestReloadPoliciesLedgersBeforeSwap(t *testing.T) {
	var got []audit.Payload
	for _, down := range []bool{false, true} {
		rel := &fakeReloader{}
		led := AppendFunc(func(_ context.Context, _ cloison.TenantID, p audit.Payload) (audit.Record, error) {
			if down {
				return audit.Record{}, errLedger
			}
			got = append(got, p)
			return audit.Record{}, nil
		})
		_, err := NewAdmin(AdminDeps{Policies: rel, Ledger: led}).ReloadPolicies(context.Background(), "admin:alice", map[string]string{"a.rego": "package a"})
		if down != (err != nil) || rel.swapped == down {
			t.Fatalf("ledger down %v: got err %v, swapped %v", down, err, rel.swapped)
		}
	}
	if len(got) != 1 || got[0].(audit.PolicyReloaded).Actor != "admin:alice" || got[0].(audit.PolicyReloaded).Files != 1 {
		t.Fatalf("got events %+v, want one policy.reloaded by admin:alice", got)
	}
	if _, err := NewAdmin(AdminDeps{}).ReloadPolicies(context.Background(), "admin:alice", nil); !errors.Is(err, ErrInvalidField) {
		t.Fatalf("no files: got %v, want ErrInvalidField", err)
	}
}

// A node without a key ring answers every key operation with ErrNoKeyRing.
func TestKeysWithoutRing(t *testing.T) {
	a := NewAdmin(AdminDeps{})
	if _, err := a.Keys(); !errors.Is(err, ErrNoKeyRing) {
		t.Fatalf("Keys: got %v", err)
	}
	if _, err := a.RotateKeys(context.Background(), "admin:alice"); !errors.Is(err, ErrNoKeyRing) {
		t.Fatalf("RotateKeys: got %v", err)
	}
	if _, err := a.RetireKey(context.Background(), "admin:alice", "k1"); !errors.Is(err, ErrNoKeyRing) {
		t.Fatalf("RetireKey: got %v", err)
	}
}
