package isolation

import (
	"fmt"

	"github.com/cloison/cloison"
)

// Check audits every invariant of the pool's books and returns the first
// broken one wrapped in ErrCorrupt, or nil. It is O(pages + leases) and meant
// for tests, the fuzzer and periodic self-checks, not for every request.
//
// Invariants:
//   - free, affine, quarantined, scrubbing, leased, cached and draining pages
//     partition the pool: every page is in exactly one set, and in exactly the
//     list that its state names;
//   - no page has two owners: a leased page is referenced by exactly one live
//     lease, as one of its own (writable) pages, in the generation it took;
//     only cached prefix pages are shared, and their reference count equals
//     the number of live leases referencing them, all of their namespace;
//   - every page of a lease carries that lease's epoch (own pages) and its
//     fill count matches the lease's written slots;
//   - dedicated pages never leave their tenant;
//   - a page whose contents belong to a tenant with cross-tenant or always
//     zeroing is never where another tenant can take it;
//   - per-tenant and per-partition counters match a recount; holds match.
func (p *Pool) Check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.check(); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}

func (p *Pool) check() error {
	seen := make([]uint8, len(p.pages)) // list memberships per page
	mark := func(pg int32, want pageState, where string) error {
		if pg < 0 || int(pg) >= len(p.pages) {
			return fmt.Errorf("%s holds page %d out of range", where, pg)
		}
		if p.pages[pg].state != want {
			return fmt.Errorf("page %d in %s is %s", pg, where, p.pages[pg].state)
		}
		seen[pg]++
		return nil
	}
	strict := func(tag Tag) bool {
		return !tag.IsZero() && !p.cfg.Unsafe.skipScrub() && p.tenants[tag.Tenant-1].mode != ZeroNever
	}
	for pi := range p.parts {
		part := &p.parts[pi]
		for _, pg := range part.free {
			if err := mark(pg, stFree, fmt.Sprintf("partition %d free list", pi)); err != nil {
				return err
			}
			if int(p.pages[pg].part) != pi {
				return fmt.Errorf("page %d of partition %d in partition %d's free list", pg, p.pages[pg].part, pi)
			}
			if part.owner < 0 && strict(p.pages[pg].tag) {
				return fmt.Errorf("page %d holds tenant %d's data unscrubbed in the shared free list", pg, p.pages[pg].tag.Tenant)
			}
		}
		n := 0
		for pg := part.lruHead; pg >= 0; pg = p.pages[pg].next {
			if err := mark(pg, stCached, fmt.Sprintf("partition %d LRU", pi)); err != nil {
				return err
			}
			if p.pages[pg].refs != 0 || !p.pages[pg].inLRU {
				return fmt.Errorf("page %d in LRU with %d references", pg, p.pages[pg].refs)
			}
			if n++; n > len(p.pages) {
				return fmt.Errorf("partition %d LRU has a cycle", pi)
			}
		}
	}
	for _, t := range p.tenants {
		for _, pg := range t.affine {
			if err := mark(pg, stAffine, fmt.Sprintf("tenant %s affine list", t.cfg.ID)); err != nil {
				return err
			}
			if p.pages[pg].tag.Tenant != uint32(t.idx)+1 {
				return fmt.Errorf("page %d with tenant %d's data in tenant %s's affine list", pg, p.pages[pg].tag.Tenant, t.cfg.ID)
			}
		}
	}
	for _, pg := range p.quarantine {
		if err := mark(pg, stQuarantined, "quarantine"); err != nil {
			return err
		}
	}
	// Leases.
	refs := make([]int32, len(p.pages))
	owned := make([]int32, len(p.pages))
	leased := make([]int, len(p.tenants))
	leases := make([]int, len(p.tenants))
	for epoch, ls := range p.leases {
		if ls.id.Epoch != epoch || epoch >= p.nextEpoch {
			return fmt.Errorf("lease %s filed under epoch %d", ls.id, epoch)
		}
		t := p.tenants[ls.tenant]
		if t.cfg.ID != ls.id.Tenant {
			return fmt.Errorf("lease %s belongs to tenant index %d", ls.id, ls.tenant)
		}
		leased[ls.tenant] += len(ls.pages)
		leases[ls.tenant]++
		if ls.readOnly > len(ls.pages) || ls.written > len(ls.pages)<<p.shift || ls.written < ls.readOnly<<p.shift {
			return fmt.Errorf("lease %s: %d pages, %d read-only, %d written", ls.id, len(ls.pages), ls.readOnly, ls.written)
		}
		for i, pg := range ls.pages {
			m := &p.pages[pg]
			if m.gen != ls.gens[i] {
				return fmt.Errorf("lease %s page %d: generation %d, lease took %d", ls.id, pg, m.gen, ls.gens[i])
			}
			if m.part != t.part {
				return fmt.Errorf("lease %s of tenant %s holds page %d of partition %d", ls.id, t.cfg.ID, pg, m.part)
			}
			if i < ls.readOnly {
				if m.state != stCached || m.ns != t.ns {
					return fmt.Errorf("lease %s prefix page %d is %s in namespace %d, want cached in %d", ls.id, pg, m.state, m.ns, t.ns)
				}
				refs[pg]++
				continue
			}
			if m.state != stLeased || m.owner != ls.id.Epoch {
				return fmt.Errorf("lease %s page %d is %s owned by epoch %d", ls.id, pg, m.state, m.owner)
			}
			owned[pg]++
			want := min(p.pageTokens, max(0, ls.written-i<<p.shift))
			if int(m.fill) != want {
				return fmt.Errorf("lease %s page %d: fill %d, want %d", ls.id, pg, m.fill, want)
			}
			if want > 0 && m.tag != (Tag{Tenant: uint32(ls.tenant) + 1, Epoch: ls.id.Epoch, Gen: m.gen}) {
				return fmt.Errorf("lease %s page %d written but tagged %+v", ls.id, pg, m.tag)
			}
		}
	}
	holds := make([]int32, len(p.pages))
	for id, h := range p.holds {
		if id >= p.nextHold {
			return fmt.Errorf("hold %d from the future", id)
		}
		for _, pg := range h.pages {
			holds[pg]++
		}
	}
	pinned := make([]int, len(p.parts))
	cached := make([]int, len(p.tenants))
	inScrub := make([]int, len(p.parts))
	for i := range p.pages {
		pg := int32(i)
		m := &p.pages[i]
		if m.holds != holds[i] {
			return fmt.Errorf("page %d: %d holds, %d recorded", i, m.holds, holds[i])
		}
		if int(m.part) >= len(p.parts) || m.part < 0 {
			return fmt.Errorf("page %d in partition %d", i, m.part)
		}
		if o := p.parts[m.part].owner; o >= 0 && !m.tag.IsZero() && m.tag.Tenant != uint32(o)+1 {
			return fmt.Errorf("dedicated page %d of tenant %d holds tenant %d's data", i, o, m.tag.Tenant)
		}
		if m.tag.Tenant > uint32(len(p.tenants)) {
			return fmt.Errorf("page %d tagged with unknown tenant %d", i, m.tag.Tenant)
		}
		listed := m.state == stFree || m.state == stAffine || m.state == stQuarantined || (m.state == stCached && m.refs == 0)
		if listed != (seen[i] == 1) || seen[i] > 1 {
			return fmt.Errorf("page %d is %s and in %d lists", i, m.state, seen[i])
		}
		if m.state != stLeased && owned[i] != 0 {
			return fmt.Errorf("page %d is %s but owned by a lease", i, m.state)
		}
		if m.state != stCached && refs[i] != 0 {
			return fmt.Errorf("page %d is %s but referenced as a prefix page", i, m.state)
		}
		switch m.state {
		case stLeased:
			if owned[i] != 1 {
				return fmt.Errorf("page %d leased by %d leases", i, owned[i])
			}
			pinned[m.part]++
		case stDraining:
			if m.holds == 0 {
				return fmt.Errorf("page %d draining without a hold", i)
			}
			pinned[m.part]++
		case stCached:
			if m.refs != refs[i] {
				return fmt.Errorf("cached page %d: %d references, %d leases", i, m.refs, refs[i])
			}
			if m.refs > 0 {
				pinned[m.part]++
			}
			if q, ok := p.index[p.keys[pg]]; !ok || q != pg {
				return fmt.Errorf("cached page %d missing from the prefix index", i)
			}
			if m.tag.IsZero() {
				return fmt.Errorf("cached page %d has no writer", i)
			}
			cached[m.tag.Tenant-1]++
		case stQuarantined, stScrubbing:
			inScrub[m.part]++
		}
	}
	if len(p.index) != sum(cached) {
		return fmt.Errorf("prefix index has %d keys for %d cached pages", len(p.index), sum(cached))
	}
	outstanding := 0
	for i, t := range p.tenants {
		if t.leased != leased[i] || t.leases != leases[i] || t.cached != cached[i] {
			return fmt.Errorf("tenant %s counts %d pages, %d leases, %d cached; recount %d, %d, %d", t.cfg.ID, t.leased, t.leases, t.cached, leased[i], leases[i], cached[i])
		}
		if t.part == 0 {
			outstanding += max(0, t.cfg.Reserved-t.leased)
		}
		if t.cfg.Cap > 0 && t.leased > t.cfg.Cap {
			return fmt.Errorf("tenant %s holds %d pages over its cap %d", t.cfg.ID, t.leased, t.cfg.Cap)
		}
	}
	size := 0
	for pi := range p.parts {
		part := &p.parts[pi]
		size += part.size
		if part.pinned != pinned[pi] || part.inScrub != inScrub[pi] {
			return fmt.Errorf("partition %d counts %d pinned, %d in scrub; recount %d, %d", pi, part.pinned, part.inScrub, pinned[pi], inScrub[pi])
		}
	}
	if size != len(p.pages) {
		return fmt.Errorf("partitions hold %d pages of %d", size, len(p.pages))
	}
	if p.parts[0].outstanding != outstanding {
		return fmt.Errorf("shared partition counts %d outstanding reserved pages, recount %d", p.parts[0].outstanding, outstanding)
	}
	return nil
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// TenantStats are one tenant's counters, for metrics.
type TenantStats struct {
	Tenant     cloison.TenantID
	Tier       Tier
	Zeroing    Zeroing
	Reserved   int // pages guaranteed to the tenant
	Leased     int // pages referenced by live leases (prefix pages included)
	Leases     int // live leases
	Cached     int // prefix pages the tenant published that are still cached
	Affine     int // freed pages awaiting reuse by the tenant or a scrub
	Scrubbed   uint64
	Violations uint64 // reads refused by BlockTable
}

// Stats are the pool's counters, for metrics and capacity attestation.
type Stats struct {
	Pages       int
	PageTokens  int
	Free        int // pages any tenant of their partition may take now
	Leased      int
	Cached      int
	Quarantined int // affine, quarantined and scrubbing pages
	Draining    int
	Scrubbed    uint64
	Tenants     []TenantStats
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Pages: len(p.pages), PageTokens: p.pageTokens, Scrubbed: p.scrubbed}
	for i := range p.pages {
		switch p.pages[i].state {
		case stFree:
			s.Free++
		case stLeased:
			s.Leased++
		case stCached:
			s.Cached++
		case stAffine, stQuarantined, stScrubbing:
			s.Quarantined++
		case stDraining:
			s.Draining++
		}
	}
	for _, t := range p.tenants {
		s.Tenants = append(s.Tenants, TenantStats{
			Tenant: t.cfg.ID, Tier: t.cfg.Tier, Zeroing: t.mode, Reserved: t.cfg.Reserved,
			Leased: t.leased, Leases: t.leases, Cached: t.cached, Affine: len(t.affine),
			Scrubbed: t.scrubbed, Violations: t.blocked,
		})
	}
	return s
}
