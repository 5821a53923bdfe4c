// Package transfer moves a request's prompt KV from a prefill node to the
// decode node that reserved pages for it, and makes the decode node refuse to
// decode unless the transfer is proven complete and bound to the request
// (defence layer 4, "Verified transfer", docs/architecture.md). It is the path that leaked
// in 2026: a rejected prompt replaced by a one-token placeholder, its KV sent
// as "transfer complete" into a reservation for the whole prompt, and decode
// attending to the rest of the reservation's stale pages.
//
// The loop that drives it (the node roles in cmd wire the two halves):
//
//	// decode node: reserve exactly the prompt, then expect its transfer
//	lease, _ := pool.Allocate(tenant, req, len(prompt))
//	ticket, _ := receiver.Expect(lease, len(prompt))  // holds the pages
//	send ticket.Target() to the prefill node
//	res, err := ticket.Wait(ctx)                      // decode ONLY if err == nil
//	pool.Extend(lease, len(prompt)+maxNew); decode from position len(prompt)
//
//	// prefill node: compute the prompt's KV, then stream it
//	pool.Write(l, n); bt, _ := pool.BlockTable(l, n); model.Forward(...)
//	receipt, err := sender.Send(ctx, transfer.GRPC(conn), l, target)
//	pool.Release(l)
//
// Guarantees (each tested, see transfer_test.go and inflight_test.go):
//
//   - Binding: every transfer carries a manifest bound to (tenant, request,
//     sender lease epoch, receiver lease epoch, the receiver's random
//     reservation nonce, model digest, layout — the arena geometry and the
//     KV element type, f32 or f16 (manifest version 2) —, token count, page
//     count),
//     authenticated with a cluster key (HMAC-SHA256 over a canonical
//     encoding, keys named by id for rotation), and a BLAKE3-256 digest per
//     page covered by the manifest MAC. The header is checked before a byte
//     of KV is copied: another request's, another tenant's, a stale or
//     replayed manifest, another model or layout, pages of another (or an
//     unknown) KV type (ReasonKVType), and transferred tokens !=
//     reserved tokens are refused at once.
//   - Nothing unverified is readable: pages are copied in through an
//     isolation.StagingTable, which records no slot as written; Pool.Write
//     records the tokens only after every page arrived exactly once, in
//     order, with a matching digest, and the manifest MAC verified. Until
//     then Pool.BlockTable refuses every position (ReasonUnwritten).
//   - Fail closed and record: any mismatch is a *VerificationError (code
//     transfer_verification_failed) on both ends; the reservation's lease is
//     discarded (its pages scrubbed before any reuse, whatever the tenant's
//     zeroing mode); OnVerificationFailed reports it once, for the ledger's
//     transfer.verification_failed event and an incident. Over gRPC the
//     sender gets only the code (a google.rpc.ErrorInfo detail,
//     internal/rpcerr) and the public message; the detail stays with the
//     receiver's report.
//   - No free-while-in-flight: the sender holds its lease's pages
//     (Pool.Hold) from before the first CopyOut until its stream ended; the
//     receiver holds the reservation's pages from Expect until the transfer
//     was committed, refused or its cancellation acknowledged (Ticket.Done).
//     An engine that releases either lease meanwhile leaves its pages
//     draining until then.
//   - Authenticate, then claim: the header's MAC is verified under the
//     cluster key BEFORE the reservation it names is claimed. A stream that
//     does not authenticate (junk, an unknown key, a MAC that does not
//     verify) touches no reservation — a certificate holder without the
//     cluster key cannot abort another tenant's transfer — and is counted
//     (OnUnauthenticated) but reported to OnVerificationFailed at most once
//     per peer (the TLS client certificate) and UnauthenticatedWindow, with
//     the suppressed count: a flood cannot fill the incident register.
//   - Node-to-node traffic is gRPC over mutual TLS 1.3 (ServerOptions,
//     DialOptions; certificates from package pki), flow-controlled by HTTP/2
//     windows and chunks of at most ChunkBytes. cloisond binds certificates
//     to roles (pki.RequirePeerRole): only a prefill-role certificate can
//     push to a receiver, and a sender accepts only a decode-role server.
//     Local is the same protocol in process, for engine tests.
//
// Several models: a decode node serving several models has one Receiver per
// model (its pool, arena and digest) behind one Transfer service, a Router,
// which hands a stream to the receiver of the model its authenticated
// header names and refuses one naming a model it does not serve
// (ReasonModel, reported like every refusal, no reservation touched). Lease
// epochs are per pool, so a transfer is judged only against the
// reservations of its own model. Router.Remove (an unloaded model) stops
// routing BEFORE its reservations are cancelled.
//
// Ordering duties of the caller: decode only after Ticket.Wait returned nil;
// build the decode BlockTable after it; Release the prefill lease after Send
// returned (Send holds it meanwhile anyway).
//
// # Wire, digests, certificates, benchmarks
//
// The prefill node streams the pages with sender.Send(ctx, transfer.GRPC(conn),
// lease, target) over gRPC with mutual TLS 1.3 (engine/transfer/proto/cloison/transfer/v1,
// make generate). The page digest is BLAKE3-256 (about 4–7 GB/s, ~3× SHA-256
// with SHA-NI here; collision-resistant against a malicious peer, unlike
// xxh3). One token sent for an N-token reservation is one of the mismatches
// that end both sides with transfer_verification_failed. Pages stay held on
// both nodes until the transfer completes or its cancellation is acknowledged.
//
// Development certificates: package pki (engine/transfer/pki; an ECDSA P-256
// CA and node certificates).
//
// Benchmarks: go test -bench . ./engine/transfer/. BenchmarkTransferCrossProcess
// puts the receiver in another OS process (the test binary re-executed as
// TestHelperReceiverProcess, gRPC with mutual TLS on loopback, each transfer's
// Result sent back over its stdin/stdout) and reports GB/s and the receiver's
// verification share (verify-cpu-%, verify-wait-% of header-to-commit time) for
// leases of 1, 16 and 64 MiB.
package transfer
