// Package tenancy knows who is calling and how much they may use: tenant
// records, API clients and Ed25519 signing keys in PostgreSQL (Store), JWT
// issue and verification (Issuer, Verifier, Principal), and per-tenant
// quotas (Limiter).
//
// Guarantees:
//   - Verify accepts only EdDSA tokens signed by a verifying key (next,
//     current or previous) of a trusted issuer, bound to that issuer, with
//     exp, the expected aud, a subject, a tenant that exists and is active,
//     and known scopes; every refusal is a typed error of code
//     unauthenticated (or permission_denied for a suspended tenant or a
//     scope not granted). A store failure is returned as such, never as a
//     success.
//   - Signing keys move next → current → previous → retired, never back; a
//     retired key stops verifying at once in the process that retired it and
//     at the next Reload elsewhere. Private keys are stored sealed (AES-256-
//     GCM, bound to kid and issuer) under a key-encryption key kept outside
//     the database (LoadKEK; the dev default is ./.cache/cloison/signing.kek).
//   - A verifying key is one that a holder of the key-encryption key made:
//     on every load each next, current and previous row must open under the
//     KEK (AES-GCM, bound to kid and issuer) and derive the row's public key.
//     The runtime database role can write signing_keys, but a row it plants
//     is refused (never verifies, logged, listed by KeyRing.Refused) and
//     the next rotation retires it.
//   - A sensitive tenant (personal or confidential data) is always stored
//     with the dedicated tier and zeroing always (Validate and the database
//     both refuse anything else).
//   - A Limiter rejection takes nothing and says when to retry.
//
// The request path that drives it:
//
//	p, err := verifier.Verify(ctx, bearer)       // 401 / 403
//	err = p.Require(tenancy.ScopeInfer)          // 403
//	permit, err := limiter.Admit(p.Tenant, p.TenantRecord.Quotas, prompt+maxTokens) // 429 + Retry-After
//	defer permit.Release(prompt + generated)
//
// Keys at start (cmd/cloisond):
//
//	kek, err := tenancy.LoadKEK(".cache/cloison/signing.kek", true)
//	ring, err := tenancy.OpenKeyRing(ctx, store, issuer, kek) // makes current+next on first start
//	jwksJSON := ring.JWKS()                                   // serve at the JWKS endpoint
//	// every few minutes: ring.Reload(ctx); rotate with ring.Rotate(ctx)
package tenancy
