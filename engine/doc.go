// Package engine admits, schedules and runs inference requests on a
// kernels.Backend over an isolation.Pool: reject before allocate, continuous
// batching, and a driver that fails closed on any isolation failure. With
// Config.Remote set it is a decode node of a disaggregated deployment.
//
// # Capacity attestation
//
// Package attest (attest.Capacity) compares the model's advertised context,
// the served context and the pool. It fails (attest.ErrFailed) when
// pool_tokens < k × served_context (k defaults to 1; the 2026 remediation
// used 2). The served context defaults to the model's; an operator who runs a
// smaller pool must lower it explicitly, and the API then advertises the
// lowered value — never more than the pool holds. The Attestation value
// (model context, served context, pool tokens and pages, page size, k,
// zeroing, reservations) is what the API, metrics and ledger publish. New
// refuses an attestation that did not pass.
//
// # Reject before allocate
//
// Admission.Admit checks prompt + max_tokens against the served context and
// the tenant's pool capacity (Pool.MaxLeaseTokens), token ids against the
// vocabulary, sampling and stop parameters — all before anything is
// allocated. A rejection is returned to the client as its original typed
// error (context_length_exceeded, …) and counted per tenant and code. Only
// Admit makes a valid Ticket and the scheduler only enqueues tickets: a
// rejected request has no path to the queue, a page, a transfer or a token
// (Rejected is a terminal state with no edge at all).
//
// # Scheduler
//
// Scheduler is a core without I/O in raft's style: Enqueue, Ready (scrub
// work, leases, decode tokens then chunked prefill, each recorded with
// Pool.Write and approved with Pool.BlockTable), Advance (sampled tokens,
// finishes), FailStep, Cancel. States Queued → Admitted → Prefilling →
// Decoding → Finished, or Aborted (cancel, deadline) / Failed (violation).
// Continuous batching mixes decode and prefill chunks under a token budget;
// when the pool runs out, a sequence of the tenant running the most is
// preempted (pages released and scrubbed per mode) and recomputes later;
// per-tenant concurrency caps hold; cancellation at any point frees the
// lease. Optional prefix cache through the tenant-salted isolation
// namespaces.
//
// # Fair share between tenants
//
// The scheduler keeps a Virtual Token Counter per tenant (Sheng et al.,
// "Fairness in Serving Large Language Models", OSDI 2024): every token put
// in a batch adds its cost (SchedulerConfig.PrefillCost, 1, per prompt
// token computed, recomputation included; DecodeCost, 2, per decode token)
// divided by the tenant's weight to the tenant's counter. The weight is
// its tier's: 1 for the shared tier, SchedulerConfig.DedicatedWeight (2)
// for the dedicated one (the partition's tier, which is the tenant
// record's and which the policy decision may require), unless
// TenantWeight gives another (TestFairShareTierWeight: a tenant of weight 2
// gets twice the tokens of one of weight 1 while both are backlogged).
// Four decisions follow the counters, smallest first:
//
//   - admission: the next lease goes to the head of the queue of the tenant
//     whose counter, plus the prompt tokens it already has admitted and
//     not yet computed, is smallest (ties round-robin);
//   - each step's tokens: tenant by tenant, the one with the smallest
//     counter first (ties: the tenant that started waiting last), each
//     token charged as it is planned; a tenant's decode tokens (least
//     recently served first), then one prompt chunk per sequence. A long
//     prompt of one tenant takes the rest of a step only after every
//     tenant behind it has had its share, and a tenant served more than
//     the others may see one of its streams wait a step for another
//     tenant's prompt;
//   - each step's length: while more than one tenant is active (a live
//     request now or within SchedulerConfig.ContendedSteps steps, 16) and
//     one of them is not waiting (its next request would make it start) a
//     step stops at ContendedBatchTokens (32) — except for the first
//     chunk of a request of a tenant that had none live, when that tenant
//     is owed the most, which starts in full. The bound is counted in
//     cost, not tokens: a token at context position p counts
//     1+p/SchedulerConfig.ContextSpan, the span being the positions whose
//     attention costs what the token's matrix products cost (from the
//     model's shape: about 360 for a 4-layer d_model 256 llama), so a
//     chunk deep in a long prompt gets fewer tokens of a contended step
//     (an empty step still takes one). A step cannot be interrupted, so its length is what a request
//     arriving meanwhile waits: another tenant's first token waits for a
//     short step in flight and its own, not for a long step of the
//     over-served tenant;
//   - the lift: a tenant whose new request finds it not waiting (no queued
//     request, no prompt left to compute) is raised to the smallest counter
//     of the tenants waiting (or, when none is, to the smallest at the last
//     step). Idle time is not banked: a tenant back from idle competes as
//     an equal and does not take the engine until it has caught up.
//
// Two tenants that stay backlogged therefore receive weighted service that
// differs by at most a constant (twice the cost of the largest request
// times the running cap plus one), whatever the length of the run, and a
// newly active tenant gets one of the next free slots and its chunk first
// (TestFairShareProperties, TestFairShareNewTenant,
// TestFairShareEngine). When the shared pages are short for the tenant
// owed the most (ErrPoolExhausted on the shared pool, ErrScrubPending), the
// tenants behind it are not admitted in that step either, or they would
// take every page freed before it could; a tenant held by its own
// partition or page cap does not hold the others. The fairness never
// reaches inside a step's arithmetic: each row is computed alone (batch
// invariance), so a sequence's output does not depend on its neighbours
// nor on the step it lands in. With a single active tenant a step is
// MaxBatchTokens long; under contention ContendedBatchTokens trades the
// over-served tenant's step size (throughput on an accelerator, where a
// step's time hardly grows with its tokens; little on a compute-bound
// CPU) for the others' time to first token (BenchmarkFairShare,
// BenchmarkFairShareSteps, make bench-fair; docs/benchmarks.md).
//
// # Driver
//
// Engine runs the loop on a kernels.Backend, streams tokens through Stream
// (never blocks on a slow reader), applies stop tokens, end-of-generation
// tokens and stop strings (held-back text is never streamed past a stop),
// deadlines and client cancellation, and reports through function-field
// hooks: OnFinish(Summary) (counts only) and OnIncident(Incident). An
// isolation failure — a pool ViolationError or a kernel TagMismatchError —
// fails every request whose reads it touched, discards their pages (zeroed
// before any reuse), withholds their output (ErrWithheld, never a normal
// finish) and fires OnIncident; the other requests of the batch recompute
// from scratch.
//
// # Disaggregated prefill
//
// With Config.Remote set (Remote, PrefillRunner), the engine is a decode
// node. For each admitted request it reserves pages in its own pool, expects
// a verified transfer of all but the last prompt token
// (transfer.Receiver.Expect holds and stages the pages: nothing readable or
// recorded until every page is verified), asks a prefill node to compute and
// send that KV, and decodes only after the commit; the last prompt token is
// computed locally, so sampling stays on the decode node. A refused or failed
// transfer fails the request closed; a cancel stops the transfer and the
// pages drain when it is acknowledged. PrefillRunner is the prefill node's
// half (its own pool and arena, reject before allocate, scrubbing,
// transfer.Sender).
//
// # LoRA adapters
//
// GenerateRequest.Adapter runs a request under a LoRA adapter loaded for
// the engine's model (model.LoadAdapter; another model's is refused,
// ErrAdapterModel). Requests of different adapters, and of none, share
// every batch: the model adds each adapter's low-rank products to its own
// sequences' rows only, so a request's tokens do not depend on its
// neighbours' adapters (TestAdapterMixedBatch). Its prompt is looked up in
// and published to the prefix cache under the adapter's digest
// (Request.CacheSalt, isolation.Pool.AllocatePrefixSalted): KV computed
// under one adapter is never served under another or under none
// (TestAdapterPrefixCache). Summary.Adapter names the digest. A decode node
// refuses adapters (ErrAdapterRemote): its prefill nodes run the base.
// Adapters is a node's set, each adapter registered for one tenant under a
// name and reached by (tenant, name) only: another tenant's adapter is
// ErrAdapterNotFound, exactly as one that does not exist (code
// model_not_found), and List shows a tenant its own
// (TestAdaptersTenantScoped). Registration as an admin action (ledger,
// policy) and the API's model "<base>:<adapter>" are the service's.
//
// Sampling (engine/sample): greedy, temperature, top-k, top-p, min-p,
// repetition / frequency / presence penalties, per-request seed
// (reproducible), logprobs with alternatives.
//
// Prompt scoring (GenerateRequest.ScorePrompt, for echo with logprobs):
// the prompt's chunks ask the model for every row's logits (model.Seq.All,
// that sequence only; Item.All), and the driver keeps, per position, the
// raw log-softmax of the next prompt token and the TopLogprobs best
// (sample.Score) — never a prompt×vocabulary matrix, at most one chunk's
// (SchedulerConfig.ScoreChunkTokens, default 64, bounds such a request's
// prefill chunks; the model's logits scratch keeps the largest size it
// served).
// Such a request never takes its prompt from the prefix cache (every
// position must be computed; it still publishes its pages), and a position
// recomputed after a preemption keeps its first score (rows are batch
// invariant, so both are equal). The scores reach the stream as one Token
// of ID PromptScores before any generated token; a first token sampled
// with the prompt not scored in full fails the request closed. MaxTokens 0
// is admitted only with ScorePrompt: the prompt is computed and scored and
// the request finishes (length) with no token. A decode node refuses it
// (ErrScoreRemote): prefill nodes return KV, not logits.
//
// # Tests that prove isolation
//
// Embeddings: a GenerateRequest with Embed (MaxTokens 0) is admitted and
// scheduled as a scored prompt (computed in full, in the tenant's pages,
// never from the prefix cache); each step keeps its tokens' hidden rows
// (model.Seq.Hidden), and once the prompt is computed the stream carries
// one PromptHidden token with the pooled vector (model.Pool). A model
// without pooling refuses it (ErrNoPooling).
//
// Encoders (model.Config.Encoder: bert, nomic-bert, t5encoder, t5) serve only Embed
// requests (ErrEncoderOnly otherwise); a rank model (model.PoolRank) only
// Embed with Rank, whose PromptHidden token carries the classification
// head's outputs (ErrRankModel otherwise; Rank elsewhere: ErrNoRankHead).
// New turns on SchedulerConfig.WholePrompt for them — every prompt in one
// step, since each token attends to those after it — and off the prefix
// cache, whose pages would hold K/V computed with another input's tail.
//
// In isolation_test.go:
//
//   - Co-tenant independence: 16 concurrent requests of 8 tenants (mixed
//     zeroing modes), under forced preemption and cancellations, produce
//     bit-identical greedy tokens to each request run alone.
//   - Leak oracle: 1,000 randomized multi-tenant runs of the context-bag
//     model (over-long prompts, exact-capacity prompts, cancellations,
//     preemptions, prefix-cache hits, greedy and sampled decoding, random
//     page sizes and zeroing modes) never emit a token absent from the
//     request's own prompt. Under -race it runs 40 runs; make test also runs
//     it in full without -race.
//   - Scheduler transcripts in testdata/scheduler/*.txt (admission,
//     preemption, cancellation, fairness, weighted counters),
//     raft-datadriven style;
//     go test ./engine -run Transcripts -rewrite regenerates them.
package engine
