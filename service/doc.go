// Package service is Cloison's application without a transport: the
// request path and the operations around it.
//
// On the request path a bearer token becomes a principal, a decoded
// request becomes a policy decision, an admission, a ledgered decision, the
// engine's sequences of its choices and a ledgered completion, and the
// failures the engine and the transfer receiver detect become durable
// incidents. The operations (Admin, Compliance, Responses) administer
// tenants and keys, keep the incident register, list, verify, export and
// prove the ledger, and verify, report, replay and seal what was served.
// Transports (package api: HTTP, SSE, gRPC) decode a request into a
// Request or an operation's arguments, receive tokens through a Sink,
// encode the result or the error through their one error table, and hear
// what happened through an Observer (metrics, access log); nothing here
// reads a header, a route or a transport's context. What the service uses
// of the rest of the node is declared here as narrow interfaces (Engine,
// Ledger and its parts, TenantStore, Pool, KeyRing), each satisfied by the
// production type its comment names, so a test may hand in a fake that
// implements only what it exercises.
//
// # What it guarantees
//
//   - No unaudited service: a request reaches the engine only once its
//     allowed policy decision is durable in the ledger, and a generation
//     ends with success only once request.completed is durable and its
//     receipt signed (Recorder.Receipt, Result.Receipt: no receipt, no
//     success). A ledger
//     that does not answer within Config.LedgerTimeout refuses the request
//     with ErrLedgerUnavailable.
//   - Deny by default: a request is served only under an allowed decision,
//     by a pool that isolates the tenant at least as the decision requires
//     (tier, zeroing), within the decision's limits — max_tokens clamps,
//     max_context and kv_pages refuse, the tenant's quotas admit. A request
//     naming no max_tokens (Request.DefaultMax) is decided with the rest of
//     its context (capped by Config.DefaultMaxTokens), then fitted to what
//     the limits leave, so that the default alone never refuses it.
//   - Reject before allocate: every choice passes the engine's checks
//     before the decision is ledgered and before any sequence starts; the n
//     choices of one request are counted together against the request's KV
//     pages and the tenant's quota.
//   - Every refusal is counted: a request refused before service (capacity,
//     policy, isolation, limits, quota, admission) is one count per tenant,
//     stage and code, written as a policy.refusals summary per tenant at
//     each flush (RunRefusals); counts whose write fails are kept.
//   - Fail closed on isolation: an isolation failure (the engine's
//     OnIncident, a refused transfer) ends the request with its error, is
//     ledgered with counts and identifiers only, and opens a register
//     entry; the write is retried until Close and counted when lost.
//   - Every change an operation makes is ledgered in the transaction that
//     makes it (the stores do it under the actor tenancy.WithActor puts on
//     the context), or before it takes effect (a policy bundle serves only
//     after its policy.reloaded event is recorded): a change the ledger
//     cannot record does not happen.
//   - A tenant principal never learns that another tenant's incidents,
//     ledger rows, requests, reports or stored responses exist: each is
//     answered as an unknown id (ErrNotVisible, ErrNoRequest, ErrNoReport,
//     ErrNoResponse), and its ledger listing and proofs are its own tenant
//     log (TenantLogOf). Operator officers (the admin scope, Operator) see
//     everything.
//   - Nothing the service writes to the ledger holds text: digests,
//     identifiers and counts. Report text and stored responses are sealed
//     with AES-256-GCM under a per-tenant key derived from the KEK, bound to
//     the tenant and the id.
//   - A replay runs on the replay engine, in a zeroed partition of its
//     tenant, only where the tenant's residency allows this node, and
//     answers inconclusive, with the reason, wherever equal digests would
//     prove nothing (ReplayObstacle). A request served under a tenant's
//     adapter replays under the adapter of the digest it recorded, one the
//     tenant holds now (ResponseConfig.ReplayAdapter), else inconclusive
//     (adapter-not-registered, adapter-file-changed): never under another
//     adapter or none. A tenant's replay is charged to its
//     quotas like a request (tokens per minute, concurrent requests); the
//     engine's slots are shared fairly: one replay waiting or running per
//     tenant (ErrReplayTenantBusy, 429), the waiters served in arrival
//     order (ErrReplayBusy, 503, after ResponseConfig.ReplayWait), every
//     refusal with its retry hint.
//   - Admission before work: a request's constraint (a response_format
//     schema, tool calls) is compiled only after its policy decision, its
//     limits and its tenant's quota and concurrency admitted it
//     (Constraint); compiled schemas are cached per tenant under a byte
//     budget shared fairly between tenants (grammar.Cache).
//   - Errors carry cloison.Error codes; the transports map them to wire
//     statuses through their one error table. Each method's comment lists
//     the errors it returns.
//
// The unit tests here check each rule against in-memory fakes; api's tests
// check them again through both transports, and the stores' own tests
// (tenancy, audit/postgres) that their changes are ledgered.
//
// # The request path, top to bottom
//
// A transport calls Generate(ctx, principal, request, sink); everything it
// does is in generate.go, choices.go and ledger.go, in this order:
//
//	Generate
//	  model check (resolveModel)           ErrUnknownModel; "<model>:<adapter>": the tenant's own adapter (adapters.go)
//	  Observer.OnTokens(prompt, 0)          the access record sees the prompt
//	  Config.Gate(tenant)                   the node's stream caps → Refuse(capacity)
//	  decide (policies.Decider, in process) sink.Decided(id); deny → Refuse(policy)
//	  applies (Engine.EnsureTenant)         pool weaker than the decision → Refuse(isolation)
//	  limits: max_tokens clamps; n·pages ≤ kv_pages, prompt+completion ≤ max_context → Refuse(limits)
//	  Limiter.AdmitLease                    → Refuse(quota)
//	  compile the Constraint                only now: schema (grammar cache, tenant's share) or tool calls → Refuse(admission)
//	  seed (drawn unless the client chose), choiceSeed per choice
//	  Engine.Check per choice               → Refuse(admission)
//	  Stage(policy.decision)                durable BEFORE the engine gets the request
//	  runChoices                            Submit choice 0, sink.Started, the others
//	                                        (after choice 0's first token with the prefix cache),
//	                                        every token to sink.Token in order
//	    Submit refused → reject: Stage(admission.rejected), the engine's error
//	  Observer.OnTokens(prompt, completion), engine spans
//	  completedN: Stage(request.completed)  every choice's summary, digests (Config.Served), placement,
//	                                        then its receipt (Recorder.Receipt over the staged record)
//	  nil error only if nothing failed and request.completed is durable
//
// Before Generate, the transport makes its decoded request into a Request
// with Model (model.go, prompt.go): CompletionPrompt tokenizes a
// completion's prompt (fill-in-the-middle with a suffix), PrepareChat
// checks a chat's tools against the template (ToolFormat), picks its one
// constraint (RequestConstraint: response_format or the tool calls', never
// both; compiled by Generate after admission)
// and renders and tokenizes its messages (ChatPrompt, control tokens
// parsed only in the template's own text). Tokenizing comes after a first
// admission: the transport's Model.Admit runs Preadmit on the prompt's
// length (its rendered text, for a chat) — the model check, the policy
// decision, max_context and the Limiter's concurrency and rate checks on a
// lower bound of its tokens (Tokenizer.MinTokens), taking nothing — so a
// request they refuse is refused before its prompt is tokenized; Embed
// does the same for its texts. While tokens arrive, a
// ToolStream per choice (tools.go) reads the tool calls back from the
// text in the template's format (MarkerText restores the markers the
// engine streams as empty control tokens); before it, with a reasoning
// model (<think>…</think> or gpt-oss's harmony channels, chosen from the
// template: reasoning.go, harmony.go), a
// ReasoningStream per choice splits the reasoning from the answer, so
// calls are read in the answer only (where the prompt opens the
// reasoning, a grammar holds after it: Constraint.After; otherwise a
// grammar switches thinking off). A
// Responses API request
// continues the conversation of its previous response (conversation.go:
// History, ConversationMessages) and keeps its own when asked (Keep).
// Tokenize and Detokenize (tokenize.go) serve the tokenizer routes,
// metered against the tenant's quota, behind CheckModel.
//
// Authentication (Authenticate) is a span around tenancy.Verifier; the
// transport requires the route's scopes. The engine's OnIncident hook is
// RecordIncident, the transfer receiver's OnVerificationFailed is
// RecordTransferFailure; Close drains their writes at shutdown.
//
// # The operations
//
// Each is a type built from narrow interfaces of what it uses and called,
// unchanged, by both transports (api's HTTP handlers and gRPC services are
// codecs around them):
//
//	Admin       tenants, API clients, token revocation, signing keys, the
//	            policy bundle, the register's organisation, the pool status
//	Compliance  the incident register (read scoped to the caller's tenant,
//	            written by officers), notice drafts and deadlines, ledger
//	            listings, verification, signed exports, and the signed
//	            checkpoints and proofs of the transparency log (proofs.go);
//	            verification and the register's views hold the register to
//	            the ledger (CheckRegister): a row deleted behind the
//	            triggers is a failure there, never a shorter register
//	Responses   keyed digests of what was served, verify, report, replay,
//	            and the sealed stored responses of the Responses API
//
// Compliance streams (ledger listings, verifications, exports) pass a Gate
// first, so that no tenant can hold every connection of the node; the
// transport supplies it, with its own send timeouts.
//
// # Ordering duties
//
//   - The gate slot is taken BEFORE the policy decision, and held until
//     Generate returns: a node at its caps spends no decision.
//   - sink.Decided gets the decision's id BEFORE anything can refuse the
//     request after the decision, so that a refusal carries it.
//   - Every choice passes Engine.Check, and all n choices' pages are
//     counted, BEFORE the decision is ledgered: a decision row always
//     precedes a request the engine was willing to take.
//   - The allowed decision is durable (Stage returned) BEFORE Engine.Submit.
//   - sink.Started is called only once choice 0 was accepted: before it, an
//     error is an ordinary refusal; after it, the transport has begun its
//     answer and must end it with the error, never a normal finish.
//   - When the client goes away, every started sequence is cancelled and
//     drained BEFORE request.completed is written (its summary counts what
//     was computed).
//   - request.completed — with the failure's code when a sequence failed,
//     an isolation failure included — is durable BEFORE Generate returns:
//     the error (or success) reaches the client only after the ledger holds
//     the request's outcome.
//   - An incident's event (isolation.violation, transfer.verification_failed)
//     is appended BEFORE its register entry is opened, which names the
//     event's seq; a retry does not append the event twice. The hooks never
//     wait on the ledger (they run on the engine loop and on transfer
//     streams): their writes are durable by Close, not by the time the
//     failed request's error reaches its client. Call Close AFTER the
//     engine and the transfer server stopped.
//   - Stop accepting requests BEFORE ending RunRefusals' context, so that
//     no refusal comes after its last flush.
//   - An operation's change is recorded in the ledger BEFORE it takes
//     effect or in the same transaction; a policy bundle is reloaded only
//     after its policy.reloaded event is durable.
//   - A replay takes the replay slot BEFORE it allocates anything, and its
//     cancelled stream is drained BEFORE the slot is released, so that the
//     replay engine holds one request at a time.
//
// # Choices and the prefix cache: here, not in the engine
//
// A request with n > 1 runs n sequences of the engine. With the prefix
// cache on, runChoices submits choice 0 alone and the others once it has
// produced its first token — its prompt computed and its full pages
// published in the tenant's namespace — so that they share the prompt's
// pages instead of computing them n times. vLLM puts this in the engine as
// a sequence group, because its scheduler forks a running sequence's
// blocks copy-on-write and must schedule the group's sequences together.
// Cloison's engine shares pages only by lookup in the tenant-salted prefix
// cache, so the coordination is nothing but submission order, and it needs
// only what the engine already exports (Submit, Stream.Next, PrefixCache).
// What makes the n sequences one request lives here already: the policy
// and the quota count all n together before any starts, one ledger row
// records them all (every choice's seed and digests), and a failure of one
// ends them all. An engine request group would have to carry those too, or
// split them across two packages. It belongs in the engine once the engine
// can fork a running sequence's pages (copy-on-write within a tenant's
// lease), which would let choice 1..n-1 start without waiting.
//
// Embed is the embeddings path: Generate's order (gate, policy,
// isolation, limits per input, the Limiter charged the prompt tokens,
// the engine's checks, the decision ledgered first), each input its own
// engine request (engine.GenerateRequest.Embed), and request.completed
// with an audit.Embedded of keyed input and vector digests (Config.Embedded,
// Responses.Embedded) and no Served, so that it is never replayed as a
// generation. The policy sees the longest input as prompt_tokens (a
// sequence's context), the Limiter the sum.
//
// Rank (rerank.go) scores query/document pairs with a cross-encoder or a
// decoder reranker on Embed's path: each pair one engine request with Rank
// set — [CLS] a [SEP] b [SEP] for a WordPiece vocabulary, the model's
// rerank template filled with the pair for a decoder (RankPrompt, as
// llama.cpp's server forms it, the pair's texts never parsed for control
// tokens) — its score the relevance probability
// (engine.Engine.RankProbability: a cross-encoder's sigmoid, a decoder
// reranker's softmax "yes"), the request.completed's audit.Embedded the
// digests of the pairs' ids and of the head's outputs.
package service
