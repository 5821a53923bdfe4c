package isolation

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/cloison/cloison"
)

// ErrInvalidArgument: a call with arguments that can never succeed.
var ErrInvalidArgument = cloison.NewError(cloison.CodeInvalid, "isolation: invalid argument")

type pageState uint8

const (
	stFree        pageState = iota // in its partition's free list: any tenant of the partition may take it
	stAffine                       // dirty, in its last tenant's list: only that tenant may take it unscrubbed
	stQuarantined                  // waiting to be handed out by ScrubWork
	stScrubbing                    // handed out by ScrubWork, waiting for ConfirmScrub
	stLeased                       // owned by one live lease
	stCached                       // a published prefix page, read-only, reference counted
	stDraining                     // released while a transfer still holds it
)

var stateNames = [...]string{"free", "affine", "quarantined", "scrubbing", "leased", "cached", "draining"}

func (s pageState) String() string { return stateNames[s] }

// page is the metadata of one KV page. The KV bytes live in a backend arena.
type page struct {
	tag   Tag    // who wrote the contents; zero when scrubbed or never written
	owner uint64 // epoch of the owning lease (stLeased, stDraining)
	gen   uint32 // incremented every time the page leaves an owner
	fill  uint32 // slots written in the current epoch (stLeased)
	holds int32  // in-flight transfers that hold the page
	refs  int32  // stCached: live leases that reference the page
	ns    int32  // stCached: namespace index
	part  int32  // partition index: 0 shared, else a dedicated tenant's
	prev  int32  // LRU links among unreferenced cached pages; -1 at the ends
	next  int32
	state pageState
	inLRU bool
	scrub bool // discarded: zero before any reuse, whatever the mode
}

type partition struct {
	size        int     // pages in the partition
	pinned      int     // pages that cannot be reclaimed: leased, draining, referenced cached
	outstanding int     // shared partition: Σ max(0, reserved − referenced) over its tenants
	reserved    int     // shared partition: Σ reserved over its tenants
	free        []int32 // stFree pages (stack)
	inScrub     int     // pages in quarantine or scrubbing
	demand      int     // pages a waiting allocation asked ScrubWork to reclaim
	lruHead     int32   // most recently unreferenced cached page
	lruTail     int32   // least recently unreferenced cached page
	owner       int32   // dedicated tenant index, -1 for the shared partition
}

type tenant struct {
	cfg      TenantConfig
	idx      int32
	mode     Zeroing // effective: max(pool default, cfg.Zeroing)
	part     int32
	ns       int32
	affine   []int32 // stAffine pages whose contents are this tenant's (stack)
	leased   int     // pages referenced by the tenant's live leases
	leases   int
	cached   int // published prefix pages of the tenant still cached
	scrubbed uint64
	blocked  uint64
}

type namespace struct {
	name string
	salt [32]byte
}

type leaseState struct {
	id       Lease
	tenant   int32
	pages    []int32
	gens     []uint32
	readOnly int // leading prefix pages (stCached) the lease references
	written  int // leading token slots written (prefix tokens included)
	staged   int // leading token slots a StagingTable let a transfer fill, verified or not
	// start is the first key of the lease's prefix-key chain: its
	// namespace's salt, narrowed by the request's cache salt if any
	// (AllocatePrefixSalted).
	start [32]byte
}

// HoldID names a transfer hold.
type HoldID uint64

type hold struct {
	lease Lease
	pages []int32
}

// Pool is the isolation core: the metadata of a paged KV pool shared by
// tenants. It does no I/O and runs no goroutine; a driver calls it and does
// the work it asks for (writing KV, zeroing pages). All methods are safe for
// concurrent use: one mutex guards the whole pool (calls are short and do not
// allocate per page beyond the returned slices).
//
// Ordering duties of the caller:
//   - Write BEFORE the kernel writes the slots, BlockTable AFTER, and the
//     kernel reads only through that BlockTable, in the same step.
//   - Zero the pages returned by ScrubWork BEFORE ConfirmScrub: confirmed
//     pages go back to the free list and may reach any tenant.
//   - Hold a lease's pages BEFORE a transfer reads or writes them and Unhold
//     only AFTER the transfer completed or its cancellation was acknowledged.
type Pool struct {
	mu sync.Mutex

	// Immutable after NewPool.
	pageTokens int
	shift      uint
	cfg        Config
	secret     []byte

	// Guarded by mu.
	pages      []page
	keys       [][32]byte // prefix-index key of each stCached page
	parts      []partition
	tenants    []*tenant
	byID       map[cloison.TenantID]int32
	nss        []namespace
	nsByName   map[string]int32
	index      map[[32]byte]int32 // prefix-cache key → page
	leases     map[uint64]*leaseState
	nextEpoch  uint64
	quarantine []int32
	holds      map[HoldID]*hold
	nextHold   HoldID
	reclaimAt  int // rotating start for reclaiming other tenants' affine pages
	scrubbed   uint64
}

// NewPool returns a pool of cfg.Pages free, clean pages in one shared
// partition. Add tenants with AddTenant before allocating.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.PageTokens == 0 {
		cfg.PageTokens = 16
	}
	if cfg.Pages < 1 || cfg.Pages > 1<<30 {
		return nil, fmt.Errorf("%w: %d pages", ErrInvalidConfig, cfg.Pages)
	}
	if cfg.PageTokens < 1 || cfg.PageTokens > 4096 || cfg.PageTokens&(cfg.PageTokens-1) != 0 {
		return nil, fmt.Errorf("%w: page tokens %d is not a power of two in [1, 4096]", ErrInvalidConfig, cfg.PageTokens)
	}
	if cfg.DefaultZeroing == ZeroUnset {
		cfg.DefaultZeroing = ZeroCrossTenant
	}
	if cfg.DefaultZeroing > ZeroAlways {
		return nil, fmt.Errorf("%w: zeroing %d", ErrInvalidConfig, cfg.DefaultZeroing)
	}
	secret := append([]byte(nil), cfg.PrefixSecret...)
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("isolation: prefix secret: %w", err)
		}
	}
	p := &Pool{
		pageTokens: cfg.PageTokens,
		shift:      uint(bits.TrailingZeros(uint(cfg.PageTokens))),
		cfg:        cfg,
		secret:     secret,
		pages:      make([]page, cfg.Pages),
		keys:       make([][32]byte, cfg.Pages),
		byID:       make(map[cloison.TenantID]int32),
		nsByName:   make(map[string]int32),
		index:      make(map[[32]byte]int32),
		leases:     make(map[uint64]*leaseState),
		holds:      make(map[HoldID]*hold),
		nextEpoch:  1,
		nextHold:   1,
	}
	shared := partition{size: cfg.Pages, free: make([]int32, cfg.Pages), lruHead: -1, lruTail: -1, owner: -1}
	for i := range p.pages {
		// Free list is a stack: push in reverse so page 0 is taken first.
		shared.free[i] = int32(cfg.Pages - 1 - i)
		p.pages[i] = page{prev: -1, next: -1, ns: -1}
	}
	p.parts = []partition{shared}
	for _, name := range cfg.SharedNamespaces {
		if name == "" {
			return nil, fmt.Errorf("%w: empty shared namespace name", ErrInvalidConfig)
		}
		if _, dup := p.nsByName[name]; dup {
			return nil, fmt.Errorf("%w: shared namespace %q listed twice", ErrInvalidConfig, name)
		}
		p.nsByName[name] = int32(len(p.nss))
		p.nss = append(p.nss, namespace{name: name, salt: p.salt("namespace", name)})
	}
	return p, nil
}

// salt derives a prefix-cache namespace salt from the server secret. A client
// never supplies it, so a client cannot aim its prompts at another tenant's
// cache entries.
func (p *Pool) salt(kind, name string) [32]byte {
	m := hmac.New(sha256.New, p.secret)
	m.Write([]byte("cloison/prefix-namespace/v1\x00" + kind + "\x00" + name))
	var s [32]byte
	copy(s[:], m.Sum(nil))
	return s
}

// PageTokens returns the number of token slots per page.
func (p *Pool) PageTokens() int { return p.pageTokens }

// Pages returns the number of pages in the pool.
func (p *Pool) Pages() int { return len(p.pages) }

// AddTenant adds a tenant. A dedicated tenant's Reserved pages are taken from
// the shared partition's free list now and never return to it.
//
// Errors: ErrInvalidConfig (bad values, duplicate ID, reservations that do
// not fit, unknown shared namespace), ErrPoolExhausted (a dedicated tenant's
// pages are not free right now).
func (p *Pool) AddTenant(tc TenantConfig) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addTenant(tc)
}

// addTenant is AddTenant under p.mu.
func (p *Pool) addTenant(tc TenantConfig) error {
	switch {
	case tc.ID == "":
		return fmt.Errorf("%w: empty tenant ID", ErrInvalidConfig)
	case tc.Reserved < 0 || tc.Cap < 0:
		return fmt.Errorf("%w: tenant %s: negative reserved or cap", ErrInvalidConfig, tc.ID)
	case tc.Cap > 0 && tc.Cap < tc.Reserved:
		return fmt.Errorf("%w: tenant %s: cap %d below reserved %d", ErrInvalidConfig, tc.ID, tc.Cap, tc.Reserved)
	case tc.Zeroing > ZeroAlways || tc.Tier > TierDedicated:
		return fmt.Errorf("%w: tenant %s: unknown zeroing or tier", ErrInvalidConfig, tc.ID)
	case tc.Tier == TierDedicated && tc.Reserved < 1:
		return fmt.Errorf("%w: dedicated tenant %s needs reserved pages", ErrInvalidConfig, tc.ID)
	case tc.Tier == TierDedicated && tc.Namespace != "":
		return fmt.Errorf("%w: dedicated tenant %s cannot join shared namespace %q", ErrInvalidConfig, tc.ID, tc.Namespace)
	}
	if _, dup := p.byID[tc.ID]; dup {
		return fmt.Errorf("%w: tenant %s already exists", ErrInvalidConfig, tc.ID)
	}
	if len(p.tenants) >= 1<<31-2 {
		return fmt.Errorf("%w: too many tenants", ErrInvalidConfig)
	}
	t := &tenant{cfg: tc, idx: int32(len(p.tenants)), mode: max(p.cfg.DefaultZeroing, tc.Zeroing), part: 0}
	shared := &p.parts[0]
	switch tc.Tier {
	case TierShared:
		if shared.reserved+tc.Reserved > shared.size {
			return fmt.Errorf("%w: tenant %s: reservations of %d pages exceed the shared partition of %d", ErrInvalidConfig, tc.ID, shared.reserved+tc.Reserved, shared.size)
		}
	case TierDedicated:
		if shared.reserved+tc.Reserved > shared.size {
			return fmt.Errorf("%w: tenant %s: %d dedicated pages do not fit beside %d reserved shared pages in %d", ErrInvalidConfig, tc.ID, tc.Reserved, shared.reserved, shared.size)
		}
		if len(shared.free) < tc.Reserved {
			return fmt.Errorf("%w: tenant %s: %d free pages, %d dedicated pages wanted", ErrPoolExhausted, tc.ID, len(shared.free), tc.Reserved)
		}
	}
	if tc.Namespace != "" {
		ns, ok := p.nsByName[tc.Namespace]
		if !ok {
			return fmt.Errorf("%w: tenant %s: shared namespace %q is not configured", ErrInvalidConfig, tc.ID, tc.Namespace)
		}
		t.ns = ns
	} else {
		t.ns = int32(len(p.nss))
		p.nss = append(p.nss, namespace{name: "tenant:" + string(tc.ID), salt: p.salt("tenant", string(tc.ID))})
	}
	if tc.Tier == TierDedicated {
		t.part = int32(len(p.parts))
		d := partition{size: tc.Reserved, lruHead: -1, lruTail: -1, owner: t.idx}
		for range tc.Reserved {
			n := len(shared.free) - 1
			pg := shared.free[n]
			shared.free = shared.free[:n]
			p.pages[pg].part = t.part
			if p.pages[pg].tag.IsZero() {
				d.free = append(d.free, pg)
			} else {
				// A never-mode tenant's dirty page: zero it before it
				// becomes a dedicated tenant's.
				p.pages[pg].state = stQuarantined
				p.quarantine = append(p.quarantine, pg)
				d.inScrub++
			}
		}
		shared.size -= tc.Reserved
		p.parts = append(p.parts, d)
	} else {
		shared.reserved += tc.Reserved
		shared.outstanding += tc.Reserved
	}
	p.tenants = append(p.tenants, t)
	p.byID[tc.ID] = t.idx
	return nil
}

func (p *Pool) tenantOf(id cloison.TenantID) (*tenant, error) {
	i, ok := p.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTenant, id)
	}
	return p.tenants[i], nil
}

// maxPages is the most pages one lease of t could ever reference.
func (p *Pool) maxPages(t *tenant) int {
	part := &p.parts[t.part]
	n := part.size
	if part.owner < 0 {
		n -= part.reserved - t.cfg.Reserved
	}
	if t.cfg.Cap > 0 {
		n = min(n, t.cfg.Cap)
	}
	return n
}

// MaxLeaseTokens returns the most tokens one lease of the tenant could ever
// hold: what admission must check a request against before allocating.
func (p *Pool) MaxLeaseTokens(id cloison.TenantID) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.tenantOf(id)
	if err != nil {
		return 0, err
	}
	return p.maxPages(t) * p.pageTokens, nil
}

func (p *Pool) pagesFor(tokens int) int { return (tokens + p.pageTokens - 1) >> p.shift }

// setLeased updates t.leased and the shared partition's outstanding
// reservations.
func (p *Pool) setLeased(t *tenant, n int) {
	if t.part == 0 {
		part := &p.parts[0]
		part.outstanding -= max(0, t.cfg.Reserved-t.leased)
		part.outstanding += max(0, t.cfg.Reserved-n)
	}
	t.leased = n
}

// admit decides, without changing any state except a scrub demand, whether t
// may grow its references by total pages of which take are new pages and
// pinHits are currently unreferenced cached pages.
func (p *Pool) admit(t *tenant, leaseTotal, add, take, pinHits int) error {
	if leaseTotal > p.maxPages(t) {
		return fmt.Errorf("%w: %d pages needed, at most %d available to tenant %s", ErrTooLarge, leaseTotal, p.maxPages(t), t.cfg.ID)
	}
	if t.cfg.Cap > 0 && t.leased+add > t.cfg.Cap {
		return fmt.Errorf("%w: tenant %s holds %d of %d pages, %d more asked", ErrQuotaExceeded, t.cfg.ID, t.leased, t.cfg.Cap, add)
	}
	part := &p.parts[t.part]
	others := 0
	if part.owner < 0 {
		// Pages other shared tenants are guaranteed and do not hold yet.
		others = part.outstanding - max(0, t.cfg.Reserved-t.leased)
		// t's own use of its reservation does not count against others.
	}
	if part.size-part.pinned-take-pinHits < others {
		return fmt.Errorf("%w: %d pages wanted by tenant %s, %d reclaimable, %d reserved for others", ErrPoolExhausted, take, t.cfg.ID, part.size-part.pinned, others)
	}
	if ready := len(part.free) + len(t.affine); ready < take {
		part.demand = max(part.demand, take-ready)
		return fmt.Errorf("%w: %d pages wanted by tenant %s, %d ready", ErrScrubPending, take, t.cfg.ID, ready)
	}
	return nil
}

// takePages pops n pages for t: its own affine pages first (no scrub was
// needed for them), then its partition's free pages. admit must have said yes.
func (p *Pool) takePages(t *tenant, epoch uint64, dst []int32, gens []uint32, n int) ([]int32, []uint32) {
	part := &p.parts[t.part]
	for range n {
		var pg int32
		if k := len(t.affine); k > 0 {
			pg = t.affine[k-1]
			t.affine = t.affine[:k-1]
		} else {
			k := len(part.free)
			pg = part.free[k-1]
			part.free = part.free[:k-1]
		}
		m := &p.pages[pg]
		m.state = stLeased
		m.owner = epoch
		m.fill = 0
		part.pinned++
		dst = append(dst, pg)
		gens = append(gens, m.gen)
	}
	return dst, gens
}

// Allocate leases pages for tokens token slots to (tenant, request). It is
// all-or-nothing: on error no page, lease or counter changes (ErrScrubPending
// only records how many pages ScrubWork should reclaim).
//
// Errors: ErrUnknownTenant, ErrInvalidArgument, ErrTooLarge (never fits:
// reject), ErrQuotaExceeded, ErrPoolExhausted, ErrScrubPending (transient).
func (p *Pool) Allocate(tenant cloison.TenantID, request cloison.RequestID, tokens int) (Lease, error) {
	l, _, err := p.AllocatePrefix(tenant, request, tokens, nil)
	return l, err
}

// AllocatePrefix is Allocate with a prefix-cache lookup: the leading full
// pages of prompt that are cached in the tenant's namespace are attached to
// the lease read-only instead of being allocated. It returns the number of
// leading tokens already present (a multiple of PageTokens, always less than
// len(prompt), so that prefill computes at least the last prompt token).
func (p *Pool) AllocatePrefix(tenant cloison.TenantID, request cloison.RequestID, tokens int, prompt []int32) (Lease, int, error) {
	return p.AllocatePrefixSalted(tenant, request, tokens, prompt, nil)
}

// AllocatePrefixSalted is AllocatePrefix in a part of the tenant's
// namespace that salt names (a client's cache_salt, vLLM's semantics):
// the lease finds, and later publishes (Publish), only pages keyed with
// the same salt in the same namespace. The salt is mixed into the
// namespace's secret-derived key chain and the namespace check stays, so
// a salt only narrows what a request may share, within its tenant: two
// tenants never share pages whatever salts they send. An empty salt is
// AllocatePrefix's own namespace.
func (p *Pool) AllocatePrefixSalted(tenant cloison.TenantID, request cloison.RequestID, tokens int, prompt []int32, salt []byte) (Lease, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.tenantOf(tenant)
	if err != nil {
		return Lease{}, 0, err
	}
	start := p.nss[t.ns].salt
	if len(salt) > 0 {
		h := sha256.New()
		h.Write([]byte("cloison/cache-salt/v1\x00"))
		h.Write(start[:])
		h.Write(salt)
		copy(start[:], h.Sum(nil))
	}
	if tokens < 1 || len(prompt) > tokens {
		return Lease{}, 0, fmt.Errorf("%w: lease of %d tokens for a prompt of %d", ErrInvalidArgument, tokens, len(prompt))
	}
	need := p.pagesFor(tokens)
	hits := p.lookup(t, start, prompt)
	pinHits := 0
	for _, pg := range hits {
		if p.pages[pg].refs == 0 {
			pinHits++
		}
	}
	if err := p.admit(t, need, need, need-len(hits), pinHits); err != nil {
		return Lease{}, 0, err
	}
	epoch := p.nextEpoch
	p.nextEpoch++
	ls := &leaseState{
		id:       Lease{Tenant: tenant, Request: request, Epoch: epoch},
		tenant:   t.idx,
		pages:    make([]int32, 0, need),
		gens:     make([]uint32, 0, need),
		readOnly: len(hits),
		written:  len(hits) * p.pageTokens,
		start:    start,
	}
	for _, pg := range hits {
		p.ref(pg)
		ls.pages = append(ls.pages, pg)
		ls.gens = append(ls.gens, p.pages[pg].gen)
	}
	ls.pages, ls.gens = p.takePages(t, epoch, ls.pages, ls.gens, need-len(hits))
	p.leases[epoch] = ls
	t.leases++
	p.setLeased(t, t.leased+need)
	return ls.id, ls.written, nil
}

// Extend grows a live lease to hold at least tokens slots (decode appends).
// All-or-nothing, with Allocate's errors plus ErrStaleLease.
func (p *Pool) Extend(l Lease, tokens int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return err
	}
	t := p.tenants[ls.tenant]
	add := p.pagesFor(tokens) - len(ls.pages)
	if add <= 0 {
		return nil
	}
	if err := p.admit(t, len(ls.pages)+add, add, add, 0); err != nil {
		return err
	}
	ls.pages, ls.gens = p.takePages(t, l.Epoch, ls.pages, ls.gens, add)
	p.setLeased(t, t.leased+add)
	return nil
}

func (p *Pool) live(l Lease) (*leaseState, error) {
	ls := p.leases[l.Epoch]
	if ls == nil || ls.id != l {
		return nil, fmt.Errorf("%w: %s", ErrStaleLease, l)
	}
	return ls, nil
}

// Write records that the lease's next n token slots were written (positions
// [written, written+n)). Call it before the kernel writes those slots and
// before building the BlockTable that covers them.
//
// Errors: ErrStaleLease, ErrInvalidArgument (n < 0), ErrLeaseOverflow.
func (p *Pool) Write(l Lease, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%w: write of %d slots", ErrInvalidArgument, n)
	}
	end := ls.written + n
	if end > len(ls.pages)<<p.shift {
		return fmt.Errorf("%w: lease %s holds %d slots, %d written, %d more asked", ErrLeaseOverflow, l, len(ls.pages)<<p.shift, ls.written, n)
	}
	tag := Tag{Tenant: uint32(ls.tenant) + 1, Epoch: l.Epoch}
	for pos := ls.written; pos < end; {
		i := pos >> p.shift
		m := &p.pages[ls.pages[i]]
		if m.state != stLeased || m.owner != l.Epoch {
			return fmt.Errorf("%w: lease %s page %d is %s, owner %d", ErrCorrupt, l, ls.pages[i], m.state, m.owner)
		}
		stop := min(end, (i+1)<<p.shift)
		m.fill = uint32(stop - i<<p.shift)
		m.tag = tag
		m.tag.Gen = m.gen
		pos = stop
	}
	ls.written = end
	return nil
}

// Written returns how many leading slots of the lease were written.
func (p *Pool) Written(l Lease) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return 0, err
	}
	return ls.written, nil
}

// BlockTable returns the pages attention will read for the first tokens
// positions of the lease, after checking every one: the page belongs to the
// lease in the generation the lease took it (or is a cached prefix page of the
// lease's namespace that the lease references), and every slot to be read was
// written in the current epoch. Any failure is a *ViolationError (counted as a
// blocked violation) except a stale lease (ErrStaleLease) or a bad argument.
func (p *Pool) BlockTable(l Lease, tokens int) (BlockTable, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return BlockTable{}, err
	}
	if tokens < 0 || tokens > len(ls.pages)<<p.shift {
		return BlockTable{}, fmt.Errorf("%w: block table of %d tokens for a lease of %d slots", ErrInvalidArgument, tokens, len(ls.pages)<<p.shift)
	}
	n := p.pagesFor(tokens)
	t := p.tenants[ls.tenant]
	ro := min(ls.readOnly, n)
	bt := BlockTable{
		lease:      l,
		tokens:     tokens,
		pageTokens: p.pageTokens,
		readOnly:   ro,
		own:        Tag{Tenant: uint32(ls.tenant) + 1, Epoch: l.Epoch},
		pages:      make([]int32, n),
	}
	if ro > 0 {
		bt.tags = make([]Tag, ro)
	}
	violation := func(i int, reason Reason) (BlockTable, error) {
		t.blocked++
		pg := ls.pages[i]
		return BlockTable{}, &ViolationError{Page: pg, Owner: p.ownerOf(pg), Reader: l, Reason: reason}
	}
	pages, gens := ls.pages[:n], ls.gens[:n]
	// Prefix pages: cached in the lease's namespace, in the generation the
	// lease attached them.
	for i := range ro {
		m := &p.pages[pages[i]]
		switch {
		case m.gen != gens[i]:
			return violation(i, ReasonStaleGeneration)
		case m.state != stCached:
			return violation(i, ReasonForeignPage)
		case m.ns != t.ns:
			return violation(i, ReasonForeignNamespace)
		}
		bt.tags[i] = m.tag
	}
	// Own pages: leased by this epoch, in the generation taken, and every
	// slot below tokens written in this epoch. Every page but the last must
	// be full; fill counts never exceed the page.
	full := uint32(p.pageTokens)
	if p.cfg.Unsafe.skipFillCheck() {
		full = 0
	}
	for i := ro; i < n; i++ {
		m := &p.pages[pages[i]]
		if m.gen != gens[i] {
			return violation(i, ReasonStaleGeneration)
		}
		if m.owner != l.Epoch || m.state != stLeased {
			return violation(i, ReasonForeignPage)
		}
		need := full
		if i == n-1 && full != 0 {
			need = uint32(tokens - i<<p.shift)
		}
		if m.fill < need {
			return violation(i, ReasonUnwritten)
		}
	}
	copy(bt.pages, pages)
	bt.gens = slices.Clone(gens)
	return bt, nil
}

// StagingTable returns a write-only table over the first tokens positions of
// a lease that holds nothing written beyond its read-only prefix pages, for a
// transfer receiver: it copies incoming KV into the lease's pages through the
// table (kernels.Arena.CopyIn) BEFORE the transfer is verified, and records
// the slots with Write only AFTER verification succeeded. Until then the
// pool's fill counts are unchanged, so BlockTable refuses every staged slot
// (ReasonUnwritten) and attention can never be handed unverified KV. The
// table reports Staged; kernels must not read through it.
//
// The lease's own pages in the table are tagged as its contents at once (the
// arena may hold its bytes from now on), and a lease released before Write
// covered every staged slot is discarded: its pages are zeroed before any
// reuse, whatever the zeroing mode, so unverified bytes never reach a free
// list.
//
// Errors: ErrStaleLease, ErrInvalidArgument (tokens outside (prefix, slots],
// or slots beyond the prefix already written).
func (p *Pool) StagingTable(l Lease, tokens int) (BlockTable, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return BlockTable{}, err
	}
	prefix := ls.readOnly << p.shift
	switch {
	case ls.written != prefix:
		return BlockTable{}, fmt.Errorf("%w: staging into lease %s with %d slots written beyond its prefix", ErrInvalidArgument, l, ls.written-prefix)
	case tokens <= prefix || tokens > len(ls.pages)<<p.shift:
		return BlockTable{}, fmt.Errorf("%w: staging table of %d tokens for a lease of %d slots, %d cached", ErrInvalidArgument, tokens, len(ls.pages)<<p.shift, prefix)
	}
	n := p.pagesFor(tokens)
	own := Tag{Tenant: uint32(ls.tenant) + 1, Epoch: l.Epoch}
	bt := BlockTable{
		lease:      l,
		tokens:     tokens,
		pageTokens: p.pageTokens,
		readOnly:   ls.readOnly,
		own:        own,
		pages:      slices.Clone(ls.pages[:n]),
		gens:       slices.Clone(ls.gens[:n]),
		staged:     true,
	}
	if ls.readOnly > 0 {
		bt.tags = make([]Tag, ls.readOnly)
		for i := range ls.readOnly {
			bt.tags[i] = p.pages[ls.pages[i]].tag
		}
	}
	for i := ls.readOnly; i < n; i++ {
		m := &p.pages[ls.pages[i]]
		if m.state != stLeased || m.owner != l.Epoch || m.gen != ls.gens[i] {
			return BlockTable{}, fmt.Errorf("%w: lease %s page %d is %s, owner %d", ErrCorrupt, l, ls.pages[i], m.state, m.owner)
		}
	}
	for i := ls.readOnly; i < n; i++ {
		m := &p.pages[ls.pages[i]]
		m.tag = own
		m.tag.Gen = m.gen
	}
	ls.staged = max(ls.staged, tokens)
	return bt, nil
}

// ownerOf names the owner or last writer of a page for a ViolationError.
func (p *Pool) ownerOf(pg int32) Lease {
	m := &p.pages[pg]
	if m.state == stLeased || m.state == stDraining {
		if ls := p.leases[m.owner]; ls != nil {
			return ls.id
		}
	}
	if m.tag.IsZero() {
		return Lease{}
	}
	return Lease{Tenant: p.tenants[m.tag.Tenant-1].cfg.ID, Epoch: m.tag.Epoch}
}

// Release ends a lease. Its own pages are quarantined (or, while a transfer
// holds them, drained when the hold ends); its references to cached prefix
// pages are dropped. Errors: ErrStaleLease.
func (p *Pool) Release(l Lease) error { return p.release(l, false) }

// Discard ends a lease like Release but sends its own pages to be zeroed
// whatever the zeroing mode: for leases aborted by an isolation violation or
// a failed transfer, whose pages may hold anything. Errors: ErrStaleLease.
func (p *Pool) Discard(l Lease) error { return p.release(l, true) }

func (p *Pool) release(l Lease, scrub bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return err
	}
	delete(p.leases, l.Epoch)
	// Staged slots that Write never recorded hold unverified bytes: zero
	// them before any reuse, whatever the mode.
	scrub = scrub || ls.staged > ls.written
	t := p.tenants[ls.tenant]
	t.leases--
	p.setLeased(t, t.leased-len(ls.pages))
	for i, pg := range ls.pages {
		if i < ls.readOnly {
			p.unref(pg)
			continue
		}
		m := &p.pages[pg]
		m.scrub = m.scrub || scrub
		if m.holds > 0 {
			m.state = stDraining
			continue
		}
		p.parts[m.part].pinned--
		p.retire(pg)
	}
	return nil
}

// retire is called when a page leaves its owner: the epoch ends and the page
// goes where its contents' owner's zeroing mode says.
func (p *Pool) retire(pg int32) {
	m := &p.pages[pg]
	m.gen++
	m.fill = 0
	m.owner = 0
	p.dispose(pg)
}

// dispose places an unowned page: free when clean (or its writer's mode is
// never), affine to its writer (cross-tenant), or quarantined (always).
func (p *Pool) dispose(pg int32) {
	m := &p.pages[pg]
	part := &p.parts[m.part]
	if m.scrub && !p.cfg.Unsafe.skipScrub() {
		p.quarantinePage(pg)
		return
	}
	if m.tag.IsZero() || p.cfg.Unsafe.skipScrub() {
		m.state = stFree
		part.free = append(part.free, pg)
		return
	}
	w := p.tenants[m.tag.Tenant-1]
	switch {
	case w.mode == ZeroAlways:
		p.quarantinePage(pg)
	case w.mode == ZeroNever || part.owner >= 0:
		// A dedicated partition has one tenant: cross-tenant reuse
		// cannot happen there.
		m.state = stFree
		part.free = append(part.free, pg)
	default:
		m.state = stAffine
		w.affine = append(w.affine, pg)
	}
}

func (p *Pool) quarantinePage(pg int32) {
	m := &p.pages[pg]
	m.state = stQuarantined
	p.quarantine = append(p.quarantine, pg)
	p.parts[m.part].inScrub++
}

func (p *Pool) ref(pg int32) {
	m := &p.pages[pg]
	if m.refs == 0 {
		p.lruRemove(pg)
		p.parts[m.part].pinned++
	}
	m.refs++
}

func (p *Pool) unref(pg int32) {
	m := &p.pages[pg]
	m.refs--
	if m.refs == 0 {
		p.parts[m.part].pinned--
		p.lruPush(pg)
	}
}

func (p *Pool) lruPush(pg int32) {
	m := &p.pages[pg]
	part := &p.parts[m.part]
	m.prev, m.next, m.inLRU = -1, part.lruHead, true
	if part.lruHead >= 0 {
		p.pages[part.lruHead].prev = pg
	} else {
		part.lruTail = pg
	}
	part.lruHead = pg
}

func (p *Pool) lruRemove(pg int32) {
	m := &p.pages[pg]
	if !m.inLRU {
		return
	}
	part := &p.parts[m.part]
	if m.prev >= 0 {
		p.pages[m.prev].next = m.next
	} else {
		part.lruHead = m.next
	}
	if m.next >= 0 {
		p.pages[m.next].prev = m.prev
	} else {
		part.lruTail = m.prev
	}
	m.prev, m.next, m.inLRU = -1, -1, false
}

// ScrubWork returns the pages the caller must zero now. It first reclaims
// pages for allocations that got ErrScrubPending: other tenants' affine pages
// and least recently used unreferenced prefix pages, scrubbed when their
// writer's mode forbids handing them to another tenant unzeroed.
//
// The caller zeroes every returned page (and its ownership tag in the arena)
// and then calls ConfirmScrub with them; until then they reach no tenant.
func (p *Pool) ScrubWork() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pi := range p.parts {
		part := &p.parts[pi]
		want := part.demand - part.inScrub
		part.demand = 0
		if part.owner < 0 {
			for i := 0; i < len(p.tenants) && want > 0; i++ {
				t := p.tenants[(p.reclaimAt+i)%len(p.tenants)]
				for want > 0 && len(t.affine) > 0 {
					k := len(t.affine) - 1
					pg := t.affine[k]
					t.affine = t.affine[:k]
					p.quarantinePage(pg)
					want--
				}
			}
			if len(p.tenants) > 0 {
				p.reclaimAt = (p.reclaimAt + 1) % len(p.tenants)
			}
		}
		for pg := part.lruTail; want > 0 && pg >= 0; {
			prev := p.pages[pg].prev
			if p.pages[pg].holds == 0 {
				p.evict(pg)
				want--
			}
			pg = prev
		}
	}
	work := p.quarantine
	p.quarantine = nil
	for _, pg := range work {
		p.pages[pg].state = stScrubbing
	}
	return work
}

// evict drops an unreferenced prefix page from the cache and makes it
// reusable by any tenant of its partition: quarantined for scrubbing unless
// its writer's mode is never (or it is clean).
func (p *Pool) evict(pg int32) {
	m := &p.pages[pg]
	p.lruRemove(pg)
	delete(p.index, p.keys[pg])
	p.keys[pg] = [32]byte{}
	m.ns = -1
	m.gen++
	if !m.tag.IsZero() {
		p.tenants[m.tag.Tenant-1].cached--
	}
	if m.tag.IsZero() || p.cfg.Unsafe.skipScrub() || p.tenants[m.tag.Tenant-1].mode == ZeroNever {
		m.state = stFree
		p.parts[m.part].free = append(p.parts[m.part].free, pg)
		return
	}
	p.quarantinePage(pg)
}

// ConfirmScrub returns zeroed pages to their partition's free list. Every page
// must have been returned by ScrubWork and not yet confirmed; otherwise no
// page changes state and ErrNotScrubbing is returned.
func (p *Pool) ConfirmScrub(pages []int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[int32]struct{}, len(pages))
	for _, pg := range pages {
		if pg < 0 || int(pg) >= len(p.pages) || p.pages[pg].state != stScrubbing {
			return fmt.Errorf("%w: page %d", ErrNotScrubbing, pg)
		}
		if _, dup := seen[pg]; dup {
			return fmt.Errorf("%w: page %d listed twice", ErrNotScrubbing, pg)
		}
		seen[pg] = struct{}{}
	}
	for _, pg := range pages {
		m := &p.pages[pg]
		if !m.tag.IsZero() {
			p.tenants[m.tag.Tenant-1].scrubbed++
		}
		m.tag = Tag{}
		m.scrub = false
		m.state = stFree
		part := &p.parts[m.part]
		part.inScrub--
		part.free = append(part.free, pg)
		p.scrubbed++
	}
	return nil
}

// Hold pins every page of a live lease for an in-flight transfer: until Unhold
// the pages are never freed, reclaimed or scrubbed, even if the lease is
// released (aborted) meanwhile. This closes the free-while-in-flight race.
func (p *Pool) Hold(l Lease) (HoldID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return 0, err
	}
	h := &hold{lease: l, pages: append([]int32(nil), ls.pages...)}
	for _, pg := range h.pages {
		p.pages[pg].holds++
	}
	id := p.nextHold
	p.nextHold++
	p.holds[id] = h
	return id, nil
}

// Unhold ends a transfer hold: call it only after the transfer completed or
// its cancellation was acknowledged. Pages of a lease released meanwhile are
// retired now. Errors: ErrUnknownHold.
func (p *Pool) Unhold(id HoldID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.holds[id]
	if h == nil {
		return fmt.Errorf("%w: %d", ErrUnknownHold, id)
	}
	delete(p.holds, id)
	for _, pg := range h.pages {
		m := &p.pages[pg]
		m.holds--
		if m.holds == 0 && m.state == stDraining {
			p.parts[m.part].pinned--
			p.retire(pg)
		}
	}
	return nil
}

// prefixKey extends a namespace's key chain by one page of tokens.
func prefixKey(h []byte, prev [32]byte, tokens []int32) ([32]byte, []byte) {
	h = append(h[:0], prev[:]...)
	for _, tok := range tokens {
		h = binary.LittleEndian.AppendUint32(h, uint32(tok))
	}
	return sha256.Sum256(h), h
}

// lookup returns the cached pages of t's namespace that hold the leading
// full pages of prompt, its key chain starting from start, leaving at
// least one prompt token uncached.
func (p *Pool) lookup(t *tenant, start [32]byte, prompt []int32) []int32 {
	if len(prompt) <= p.pageTokens {
		return nil
	}
	limit := (len(prompt) - 1) >> p.shift
	key := start
	var buf []byte
	var hits []int32
	for i := range limit {
		key, buf = prefixKey(buf, key, prompt[i<<p.shift:(i+1)<<p.shift])
		pg, ok := p.index[key]
		if !ok || p.pages[pg].ns != t.ns {
			break
		}
		hits = append(hits, pg)
	}
	return hits
}

// Publish offers the lease's leading full pages that hold prompt tokens to
// the tenant's prefix-cache namespace. Published pages become read-only for
// the lease and readable by later leases of the same namespace. It stops at
// the first page whose key is already cached. It returns the number of pages
// published.
//
// Errors: ErrStaleLease.
func (p *Pool) Publish(l Lease, prompt []int32) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, err := p.live(l)
	if err != nil {
		return 0, err
	}
	t := p.tenants[ls.tenant]
	full := min(len(prompt), ls.written) >> p.shift
	key := ls.start
	var buf []byte
	published := 0
	for i := range full {
		key, buf = prefixKey(buf, key, prompt[i<<p.shift:(i+1)<<p.shift])
		if i < ls.readOnly {
			continue
		}
		pg := ls.pages[i]
		m := &p.pages[pg]
		if _, dup := p.index[key]; dup || m.state != stLeased || int(m.fill) != p.pageTokens {
			break
		}
		m.state = stCached
		m.owner = 0
		m.refs = 1
		m.ns = t.ns
		p.keys[pg] = key
		p.index[key] = pg
		ls.readOnly = i + 1
		t.cached++
		published++
	}
	return published, nil
}
