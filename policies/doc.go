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
//     personal or confidential data, or a node or — on a decode node —
//     every prefill node outside the tenant's residency: Input.Complies).
//   - residency.rego (a tenant confined to node regions and tiers) denies with permission_denied a request
//     whose tenant's residency (input.tenant.residency) this node
//     (input.node: its attested labels) or, on a decode node
//     (input.node.split), every prefill node it may ask now
//     (input.node.prefill) is outside of; Reload's probe refuses a bundle
//     that lets such a request through.
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
//   - An allowed decision's Limits are each at least 1 and never looser
//     than the tenant record's quota (max_concurrent, kv_pages,
//     tokens_per_minute), the served context and the tenant's max context
//     (max_context) or the request (max_tokens): a bundle may tighten
//     quotas, never loosen them; otherwise the decision is ErrEvaluation.
//
// The API applies every limit of an allowed decision, before the decision
// is ledgered and before anything is allocated:
//
//	limit             applied as
//	max_tokens        clamp: the completion stops there (finish "length")
//	max_context       refuse: prompt + completion above it is context_length_exceeded
//	kv_pages          refuse: a request needing more pages is context_length_exceeded;
//	                  the tenant's requests in flight together reserve at most
//	                  kv_pages pages (Limiter.AdmitLease; quota_exceeded, 429)
//	max_concurrent    refuse: quota_exceeded (429, Retry-After) at that many in flight
//	tokens_per_minute refuse: the Limiter's bucket is sized by it
//	                  (rate_limit_exceeded, 429, or quota_exceeded when it can never fit)
//
// max_tokens is the only clamp: it is the completion budget, and a client
// asking for more than the policy grants gets a shorter answer, as it would
// at the end of the context. Every other limit bounds resources that a
// clamp could not make fit without changing what the client asked for.
//
// The request path that drives it (the API):
//
//	dec, err := decider.Decide(ctx, policies.Input{Principal: p, Tenant: p.TenantRecord,
//	        Request: policies.Request{Model: m, PromptTokens: n, MaxTokens: k}, Attestation: att})
//	if err != nil { count the refusal; return err }     // *DeniedError or ErrEvaluation
//	// apply dec.Tier, dec.Zeroing (refuse if the pool cannot) and dec.Limits
//	// (above); a refusal there is counted too
//	ledger.Append("policy.decision", dec.Record(in))    // BEFORE service: no service without it
//
// Refusals are not ledgered one row each: the API counts them per tenant,
// stage and code and writes a policy.refusals summary per tenant every
// flush (api.Server.RunRefusals), so that a flood of refused requests adds
// a bounded number of rows (tenants × flushes), not one per request.
//
// # Input, output and rules
//
// Input: principal, tenant record (with its residency), request (model, prompt
// tokens, max tokens), capacity attestation (of the requested model's own
// pool on a node serving several: attestation.model and model_digest name
// it), this node's labels and, on a decode node, its prefill nodes' labels. Output: allow, reasons (code +
// message), isolation tier and zeroing mode, limits. Shipped rules:
// personal/confidential ⇒ dedicated + always; model allow-list; per-tenant max
// context (never above the served context); no service while the capacity
// attestation fails; suspended tenant, another tenant's principal or a missing
// infer scope denied; residency (403 permission_denied). The decision id is
// returned to the client as X-Cloison-Decision-Id. Reload is the admin API's
// (POST /admin/v1/policies/reload, ledgered as policy.reloaded); a refused
// bundle leaves the old one serving. go test ./policies runs the Rego tests
// through OPA's tester.
package policies
