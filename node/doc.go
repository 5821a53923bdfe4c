// Package node is the one assembly of a Cloison node, for cloisond and the
// tests alike (node/platformtest): what a node is made of and in which
// order, written once. Callers open the ingredients — database stores and
// the ledger, keys, the loaded model, listeners, TLS — and node builds the
// rest: the KV pool with a partition for every stored tenant, the capacity
// attestation (package attest), the arena, the engine, the policy decider
// and the API server; for a decode node the verified-transfer receiver and
// its server; for a prefill node (NewPrefill) the sender, the prefill runner
// and the PrefillService.
//
// Ordering duties it keeps:
//   - The attestation is recorded in the ledger (capacity.attestation) BEFORE
//     the node serves, whether it passed or not; a failed one stops New with
//     attest.ErrFailed (the node refuses to start). A decode node's prefill
//     nodes are checked in (attest.Prefill) before that record.
//   - The policy bundle serving from the start is recorded (policy.reloaded)
//     BEFORE the API server exists.
//   - Hooks are served only after what they report to exists: New builds
//     the engine and the transfer server, whose incident and refusal reports
//     go to the API server, and starts neither; Start runs them once the
//     server exists, so no report reaches a nil server.
//   - A decode node's prefill client is told each tenant's residency (read
//     from the tenant store per prefill, an unreadable record refuses) and
//     is the API server's Placement, so admission, the tenant's attestation
//     view and request.completed see the same prefill set.
//   - Close stops what reports first (engine, transfer server), then makes
//     every incident write durable (api.Server.Close), then writes the last
//     refusal counts — before the caller closes the ledger.
//
// Traces (Config.Tracer, PrefillConfig.Tracer; internal/tracing has the
// span tree): nil is a no-op provider. A node passes its provider to the
// API server (server spans, auth, policy, ledger.append, queue, prefill,
// decode), to the engine's Remote (a decode node's transfer span, whose
// context the PrefillService call carries in its metadata) and to its gRPC
// servers — the transfer server and the PrefillService — whose calls are
// spans under the caller's traceparent; a prefill node's runner adds
// prefill.compute and transfer.send. So a split request is one trace across
// the two nodes, each exporting its own spans.
//
// Metrics: a prefill node serves its own (Prefill.MetricsHandler:
// cloison_prefill_requests_total by outcome, prompt tokens, queue and
// prefill time, pool usage, attestation), a decode node the API server's.
//
// The loop that drives it (cloisond; platformtest the same with an httptest
// server):
//
//	n, err := node.New(ctx, node.Config{Model: m, Capacity: c, Ledger: ledger, Tenants: store, API: apiCfg, Decode: d})
//	if err != nil {
//	        return err // attest.ErrFailed: refuse to start
//	}
//	n.Start()
//	defer n.Close(shutdownCtx) // after the listeners stopped, before ledger.Close
//	serve(n.Server.Handler(), n.Server.GRPCServer(...))
//	// on shutdown: listeners drain, then n.StopEngine()
package node
