// Package attest is capacity attestation (defence layer 2): the
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
//   - Labels (region, tier: where a tenant's data may be processed) travel in the attestation: a
//     malformed label fails Capacity (the node refuses to start) and a
//     peer's fails Prefill. Labels.Serves is the one residency judgement —
//     the policy floor, the API's tenant view and the decode node's prefill
//     client all call it — and an unlabelled node serves no tenant that
//     requires a region or a tier. A node's labels are signed by the CA into
//     its certificate (pki.IssueNode: URI SANs
//     spiffe://cloison/label/region/VALUE, …/tier/VALUE): cloisond refuses
//     to start with --node-region/--node-tier other than its certificate's,
//     and Prefill fails a peer whose attested labels differ from those its
//     certificate names on the mutual-TLS answer (PrefillPeer.Certified),
//     or that attests labels with no certificate. So a prefill node cannot
//     claim a region without its CA having signed it; whoever holds the CA
//     key can sign any region, as it can any role.
//
// The driving sequence, at node start (node):
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
//
// A node serving several models attests each with its own pool; a decode
// node runs Prefill once per model, with that model's attestation, digest
// and the peers' attestations of that model (PrefillService.Attest names
// it): a peer that does not serve it (no digest) fails "does not serve
// model", and the model, not the other ones, is refused.
package attest
