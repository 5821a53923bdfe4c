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
package isolation
