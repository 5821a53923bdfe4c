// Package node is the one assembly of a Cloison node, for cloisond and the
// tests alike (node/platformtest): what a node is made of and in which
// order, written once. A caller describes the node in values (Spec: keys
// read from their files, database pools, the model file, capacity, limits,
// listeners, TLS) and Open opens the rest — the deployment keys checked and
// recorded, the ledger and its witnesses, the tenant store, the signing key
// ring and the token verifier, the model, the replay engine, a decode
// node's prefill client — and assembles (New) the KV pool with a partition
// for every stored tenant, the capacity attestation (package attest), the
// arena, the engine, the policy decider and the API server; for a decode
// node the verified-transfer receiver and its server. The prefill role,
// which serves no public API, is package node/prefill (prefill.Open): its
// sender, prefill runner and PrefillService, and the parts every node is
// built from (Model, Capacity, ModelFile).
//
// A node serves a set of models (models.go): the first (Spec.Model) and
// further ones (Spec.Models at start, LoadModel and UnloadModel at run time
// from Spec.ModelDir, the admin API's api.ModelAdmin), each with its own
// instance, pool, arena, engine and recorded attestation, within the
// memory budget (Spec.MemoryBudget). A decode node serves several too: each
// further model has its own transfer receiver, routed by the model digest
// its transfers name (transfer.Router), and its own engine.Remote, which
// asks the prefill nodes to prefill with that model; the prefill nodes are
// attested per model (attest.Prefill with the model's digest and
// attestation) before it serves, at start or load, and a model one of them
// fails is refused, its capacity.attestation ledgered as for the first.
// Each model (but a decode node's) has a registry of its tenants' LoRA adapters
// (adapters.go: RegisterAdapter, UnregisterAdapter, the admin API's
// api.AdapterAdmin; UploadAdapter, a tenant's own upload, stored under
// Spec.ModelDir/adapters/<tenant>), read from Spec.ModelDir and kept for
// the node's lifetime; a replay of an adapter request loads the adapter
// again for the replay engine (replayAdapter), and one not restored at
// start opens a register entry (adapter_restore:<cause>).
//
// Ordering duties it keeps:
//   - Open checks the deployment keys against the ledger's records BEFORE
//     the ledger opens: a node holding another cluster's log key or KEK
//     stops before its ledger writer could sign a checkpoint or its key
//     ring retire the signing keys it cannot open.
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
//   - A run-time load is ledgered (model.loaded) BEFORE the model serves,
//     after its attestation (on a decode node, its prefill nodes' too); an
//     unload (model.unloaded) BEFORE it stops serving, and its engine stops
//     AFTER no request can reach it.
//   - A decode node's model receives transfers (transfer.Router.Add)
//     BEFORE it serves, and stops receiving them (Remove) BEFORE its engine
//     stops: a transfer in flight ends with its cancelled reservation,
//     never committed; a later one is refused (check model). A prefill
//     node joining by DNS must pass every model's check, as the set is
//     asked round-robin for all of them.
//   - An adapter's registration is ledgered (adapter.registered, under its
//     tenant) BEFORE it serves, its removal (adapter.unregistered) BEFORE
//     it stops serving.
//   - Close stops what reports first (engine, transfer server), then makes
//     every incident write durable (api.Server.Close), then writes the last
//     refusal counts — before the caller closes the ledger.
//
// A default build has no switch that starts a node whose attestation failed:
// AttestUnsafe (prefill.AttestUnsafe) has fields only with the faults build
// tag, as the engine's, pool's, kernels' and transfer's Unsafe switches.
//
// Traces (Config.Tracer, prefill.Config.Tracer; internal/tracing has the
// span tree): nil is a no-op provider. A node passes its provider to the
// API server (server spans, auth, policy, ledger.append, queue, prefill,
// decode), to the engine's Remote (a decode node's transfer span, whose
// context the PrefillService call carries in its metadata) and to its gRPC
// servers — the transfer server and the PrefillService — whose calls are
// spans under the caller's traceparent; a prefill node's runner adds
// prefill.compute and transfer.send. So a split request is one trace across
// the two nodes, each exporting its own spans.
//
// Metrics: a prefill node serves its own (prefill.Node.MetricsHandler:
// cloison_prefill_requests_total by outcome, prompt tokens, queue and
// prefill time, pool usage, attestation), a decode node the API server's.
//
// The loop that drives it (cloisond; platformtest the same with an
// httptest server):
//
//	n, err := node.Open(ctx, node.Spec{Name: name, DB: db, Keys: keys, Ledger: lc, Model: mf, Capacity: c, API: limits, Decode: d})
//	if err != nil {
//	        return err // attest.ErrFailed: refuse to start; *KeyError: another cluster's key
//	}
//	n.Start()
//	defer n.Close(shutdownCtx) // after the listeners stopped; closes what Open opened, the ledger last
//	serve(n.Server.Handler(), n.Server.GRPCServer(...))
//	// on shutdown: listeners drain, then n.StopEngine()
package node
