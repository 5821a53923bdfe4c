package isolation

import (
	"errors"
	"sync"
	"testing"
)

// Partition and EnsureTenant report what Stats and MaxLeaseTokens report,
// without a scan; EnsureTenant adds a missing tenant once and never replaces
// a partition.
func TestEnsureTenant(t *testing.T) {
	p := newPool(t, Config{Pages: 64, PageTokens: 16, DefaultZeroing: ZeroCrossTenant},
		TenantConfig{ID: "old", Tier: TierShared, Zeroing: ZeroNever, Cap: 8})
	if _, err := p.Partition("new"); !errors.Is(err, ErrUnknownTenant) {
		t.Fatalf("Partition of an unknown tenant: got %v, want ErrUnknownTenant", err)
	}
	tests := []struct {
		name    string
		tc      TenantConfig
		want    Partition
		wantErr error
	}{
		{"known tenant: the partition it has, not the config asked", TenantConfig{ID: "old", Tier: TierDedicated, Reserved: 4, Zeroing: ZeroAlways},
			Partition{Tenant: "old", Tier: TierShared, Zeroing: ZeroCrossTenant, MaxLeaseTokens: 8 * 16, PageTokens: 16}, nil},
		{"new dedicated tenant is added", TenantConfig{ID: "ded", Tier: TierDedicated, Reserved: 4, Zeroing: ZeroAlways},
			Partition{Tenant: "ded", Tier: TierDedicated, Zeroing: ZeroAlways, Reserved: 4, MaxLeaseTokens: 4 * 16, PageTokens: 16}, nil},
		{"added once: a second call returns it", TenantConfig{ID: "ded", Tier: TierShared},
			Partition{Tenant: "ded", Tier: TierDedicated, Zeroing: ZeroAlways, Reserved: 4, MaxLeaseTokens: 4 * 16, PageTokens: 16}, nil},
		{"a tenant the pool cannot hold gets no partition", TenantConfig{ID: "huge", Tier: TierDedicated, Reserved: 1000}, Partition{}, ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.EnsureTenant(tt.tc)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v, %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil {
				if _, perr := p.Partition(tt.tc.ID); !errors.Is(perr, ErrUnknownTenant) {
					t.Fatalf("after a failed EnsureTenant: got %v, want ErrUnknownTenant", perr)
				}
				return
			}
			if pp, err := p.Partition(tt.tc.ID); err != nil || pp != got {
				t.Fatalf("Partition: got %+v, %v; want %+v", pp, err, got)
			}
			if n, _ := p.MaxLeaseTokens(tt.tc.ID); n != got.MaxLeaseTokens {
				t.Fatalf("MaxLeaseTokens %d, partition says %d", n, got.MaxLeaseTokens)
			}
			for _, st := range p.Stats().Tenants {
				if st.Tenant == got.Tenant && (st.Tier != got.Tier || st.Zeroing != got.Zeroing || st.Reserved != got.Reserved) {
					t.Fatalf("Stats %+v, partition %+v", st, got)
				}
			}
		})
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// Concurrent first requests of one tenant add its partition once: a
// dedicated tenant's pages are taken once, and every caller sees them.
func TestEnsureTenantConcurrent(t *testing.T) {
	p := newPool(t, Config{Pages: 64, PageTokens: 16})
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var part Partition
			part, errs[i] = p.EnsureTenant(TenantConfig{ID: "d", Tier: TierDedicated, Reserved: 40})
			if errs[i] == nil && part.Reserved != 40 {
				errs[i] = errors.New("partition without its reservation")
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if st := p.Stats(); len(st.Tenants) != 1 {
		t.Fatalf("got %d tenants, want 1", len(st.Tenants))
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}
