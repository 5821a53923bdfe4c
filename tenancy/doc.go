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
//   - An external identity provider (Provider, VerifierConfig.Providers) is
//     trusted for its own iss only: RS256 (RSA of at least 2048 bits), ES256
//     (P-256) or EdDSA keys from its JWKS URL (https, or http to loopback),
//     the key's type and alg matching the token's alg (HS*, none, PS*, an EC
//     kid under RS256: ErrTokenAlgorithm; keys in the token's own jwk/jku
//     headers are never used); its audience (ProviderConfig.Audience or the
//     verifier's); the tenant from ProviderConfig.TenantClaim, the scopes
//     from ScopeClaim (a space-separated string or a list; scopes Cloison
//     does not know, such as openid, are dropped). Its tokens then pass the
//     tenant status, revocation and client checks as any other. The set is
//     cached for Cache-Control max-age clamped to [MinCache, MaxCache] (1 min,
//     24 h; no-store: MinCache), refetched when expired or on an unknown kid,
//     at most once per RefreshLimit (30 s), so rotation works (a new kid is
//     picked up, an old one verifies until a refresh no longer lists it) and
//     unknown kids cannot flood the IdP. An expired set that cannot be
//     refreshed verifies nothing (ErrUnavailable, 503); a document with a
//     private part, a duplicate kid or a weak key is refused whole.
//   - A tenant's notice clause (the contractual incident notice: IncidentContact, at most 512
//     bytes, and NoticeDeadlineHours, 0 to MaxNoticeDeadlineHours, 0 meaning
//     none agreed; migration 00016 CHECKs the same bound) changes like any
//     tenant field, its tenant.updated event in the same transaction; the
//     register applies it (audit.IncidentFile.NoticeDues).
//   - A tenant's Residency (allowed node regions, empty for
//     any, and a required node tier, empty for any; DNS labels, at most
//     MaxRegions distinct regions; migration 00019 CHECKs the alphabet)
//     changes like any tenant field, with tenant.updated in the same
//     transaction, and applies from the tenant's next request: policies
//     deny one no compliant node can serve, and a decode node's prefill
//     client never sends its prompt outside it (attest.Labels.Serves).
//   - Signing keys move next → current → previous → retired, never back; a
//     retired key stops verifying at once in the process that retired it and
//     at the next Reload elsewhere. Private keys are stored sealed (AES-256-
//     GCM, bound to kid and issuer) under a key-encryption key kept outside
//     the database (LoadKEK; the dev default is ./.cache/cloison/signing.kek).
//   - A verifying key is one that a holder of the key-encryption key made:
//     on every load each next, current and previous row must open under the
//     KEK (AES-GCM, bound to kid and issuer) and derive the row's public key.
//     The runtime database role can state a signing_keys row through
//     row_apply, but a row it plants is refused (never verifies, logged,
//     listed by KeyRing.Refused) and the next rotation retires it.
//   - Every change — tenant create/update/suspend/activate, API client
//     create/revoke, token revocation, key creation, rotation and
//     retirement — appends its ledger event in the change's own
//     transaction, as its last statement: if the ledger cannot record it
//     (ErrLedger), or the Store has none (ErrNoLedger), nothing changes.
//     The event's actor comes from the context (WithActor).
//   - A tenant, client or key row is what its last ledger event states.
//     The runtime role has no INSERT or UPDATE on those tables (migration
//     00027): they change through the database's row_apply
//     (Ledger.ApplyTx), which appends the event, whose State is the
//     digest of the row's state document (audit.RowState), and writes the
//     row from that document, in one statement. Tenant, Client and
//     KeyRing.Reload check every row they read against its last event
//     and, with WithEventKeys (the node's log keys), the event's
//     signature: a row changed off the record, or stated by an event the
//     log key did not sign, is refused (ErrRowUnproven: the tenant's or
//     client's requests fail closed; the ring keeps the keys it had) and
//     reported once to WithRowAlarm (the node opens an incident). An
//     administrator's next change of the row states it again; UpdateTenant
//     writes a refused tenant even when fn changes nothing, and a rotation
//     restates the key rows retired off the record (they stay retired). BindUnbound
//     binds rows older than the migration, as found.
//   - Rotate refuses while the current key is younger than the ring's
//     minimum interval (DefaultMinRotateInterval = DefaultMaxTTL;
//     ErrRotateTooSoon), so two quick rotations cannot retire the key that
//     signed live tokens; Retire stops one non-current key at once.
//   - Verify checks, on every request, the revocation list (by issuer and
//     jti: ErrTokenRevoked) and the API client (ErrClientRevoked) when
//     configured; the Store caches both for ClientCacheTTL (2 s), and a
//     revocation made through a Store shows in it at once.
//   - A sensitive tenant (personal or confidential data) is always stored
//     with the dedicated tier and zeroing always (Validate and the database
//     both refuse anything else).
//   - A Limiter rejection takes nothing and says when to retry
//     (LimitError.RetryDelay, which the API sends as Retry-After and
//     google.rpc.RetryInfo). With AdmitLease a tenant's requests in flight
//     together reserve at most its KVPages quota of KV pages.
//   - Tokens per minute are cluster-wide with Limiter.WithBudget(store)
//     (cloisond's default): one bucket row per tenant in PostgreSQL
//     (tenant_token_buckets, migration 00010), refilled on the database's
//     clock, leased by each node in chunks of TokensPerMinute/20 with one
//     atomic UPDATE; N nodes admit at most TokensPerMinute·(1 + w/1min) +
//     N·TokensPerMinute/20 tokens over a window w. A request served from
//     the node's leased chunk touches no database; one that needs a lease
//     waits one round trip (BenchmarkAdmit). A store that cannot lease is
//     ErrBudgetUnavailable (503): never admitted uncounted. Concurrency
//     and KV pages stay per node (they bound the node's own engine).
//   - A database that refuses or lost the connection (internal/pgstate:
//     classes 08, 53, 57, 3D000, 55000, 25006, a refused or broken
//     connection) is ErrUnavailable (503), never ErrStore (500); the
//     driver's text stays below the sentinel as the private cause.
//
// The request path that drives it:
//
//	p, err := verifier.Verify(ctx, bearer)       // 401 / 403
//	err = p.Require(tenancy.ScopeInfer)          // 403
//	permit, err := limiter.AdmitLease(p.Tenant, quotas, prompt+maxTokens, pages) // 429 + Retry-After
//	defer permit.Release(prompt + generated)
//
// Keys at start (cmd/cloisond):
//
//	store := tenancy.NewStore(pool).WithLedger(ledger)        // changes ledgered in their transaction
//	kek, err := tenancy.LoadKEK(".cache/cloison/signing.kek", true)
//	ring, err := tenancy.OpenKeyRing(ctx, store, issuer, kek, tenancy.WithLogger(log)) // makes current+next on first start
//	jwksJSON := ring.JWKS()                                   // serve at the JWKS endpoint
//	go ring.Run(ctx, time.Minute, 30*24*time.Hour, onErr)     // reload; rotate when due (never within the minimum interval)
//
// # Records, tokens and flags
//
// Tenants (tenants), API clients (api_clients) and signing keys (signing_keys)
// live in PostgreSQL (the runtime role may SELECT them and write them only
// through row_apply, never DELETE). A tenant has a status (active/suspended), an isolation tier
// and zeroing mode, a data classification (public/internal/confidential/
// personal — personal and confidential require the dedicated tier and always
// zeroing, enforced in Go and by a CHECK), quotas (concurrent requests, KV
// pages, tokens per minute, max context), an explicit list of allowed models
// and an incident-notice clause (contact and deadline).
//
// Claims: iss, aud, sub, exp (required), nbf, iat, jti, tenant, scopes (infer,
// compliance:read, compliance:write, admin, adapters:write). Keys have RFC 7638 thumbprints as
// kid; next, current and previous verify, only current signs, retired never
// verifies. The JWKS (RFC 7517/8037 OKP keys) is served at
// /.well-known/jwks.json. The KEK is --kek-file (in --dev,
// ./.cache/cloison/signing.kek, mode 0600, created on first start): whoever
// holds that file and the database can mint tokens — back it up and protect
// it like a password; the runtime database role alone cannot. An external
// issuer is trusted by loading its JWKS file (LoadJWKSFile; cloisond
// --trust-jwks ISSUER=PATH); its keys verify only tokens with its iss. An
// identity provider is configured with --jwks-url, --jwt-issuer,
// --jwt-audience, --jwks-tenant-claim, --jwks-scope-claim and
// --jwks-refresh-limit (default 30 s).
//
// Verification refuses (401) alg none/HS*/anything but EdDSA (RS256/ES256 only
// from a --jwks-url provider), unknown kid, bad signature, untrusted iss, wrong
// aud, expired, not yet valid, missing exp/sub/tenant, unknown scope or
// tenant, revoked client, revoked token (by jti; both lists read on every
// request, cached 2 s); it refuses (403) a suspended tenant or a scope not
// granted; with the database down it answers 503, never a success. Limiter
// enforces concurrent requests and a tokens-per-minute bucket per tenant and
// returns 429 with Retry-After; counted in PostgreSQL (tenant_token_buckets)
// across replicas, N nodes admit at most the quota plus N·quota/20.
package tenancy
