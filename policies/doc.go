// Package policies decides, per inference request, whether it is served and
// how: the Rego bundle under rego/ (embedded) is compiled and prepared once
// (New, Reload) and evaluated in-process with OPA for each request
// (Decide).
//
// Guarantees:
//   - Deny on doubt: an evaluation error, an undefined decision, a
//     non-boolean allow or any malformed output denies (ErrEvaluation), as
//     does a bundle that allows what the platform forbids (an inactive
//     tenant, a failed capacity attestation, a principal of another tenant,
//     isolation laxer than the tenant record's or than dedicated/always for
//     personal or confidential data).
//   - Decisions depend on the input and the bundle only: builtins that reach
//     outside the process or are not deterministic (http.send, net.*,
//     opa.runtime, rand.*, uuid.*, time.now_ns) are not available to
//     bundles. Each Decision carries its id, the bundle's revision (SHA-256
//     of its sources), the SHA-256 of its input document and its latency,
//     for the ledger's policy.decision event (Decision.Record).
//   - Reload prepares a new bundle fully — compiles it, runs its
//     *_test.rego tests, and probes it against the platform invariants —
//     before swapping it in atomically; a refused bundle changes nothing.
//     ReloadWith swaps only after its commit step (the API ledgers
//     policy.reloaded there) succeeds; reloads are serialised end to end,
//     so the ledger's order of reloads is the order bundles served in.
//
// The request path that drives it (the API):
//
//	dec, err := decider.Decide(ctx, policies.Input{Principal: p, Tenant: p.TenantRecord,
//	        Request: policies.Request{Model: m, PromptTokens: n, MaxTokens: k}, Attestation: att})
//	ledger.Append("policy.decision", dec.Record(in))   // allowed or not
//	if err != nil { return err }                        // *DeniedError or ErrEvaluation
//	// apply dec.Tier, dec.Zeroing (refuse if the pool cannot), dec.Limits.MaxTokens
package policies
