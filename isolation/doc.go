// Package isolation is the KV page pool that makes a cross-tenant read
// impossible and detectable. It keeps the metadata of every page of a paged
// KV cache; the KV bytes live in a kernels backend arena.
//
// Like raft's RawNode it is a core without I/O: deterministic bookkeeping
// guarded by one mutex, driven by the engine's loop, which does the work the
// pool asks for (writing KV, zeroing pages). The loop of a driver:
//
//	lease, cached, err := pool.AllocatePrefix(tenant, req, promptLen+maxNew, prompt)
//	// err: reject (ErrTooLarge), wait (ErrPoolExhausted, ErrScrubPending)
//	for each step {
//		pool.Write(lease, n)                 // BEFORE the kernel writes n slots
//		bt, err := pool.BlockTable(lease, pos+n) // AFTER; a *ViolationError aborts
//		backend.WriteKV(bt, ...); backend.Attention(bt, ...)
//		pool.Extend(lease, pos+n+1)          // decode grows the lease
//	}
//	pool.Publish(lease, prompt)              // optional: share full prompt pages
//	pool.Release(lease)                      // pages go to quarantine
//	work := pool.ScrubWork()                 // every step
//	backend.ZeroPages(work)                  // BEFORE ConfirmScrub
//	pool.ConfirmScrub(work)
//
// Guarantees (each tested, see pool_test.go and property_test.go):
//
//   - Allocation is all-or-nothing: a lease gets every page it asked for or a
//     typed error (ErrTooLarge, ErrQuotaExceeded, ErrPoolExhausted,
//     ErrScrubPending) and no page changes state. Reject-before-allocate
//     builds on this.
//   - Every page carries its owner (tenant, request, epoch) and the number of
//     slots the owner wrote in the current epoch. BlockTable approves a read
//     only if every page belongs to the reading lease (or is a prefix page of
//     its namespace that it references) in the generation it took it, and
//     every slot read was written in this epoch; otherwise it returns a
//     *ViolationError. A lease reserving N slots with 1 written cannot read N.
//   - A transfer receiver copies KV in through a StagingTable (kernels may
//     CopyIn through it, never read) and records it with Write only after
//     verifying the transfer; until then BlockTable refuses the staged
//     slots, and a lease that ends with staged slots unrecorded is scrubbed
//     whatever the zeroing mode.
//   - A page's generation increases every time it leaves an owner; epochs are
//     never reused: a stale Lease value is always detected (ErrStaleLease).
//   - Freed pages are quarantined. In cross-tenant and always modes a page
//     never reaches another tenant without a confirmed scrub (ScrubWork,
//     ConfirmScrub); in always mode not even its own tenant. Pages held by an
//     in-flight transfer (Hold) are not freed before Unhold.
//   - Dedicated tenants' pages never leave them; shared tenants' reserved
//     pages are never lent to others; caps bound each tenant.
//   - A tenant's partition is added once (AddTenant, or EnsureTenant for a
//     tenant first seen on a request, atomic under concurrent callers) and
//     never changes while the pool lives; Partition reads it in one lookup.
//   - Prefix-cache keys are a SHA-256 chain seeded with a salt derived from a
//     server secret and the tenant (HMAC), never from client input. Lookups see
//     only their namespace; cross-tenant sharing exists only through a shared
//     namespace configured explicitly. Cached pages are read-only, reference
//     counted and evicted least-recently-used, scrubbed per their writer's mode.
//   - Check audits all of the above.
//
// Config.Unsafe switches single defences off for tests that prove the other
// layers still fail closed — only in a build with the faults tag; in the
// default build it has no fields, so no defence can be switched off.
//
// # Details
//
// Allocate(tenant, request, tokens) returns a Lease{tenant, request, epoch};
// ErrTooLarge means the request can never fit (reject; code
// context_length_exceeded). Extend grows a lease the same way, all or nothing.
// Admission asks MaxLeaseTokens before allocating (reject-before-allocate). A
// refused read is a *ViolationError{Page, Owner, Reader, Reason} (code
// isolation_violation): the 2026 failure is refused here.
//
// Zeroing modes, per tenant (never laxer than the pool default; the zero value
// means cross-tenant):
//
//	mode                    cost                                what it protects
//	never                   nothing                             safety rests on tags and fill counts alone
//	cross-tenant (default)  a memset when a page changes tenant a bookkeeping bug can only show a tenant its own data
//	always                  a memset per freed page             requests of the same tenant from each other too
//
// Only ConfirmScrub returns quarantined pages to a free list. Hold(lease) pins
// pages for an in-flight transfer: an aborted lease's pages drain only after
// Unhold (the free-while-in-flight race of SGLang PR #35049).
//
// Tiers: shared tenants take pages from the common pool; their Reserved pages
// are guaranteed and never lent to others; Cap bounds them. Dedicated tenants
// own a fixed set of pages that never leave them. Full prompt pages can be
// Published; lookups (AllocatePrefix) see only their own namespace.
// Cross-tenant sharing exists only through a namespace listed in
// Config.SharedNamespaces (off by default).
//
// Check audits every invariant: the page sets partition the pool; no page has
// two owners except reference-counted prefix pages of one namespace; lease
// pages carry the lease's tags and fill counts; dedicated pages never leave; no
// strict-mode page is where another tenant can take it; counters match a
// recount. Stats gives per-tenant counters for metrics.
//
// # Tests and benchmarks
//
// Table-driven unit tests per rule, the 2026 incident at pool level, a rapid
// property test (at least 8 tenants of every tier and mode, random
// allocate/extend/write/read/release/scrub/hold/publish schedules, Check after
// every step, and an independent shadow arena asserting that no approved read
// covers a slot last written by another tenant or an older epoch, and that no
// page reaches a tenant unscrubbed where its writer's mode forbids it), and
// FuzzPool driving the same machine from bytes. Benchmarks:
//
//	go test -bench . ./isolation
package isolation
