// Package faultproxy is a loopback TCP proxy with faults switched at run
// time, for tests that put a network path between processes (the
// fault-injection suite: a transfer stream cut mid-way, a stalled
// PrefillService, refused connections).
//
// It forwards bytes and nothing else: TLS passes through untouched, so mutual
// TLS stays end to end, and because the proxy listens on 127.0.0.1 a
// certificate whose SAN is 127.0.0.1 still matches when a node dials the
// proxy instead of its peer.
//
// Faults (each until Pass):
//
//   - Drop: close both sides of every live connection now.
//   - DropAfter(dir, n): forward n more bytes in dir (counted over all
//     connections from the call), then close every live connection; once.
//   - Stall: forward nothing in either direction, connections kept open
//     (the bytes already read wait in the proxy, the rest in the kernels'
//     buffers, then the sender blocks: what a hung peer or a black-holed
//     route looks like).
//   - StallAfter(dir, n): forward n more bytes in dir, then Stall.
//   - Refuse: new connections are reset at once (live ones are kept).
//
// A test drives it like this:
//
//	p, _ := faultproxy.New(decodeTransferAddr)
//	defer p.Close() // closes every connection and waits for its goroutines
//	start the prefill node with p.Addr() as the decode node's address
//	p.DropAfter(faultproxy.Up, 1<<20) // cut the transfer after 1 MiB
//	… the request fails …
//	p.Pass() // the path heals; new connections go through
//
// # Where it is used
//
// Byte counters per direction. cmd/cloisond/faults_e2e_test.go routes a decode
// node's transfer server (--transfer-advertise = the proxy) and its
// PrefillService peer (--prefill-peers = the proxy) through two of them: a
// transfer cut or stalled mid-stream and a PrefillService call cut or stalled
// each end in a non-200 typed error (transfer_verification_failed,
// unavailable, or deadline_exceeded at --prefill-timeout), a
// request.completed row carrying it, and transfer.verification_failed
// (truncated for a cut, stalled for a transfer that never completed before
// the deadline) with an incident in the register — the path failed, not the
// client; a client that goes away stays a plain cancellation — and once the
// proxies pass again the same node serves, with no page leased, draining or
// visible to the next tenant.
package faultproxy
