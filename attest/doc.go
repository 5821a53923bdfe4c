// Package attest is capacity attestation (ARCHITECTURE.md layer 2): the
// statement a node publishes of the context it serves and what its KV pool
// holds, and the check a decode node makes of its prefill nodes.
//
// It is pure computation over numbers (no I/O, no pool, no model), so that
// what publishes or judges an attestation — engine (which refuses to start
// without a passing one), policies (which deny on a failed one), api (which
// serves it), the ledger record — needs this package and not the engine.
// It imports only the shared vocabulary and isolation's zeroing modes.
//
// Guarantees:
//   - Capacity fails (ErrFailed, OK false, a Reason) when pool_tokens <
//     K × served_context, when the served context exceeds the model's, or on
//     any non-positive size. The served context defaults to the model's: a
//     smaller pool must be matched by an explicitly lowered served context,
//     never by silently advertising less or more than the pool holds.
//   - Prefill fails unless every prefill node serves the same model file,
//     passed its own attestation, and holds a whole request of the decode
//     node's served context; the returned capacity (the smallest prefill
//     pool) is admission's bound on a prompt.
//   - Labels (region, tier; issue 17 §5) travel in the attestation: a
//     malformed label fails Capacity (the node refuses to start) and a
//     peer's fails Prefill. Labels.Serves is the one residency judgement —
//     the policy floor, the API's tenant view and the decode node's prefill
//     client all call it — and an unlabelled node serves no tenant that
//     requires a region or a tier. The labels are the operator's statement
//     (cloisond --node-region, --node-tier), carried on the same
//     mutual-TLS PrefillService.Attest answer as the capacity: a node
//     holding a valid prefill certificate could state a false region, as it
//     could a false pool size; what binds a label to a place is the
//     certificate the operator issues to that place's nodes.
//
// The driving sequence, at node start (internal/node):
//
//	att, err := attest.Capacity(attest.Config{ModelContext: m.Context, PoolPages: pages, PageTokens: 16, K: k})
//	if decode {
//	        att, capacity, err = attest.Prefill(att, modelDigest, peers) // peers: PrefillService.Attest
//	}
//	// ledger: capacity.attestation (Ready: err == nil), BEFORE serving
//	if err != nil {
//	        return err // refuse to start
//	}
//	eng, _ := engine.New(engine.Config{Attestation: att, ...})
package attest
