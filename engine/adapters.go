package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/model"
)

// Adapters holds a node's LoRA adapters, each registered for one tenant
// under a name. It is reached by (tenant, name) only: there is no lookup by
// name alone, so another tenant's adapter and one that does not exist give
// the same ErrAdapterNotFound through the same single map lookup, and List
// returns the caller's adapters only — a tenant cannot use, list or learn
// of another's. Safe for concurrent use.
//
// The driving sequence (the service's): LoadAdapter for the engine's model,
// Register (ledgered with the admin action), then per request Lookup and
// GenerateRequest.Adapter; Unregister returns the adapter so that the
// caller closes it once the requests that named it have finished.
type Adapters struct {
	mu sync.RWMutex
	m  map[adapterKey]*model.Adapter // guarded by mu
}

type adapterKey struct {
	tenant cloison.TenantID
	name   string
}

// AdapterInfo describes a registered adapter (what List returns: no
// weights).
type AdapterInfo struct {
	Name    string
	Digest  [32]byte
	Rank    int
	Alpha   float32
	Tensors int
}

// ErrAdapterNotFound: no adapter of that name for the tenant — whether
// another tenant has one of that name or none exists (the code and message
// of a model the node does not serve: the same 404 either way).
var ErrAdapterNotFound = cloison.NewError(cloison.CodeModelNotFound, "model not found")

// ErrAdapterExists: the tenant already has an adapter of that name.
var ErrAdapterExists = cloison.NewError(cloison.CodeConflict, "an adapter of that name exists")

// ErrAdapterName: a name outside 1–64 bytes of letters, digits, '.', '_'
// and '-'.
var ErrAdapterName = cloison.NewError(cloison.CodeInvalid, "invalid adapter name")

// NewAdapters returns an empty set.
func NewAdapters() *Adapters { return &Adapters{m: map[adapterKey]*model.Adapter{}} }

func checkAdapterName(name string) error {
	if len(name) == 0 || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("%w: %q", ErrAdapterName, name)
	}
	return nil
}

// Register makes ad usable by tenant under name.
//
// Errors: ErrAdapterName, ErrAdapterExists (the tenant's name is taken;
// another tenant's adapter of the same name is no conflict), errInternal
// for a nil adapter.
func (s *Adapters) Register(tenant cloison.TenantID, name string, ad *model.Adapter) error {
	if err := checkAdapterName(name); err != nil {
		return err
	}
	if ad == nil || tenant == "" {
		return fmt.Errorf("%w: register of a nil adapter or for no tenant", errInternal)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := adapterKey{tenant, name}
	if _, dup := s.m[k]; dup {
		return fmt.Errorf("%w: %q", ErrAdapterExists, name)
	}
	s.m[k] = ad
	return nil
}

// Lookup returns tenant's adapter of that name.
//
// Errors: ErrAdapterNotFound (also for another tenant's adapter).
func (s *Adapters) Lookup(tenant cloison.TenantID, name string) (*model.Adapter, error) {
	s.mu.RLock()
	ad, ok := s.m[adapterKey{tenant, name}]
	s.mu.RUnlock()
	if !ok {
		return nil, ErrAdapterNotFound
	}
	return ad, nil
}

// Unregister removes tenant's adapter of that name and returns it (for
// Close once no request runs under it).
//
// Errors: ErrAdapterNotFound (also for another tenant's adapter).
func (s *Adapters) Unregister(tenant cloison.TenantID, name string) (*model.Adapter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := adapterKey{tenant, name}
	ad, ok := s.m[k]
	if !ok {
		return nil, ErrAdapterNotFound
	}
	delete(s.m, k)
	return ad, nil
}

// List returns tenant's adapters, by name.
func (s *Adapters) List(tenant cloison.TenantID) []AdapterInfo {
	s.mu.RLock()
	var out []AdapterInfo
	for k, ad := range s.m {
		if k.tenant == tenant {
			out = append(out, AdapterInfo{Name: k.name, Digest: ad.Digest, Rank: ad.Rank, Alpha: ad.Alpha, Tensors: ad.Tensors})
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b AdapterInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TenantAdapter is one registered adapter and its tenant (All).
type TenantAdapter struct {
	Tenant cloison.TenantID
	AdapterInfo
}

// All returns every tenant's adapters, by tenant then name: the operator's
// view (an admin's attestation), never a tenant's.
func (s *Adapters) All() []TenantAdapter {
	s.mu.RLock()
	var out []TenantAdapter
	for k, ad := range s.m {
		out = append(out, TenantAdapter{k.tenant, AdapterInfo{Name: k.name, Digest: ad.Digest, Rank: ad.Rank, Alpha: ad.Alpha, Tensors: ad.Tensors}})
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b TenantAdapter) int {
		if c := strings.Compare(string(a.Tenant), string(b.Tenant)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// CheckAdapterName refuses (ErrAdapterName) a name Register would refuse,
// so that a caller can check it before it ledgers the registration.
func CheckAdapterName(name string) error { return checkAdapterName(name) }
