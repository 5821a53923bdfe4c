// The operations half of package service (to merge into its doc.go): the
// administration, compliance and response operations, each a type built
// from narrow interfaces of what it uses and called, unchanged, by both
// transports (api's HTTP handlers and gRPC services are codecs around them).
//
//	Admin       tenants, API clients, token revocation, signing keys, the
//	            policy bundle, the register's organisation, the pool status
//	Compliance  the incident register (read scoped to the caller's tenant,
//	            written by officers), notice drafts and deadlines, ledger
//	            listings, verification, signed exports, and the signed
//	            checkpoints and proofs of the transparency log (proofs.go)
//	Responses   keyed digests of what was served, verify, report, replay,
//	            and the sealed stored responses of the Responses API
//
// What each guarantees, and its tests:
//
//   - Every change is ledgered in the transaction that makes it (the stores
//     do it under the actor tenancy.WithActor puts on the context), or
//     before it takes effect (a policy bundle serves only after its
//     policy.reloaded event is recorded): a change the ledger cannot record
//     does not happen. The stores' own tests (tenancy, audit/postgres) and
//     api's admin tests check it through both transports.
//   - A tenant principal never learns another tenant's incidents, ledger
//     rows, requests, reports or stored responses exist: each is answered
//     as an unknown id (ErrNotVisible, ErrNoRequest, ErrNoReport,
//     ErrNoResponse), and its ledger listing and proofs are its own tenant
//     log (TenantLogOf). Operator officers (the admin scope) see
//     everything. The unit tests here check each rule against in-memory
//     fakes; api's tests check them through both transports.
//   - Nothing these operations write to the ledger holds text: digests,
//     identifiers and counts. Report text and stored responses are sealed
//     with AES-256-GCM under a per-tenant key derived from the KEK, bound to
//     the tenant and the id.
//   - A replay runs alone (one at a time, ErrReplayBusy otherwise) on the
//     replay engine, in a zeroed partition of its own, only where the
//     tenant's residency allows this node, and answers inconclusive, with
//     the reason, wherever equal digests would prove nothing
//     (ReplayObstacle).
//   - Errors carry cloison.Error codes; the transports map them to wire
//     statuses through their one error table. Each method's comment lists
//     the errors it returns.
//
// Compliance streams (ledger listings, verifications, exports) pass a Gate
// first, so that no tenant can hold every connection of the node; the
// transport supplies it, with its own send timeouts.

package service
