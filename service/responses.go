package service

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// Responses a tenant can verify, report and replay. A request id of
// another tenant is answered as an unknown one (ErrNoRequest): the
// operations are no oracle of other tenants' ids. Nothing here writes text
// to the ledger: digests, identifiers and counts; the text a report
// carries is sealed (AES-256-GCM, key audit.ReportKey of the tenant) in
// the report row.

// Errors of the response operations.
var (
	// ErrNoRequest: no served request of the caller's tenant has this id.
	ErrNoRequest = cloison.NewError(cloison.CodeNotFound, "no request of this tenant has this id")
	// ErrResponsesOff: the node holds no key-encryption key for digests.
	ErrResponsesOff = cloison.NewError(cloison.CodeUnavailable, "response verification is not configured on this server")
	// ErrReplayOff: the node has no replay engine.
	ErrReplayOff = cloison.NewError(cloison.CodeUnavailable, "replay is not configured on this server")
	// ErrPromptMismatch: the prompt supplied for a replay is not the one
	// whose digest the request's entry holds (or the stop strings are not).
	ErrPromptMismatch = cloison.NewError(cloison.CodeInvalid, "the prompt (or stop list) supplied does not match the request's recorded digest")
	// ErrReplayResidency: the tenant's residency does not allow this node:
	// a replay would process the prompt outside it.
	ErrReplayResidency = cloison.NewError(cloison.CodePermissionDenied, "this node is outside the tenant's residency; the prompt is not replayed here")
	// ErrReplayBusy: the replay engine's slots stayed taken by other
	// callers' replays for ResponseConfig.ReplayWait.
	ErrReplayBusy = cloison.NewError(cloison.CodeCapacityExhausted, "the replay engine is busy with other replays; try again")
	// ErrReplayTenantBusy: the caller already has a replay waiting or
	// running on this node (one at a time per tenant).
	ErrReplayTenantBusy = cloison.NewError(cloison.CodeRateLimited, "a replay of this tenant is already waiting or running on this node; one at a time")
	// ErrReplayAdapterGone (ResponseConfig.ReplayAdapter): the tenant
	// holds no adapter of that digest on the replay engine's model now
	// (unregistered, registered again from another file, or never its).
	ErrReplayAdapterGone = errors.New("the tenant holds no adapter of that digest")
	// ErrReplayAdapterChanged (ResponseConfig.ReplayAdapter): the
	// adapter's file no longer has the recorded digest.
	ErrReplayAdapterChanged = errors.New("the adapter's file changed since it served")
	// ErrNoReport: no report of the caller's tenant has this id.
	ErrNoReport = cloison.NewError(cloison.CodeNotFound, "no report of this tenant has this id")
)

// DefaultDigestKey is the digest key id when ResponseConfig.DigestKey is
// empty.
const DefaultDigestKey audit.Name = "sd1"

// ResponseConfig configures keyed digests, reports, replay and stored
// responses. Without KEK the node records no digests, stores no response,
// and the operations answer ErrResponsesOff (ErrStoreOff).
type ResponseConfig struct {
	// KEK is the key-encryption key (tenancy.LoadKEK); digest keys, the
	// report-sealing key and the stored-response key are derived from it
	// per tenant.
	KEK []byte
	// DigestKey is the id of the digest key new entries use (rotate by
	// naming a new one; older entries stay checkable under theirs).
	DigestKey audit.Name
	// ModelDigest is the SHA-256 of the model file served; Backend and
	// KernelPath what computes it (kernels.Backend.Name, cpu Path).
	ModelDigest         audit.Digest
	Backend, KernelPath string
	// Replay (optional) is an engine with its own pool (ReplayPool) and
	// arena, on the same model file, that runs nothing but replays,
	// ReplaySlots at a time (default 1), each in a zeroed partition of its
	// tenant: a replay shares no page with any other request. The slots
	// are shared fairly: each tenant has at most one replay waiting or
	// running, and the waiters take slots in arrival order, for at most
	// ReplayWait (default DefaultReplayWait).
	Replay      *engine.Engine
	ReplayPool  *isolation.Pool
	ReplaySlots int
	ReplayWait  time.Duration
	// ReplayBackend and ReplayKernelPath name what computes on Replay
	// (default Backend and KernelPath).
	ReplayBackend, ReplayKernelPath string
	// ReplayAdapter (optional) loads, for the Replay engine's model,
	// tenant's LoRA adapter whose file's SHA-256 is digest — only one the
	// tenant holds now, from a file that still has that digest — for the
	// replay of a request that ran under it (request.completed's
	// adapter_digest). Errors: ErrReplayAdapterGone,
	// ErrReplayAdapterChanged, any other (replay-failed). Without it an
	// adapter request is not replayed (adapter-not-replayed).
	ReplayAdapter func(ctx context.Context, tenant cloison.TenantID, digest audit.Digest) (*model.Adapter, error)
	// ReportLimit bounds each tenant's reports (default 10 an hour).
	ReportLimit audit.ReportLimit
	// ReportWebhook (optional) receives a JSON notice of every new report
	// (identifiers only), POSTed with a 5 s timeout; failures are counted.
	ReportWebhook string
	// WebhookSecret signs every notice as Standard Webhooks does
	// (webhook-id, webhook-timestamp and webhook-signature "v1,<base64
	// HMAC-SHA256(secret, id.timestamp.body)>"), so the receiver can refuse
	// a forged or replayed notice. Required with ReportWebhook.
	WebhookSecret []byte
	WebhookClient *http.Client // optional: http.DefaultClient
}

// WithDefaults returns c with its defaults filled in.
func (c ResponseConfig) WithDefaults() ResponseConfig {
	if c.DigestKey == "" {
		c.DigestKey = DefaultDigestKey
	}
	if c.ReportLimit.N == 0 {
		c.ReportLimit = audit.ReportLimit{N: 10, Window: time.Hour}
	}
	if c.ReplayBackend == "" {
		c.ReplayBackend = c.Backend
	}
	if c.ReplayKernelPath == "" {
		c.ReplayKernelPath = c.KernelPath
	}
	if c.ReplaySlots <= 0 {
		c.ReplaySlots = 1
	}
	if c.ReplayWait <= 0 {
		c.ReplayWait = DefaultReplayWait
	}
	return c
}

// Served is what the response operations keep in the ledger
// (*postgres.Store): a tenant's own request entry proven in its log,
// reports, replays and stored responses, each written in one transaction
// with its ledger event.
type Served interface {
	RequestEntry(ctx context.Context, t cloison.TenantID, req cloison.RequestID) (audit.TenantEntry, error)
	RecordReport(ctx context.Context, actor audit.Name, r audit.NewReport, lim audit.ReportLimit) (audit.Report, bool, error)
	ReportOf(ctx context.Context, t cloison.TenantID, id audit.Name) (audit.Report, error)
	ReportFor(ctx context.Context, t cloison.TenantID, req cloison.RequestID) (audit.Report, error)
	RecordReplay(ctx context.Context, actor audit.Name, t cloison.TenantID, p audit.RequestReplayed) (audit.Record, error)
	StoreResponse(ctx context.Context, actor audit.Name, r audit.StoredResponse) (audit.StoredResponse, error)
	StoredResponseOf(ctx context.Context, t cloison.TenantID, id audit.Name) (audit.StoredResponse, error)
	DeleteResponse(ctx context.Context, actor audit.Name, t cloison.TenantID, id audit.Name) (audit.Record, error)
}

// Attested is the node's capacity attestation (*engine.Engine): a replay
// runs here only where the tenant's residency allows the node's labels.
type Attested interface {
	Attestation() attest.Attestation
}

// ResponsesObserver hears what the response operations count (the
// transport's metrics). Every method must return at once.
type ResponsesObserver interface {
	// Reported: a new report (not a duplicate) of tenant t.
	Reported(t cloison.TenantID)
	// Replayed: a replay ledgered with verdict.
	Replayed(verdict audit.Name)
	// WebhookFailed: the report webhook did not accept a notice.
	WebhookFailed()
}

// ResponsesDeps is what the response operations are made of. Observer and
// Log are optional.
type ResponsesDeps struct {
	Config  ResponseConfig
	Ledger  Served
	Tenants TenantStore
	Node    Attested
	// Actor is the ledger actor of the replays this node records.
	Actor audit.Name
	// Limiter (optional) is the node's tenancy.Limiter: a tenant's replay
	// counts against its quotas (tokens per minute, concurrent requests)
	// as its requests do; nil: replays are not charged.
	Limiter *tenancy.Limiter
	// LedgerTimeout bounds one ledger write (default 5 s).
	LedgerTimeout time.Duration
	Observer      ResponsesObserver
	Log           *slog.Logger
}

// Responses verifies, reports and replays served responses, and seals and
// stores the responses of the Responses API (respseal.go).
type Responses struct {
	d        ResponsesDeps
	cfg      ResponseConfig
	replays  *replayGate    // the replay engine's slots, shared fairly
	webhooks sync.WaitGroup // report notices in flight
}

type nopObserver struct{}

func (nopObserver) Reported(cloison.TenantID) {}
func (nopObserver) Replayed(audit.Name)       {}
func (nopObserver) WebhookFailed()            {}

// NewResponses returns the response operations over d (its Config with
// its defaults filled in).
func NewResponses(d ResponsesDeps) *Responses {
	d.Config = d.Config.WithDefaults()
	if d.LedgerTimeout <= 0 {
		d.LedgerTimeout = 5 * time.Second
	}
	if d.Observer == nil {
		d.Observer = nopObserver{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Responses{d: d, cfg: d.Config, replays: newReplayGate(d.Config.ReplaySlots, d.Config.ReplayWait)}
}

// Config is the configuration the operations run with (defaults filled
// in).
func (r *Responses) Config() ResponseConfig { return r.cfg }

// Wait returns once every report notice in flight has been sent or has
// failed (each is bounded by its timeout).
func (r *Responses) Wait() { r.webhooks.Wait() }

// batchInvariant are the backends whose output for one request is known
// bit-identical whatever ran beside it (kernels/cpu: fixed reduction order
// per row, checked by its conformance suite). A replay on any other backend
// is inconclusive: equal digests would prove little, different ones
// nothing.
var batchInvariant = map[string]bool{"cpu": true}

// Served is what request.completed records of what was served: the keyed
// digests of the prompt and completion and the exact sampling parameters
// (nil when digests are off, or the tenant's digest key cannot be
// derived).
func (r *Responses) Served(t cloison.TenantID, greq engine.GenerateRequest, completion []int32, text string, clientSeed bool) *audit.Served {
	rc := r.cfg
	if rc.KEK == nil {
		return nil
	}
	key, err := audit.DigestKey(rc.KEK, t, rc.DigestKey)
	if err != nil {
		r.d.Log.Error("served digest key", "err", err)
		return nil
	}
	f := func(x float64) audit.Name { return audit.Name(strconv.FormatFloat(x, 'g', -1, 64)) }
	sp := greq.Sampling
	src := audit.Name("server")
	if clientSeed {
		src = "client"
	}
	var shaped []string
	if len(sp.LogitBias) > 0 {
		shaped = append(shaped, "logit_bias")
	}
	if greq.Grammar != nil {
		shaped = append(shaped, "response_format")
	}
	// Replay runs the recorded stop strings and ignore_eos only.
	if greq.MinTokens > 0 {
		shaped = append(shaped, "min_tokens")
	}
	if len(greq.StopTokens) > 0 {
		shaped = append(shaped, "stop_token_ids")
	}
	if greq.IncludeStop {
		shaped = append(shaped, "include_stop_str_in_output")
	}
	if greq.SpecialText {
		shaped = append(shaped, "skip_special_tokens")
	}
	return &audit.Served{Key: rc.DigestKey, Prompt: audit.PromptDigest(key, greq.Prompt), Completion: audit.CompletionDigest(key, completion),
		CompletionText: audit.CompletionTextDigest(key, text), ModelDigest: rc.ModelDigest,
		Backend: audit.Name(SanitizeName(rc.Backend)), KernelPath: audit.Name(SanitizeName(rc.KernelPath)),
		Sampling: audit.Sampling{Temperature: f(sp.Temperature), TopK: int64(sp.TopK), TopP: f(sp.TopP), MinP: f(sp.MinP),
			RepetitionPenalty: f(sp.RepetitionPenalty), FrequencyPenalty: f(sp.FrequencyPenalty), PresencePenalty: f(sp.PresencePenalty),
			Seed: audit.Name(strconv.FormatUint(sp.Seed, 10)), SeedSource: src, MaxTokens: int64(greq.MaxTokens),
			Stops: int64(len(greq.StopStrings)), Stop: audit.StopDigest(key, greq.StopStrings), IgnoreEOS: greq.IgnoreEOS,
			Constrained: audit.Name(strings.Join(shaped, "+"))}}
}

// RecordedSampling reads back the sampling parameters an entry recorded,
// exactly (the float64 and seed the request ran with).
// Errors: a value that does not parse.
func RecordedSampling(r audit.Sampling) (sample.Params, error) {
	var p sample.Params
	var err error
	f := func(n audit.Name) float64 {
		x, e := strconv.ParseFloat(string(n), 64)
		if e != nil && err == nil {
			err = e
		}
		return x
	}
	p.Temperature, p.TopP, p.MinP = f(r.Temperature), f(r.TopP), f(r.MinP)
	p.RepetitionPenalty, p.FrequencyPenalty, p.PresencePenalty = f(r.RepetitionPenalty), f(r.FrequencyPenalty), f(r.PresencePenalty)
	p.TopK = int(r.TopK)
	seed, e := strconv.ParseUint(string(r.Seed), 10, 64)
	if e != nil && err == nil {
		err = e
	}
	p.Seed = seed
	return p, err
}

// ProvenEntry is a tenant-log entry and its proof (checkable offline with
// audit.VerifyTenantInclusion and the published verifier key).
type ProvenEntry struct {
	Position   uint64          `json:"position"`
	TreeSize   uint64          `json:"tree_size"`
	Payload    json.RawMessage `json:"payload"`
	Proof      []string        `json:"proof"`
	Checkpoint string          `json:"checkpoint"`
}

func entryOf(e audit.TenantEntry) ProvenEntry {
	return ProvenEntry{Position: e.Position, TreeSize: e.Size, Payload: e.Payload, Proof: HashesBase64(e.Proof), Checkpoint: string(e.Checkpoint)}
}

// HashesBase64 is a proof's hashes as the JSON views carry them: standard
// base64, one string a hash, in the proof's order.
func HashesBase64(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

// entry finds tenant t's request id; another tenant's is ErrNoRequest.
func (r *Responses) entry(ctx context.Context, t cloison.TenantID, id cloison.RequestID) (audit.TenantEntry, error) {
	if r.cfg.KEK == nil {
		return audit.TenantEntry{}, ErrResponsesOff
	}
	if audit.CheckName("request", string(id)) != nil || t == "" {
		return audit.TenantEntry{}, ErrNoRequest
	}
	e, err := r.d.Ledger.RequestEntry(ctx, t, id)
	if errors.Is(err, audit.ErrNotFound) {
		return e, ErrNoRequest
	}
	return e, err
}

// choiceDigests returns choice i's recorded digests from sv.
// Errors: ErrInvalidField (no such choice).
func choiceDigests(sv *audit.Served, i int) (completion, text audit.Digest, err error) {
	switch {
	case i == 0 && len(sv.Choices) == 0:
		return sv.Completion, sv.CompletionText, nil
	case i >= 0 && i < len(sv.Choices):
		return sv.Choices[i].Completion, sv.Choices[i].CompletionText, nil
	}
	return audit.Digest{}, audit.Digest{}, ErrInvalidField.Withf("the request has no choice %d", i)
}

// VerifyRequest is a verify request: the prompt as token ids (tokenized as
// the request's route did), and exactly one of the completion's text and
// its token ids.
type VerifyRequest struct {
	Prompt           []int32
	Completion       *string
	CompletionTokens []int32
	// Choice is the index of the choice to compare, for a request of
	// n > 1 choices (nil: 0).
	Choice *int
}

// CheckCompletion checks that exactly one of completion and tokens is
// given (what Verify refuses first).
// Errors: ErrInvalidField.
func CheckCompletion(completion *string, tokens []int32) error {
	if (completion == nil) == (tokens == nil) {
		return ErrInvalidField.Withf("give exactly one of completion and completion_tokens")
	}
	return nil
}

// VerifyResult is the answer to a verify request.
type VerifyResult struct {
	Request         cloison.RequestID `json:"request"`
	Match           bool              `json:"match"`
	PromptMatch     bool              `json:"prompt_match"`
	CompletionMatch bool              `json:"completion_match"`
	Reason          string            `json:"reason,omitempty"`
	Entry           ProvenEntry       `json:"entry"`
}

// Verify compares a prompt and completion with the digests the entry of
// p's request id holds, and returns the entry with its inclusion proof.
// Errors: ErrInvalidField; ErrNoRequest; ErrResponsesOff; the ledger's.
func (r *Responses) Verify(ctx context.Context, p tenancy.Principal, id cloison.RequestID, in VerifyRequest) (VerifyResult, error) {
	if err := CheckCompletion(in.Completion, in.CompletionTokens); err != nil {
		return VerifyResult{}, err
	}
	e, err := r.entry(ctx, p.Tenant, id)
	if err != nil {
		return VerifyResult{}, err
	}
	res := VerifyResult{Request: id, Entry: entryOf(e)}
	sv := e.Completed.Served
	if sv == nil {
		res.Reason = "the entry predates keyed digests: nothing to compare"
		return res, nil
	}
	key, err := audit.DigestKey(r.cfg.KEK, p.Tenant, sv.Key)
	if err != nil {
		return VerifyResult{}, err
	}
	choice := 0
	if in.Choice != nil {
		choice = *in.Choice
	}
	completion, completionText, err := choiceDigests(sv, choice)
	if err != nil {
		return VerifyResult{}, err
	}
	res.PromptMatch = audit.DigestsEqual(audit.PromptDigest(key, in.Prompt), sv.Prompt)
	if in.Completion != nil {
		res.CompletionMatch = audit.DigestsEqual(audit.CompletionTextDigest(key, *in.Completion), completionText)
	} else {
		res.CompletionMatch = audit.DigestsEqual(audit.CompletionDigest(key, in.CompletionTokens), completion)
	}
	res.Match = res.PromptMatch && res.CompletionMatch
	return res, nil
}

// ReplayRequest is a replay request: the prompt again (as token ids,
// tokenized as the request's route did) and the stop strings the request
// named (only their digest was recorded).
type ReplayRequest struct {
	Prompt []int32
	Stop   []string
	// Operator: an operator's replay (the admin API), not the tenant's:
	// it is not charged to the tenant's quota, and takes the replay
	// engine's slots as a caller of its own.
	Operator bool
}

// ReplayResult is a replay's verdict.
type ReplayResult struct {
	Request        cloison.RequestID `json:"request"`
	Verdict        audit.Name        `json:"verdict"`
	Reason         audit.Name        `json:"reason,omitempty"`
	Report         audit.Name        `json:"report,omitempty"`
	Incident       audit.Name        `json:"incident,omitempty"`
	ReplayMicros   int64             `json:"replay_micros"`
	OriginalMicros int64             `json:"original_micros"`
}

// Replay re-runs tenant t's request id alone on the replay engine with the
// recorded parameters and compares the keyed digest of its completion with
// the recorded one. Before running it checks everything that would make
// equality meaningless, and answers inconclusive with the reason instead.
// The verdict is ledgered (request.replayed, actor by) with, for a
// reported request, the register entry's new version, in one transaction.
//
// A tenant's replay that runs is charged to its quotas (the Limiter's
// tokens per minute and concurrent requests: the prompt and the recorded
// max_tokens of every choice replayed, what was not used given back), and
// takes the replay engine's slots fairly with other callers (replayGate).
//
// Errors: ErrNoRequest; ErrPromptMismatch; ErrReplayOff; ErrReplayTenantBusy
// and ErrReplayBusy (retry in 1 s); the Limiter's (tenancy.ErrRateLimited,
// tenancy.ErrQuotaExceeded, with their wait); ErrReplayResidency;
// ErrResponsesOff; ErrLedgerUnavailable; the tenant store's.
func (r *Responses) Replay(ctx context.Context, t cloison.TenantID, by audit.Name, id cloison.RequestID, in ReplayRequest) (ReplayResult, error) {
	prompt := in.Prompt
	e, err := r.entry(ctx, t, id)
	if err != nil {
		return ReplayResult{}, err
	}
	// The replay runs here, on the replay engine: the prompt is processed
	// on this node, which the tenant's residency must allow.
	tn, err := r.d.Tenants.Tenant(ctx, t)
	if err != nil {
		return ReplayResult{}, err
	}
	if !r.d.Node.Attestation().Labels.Serves(tn.Residency.Regions, tn.Residency.Tier) {
		return ReplayResult{}, ErrReplayResidency
	}
	rc := r.cfg
	res := ReplayResult{Request: id, OriginalMicros: e.Completed.DurationMicros}
	sv := e.Completed.Served
	ev := audit.RequestReplayed{Request: id, By: by, OriginalMicros: e.Completed.DurationMicros}
	var sp sample.Params
	switch {
	case sv == nil:
		ev.Reason = "entry-has-no-digests"
	default:
		key, err := audit.DigestKey(rc.KEK, t, sv.Key)
		if err != nil {
			return ReplayResult{}, err
		}
		if !audit.DigestsEqual(audit.PromptDigest(key, prompt), sv.Prompt) || !audit.DigestsEqual(audit.StopDigest(key, in.Stop), sv.Sampling.Stop) {
			return ReplayResult{}, ErrPromptMismatch
		}
		ev.Key = sv.Key
		if rc.Replay == nil {
			return ReplayResult{}, ErrReplayOff
		}
		if sp, err = RecordedSampling(sv.Sampling); err != nil {
			ev.Reason = "sampling-unreadable"
		} else {
			ev.Reason = ReplayObstacle(e.Completed, rc)
		}
	}
	// What to replay: the request, or for n > 1 each choice with its own
	// recorded seed (each ran as a sequence of its own, so each replays
	// alone; the verdict is confirmed when any choice differs).
	type target struct {
		seed uint64
		want audit.Digest
	}
	var targets []target
	var charged *int // the tokens a charged replay used so far
	if ev.Reason == "" {
		targets = []target{{sp.Seed, sv.Completion}}
		if len(sv.Choices) > 0 {
			targets = targets[:0]
			for _, c := range sv.Choices {
				seed, err := strconv.ParseUint(string(c.Seed), 10, 64)
				if err != nil {
					ev.Reason = "sampling-unreadable"
					break
				}
				targets = append(targets, target{seed, c.Completion})
			}
		}
	}
	if ev.Reason == "" && len(targets) > 0 {
		// One replay at a time per caller, then the tenant's quota: a
		// replay refused as busy costs the tenant no tokens.
		caller := "tenant:" + string(t)
		if in.Operator {
			caller = "operator:" + string(by)
		}
		leave, err := r.replays.enter(caller)
		if err != nil {
			return ReplayResult{}, err
		}
		defer leave()
		if r.d.Limiter != nil && !in.Operator {
			permit, err := r.d.Limiter.Admit(t, tn.Quotas, len(targets)*(len(prompt)+int(sv.Sampling.MaxTokens)))
			if err != nil {
				return ReplayResult{}, err
			}
			used := 0
			defer func() { permit.Release(used) }()
			charged = &used
		}
	}
	// An adapter request replays under the very adapter it ran under,
	// identified by the digest its entry records: one the tenant holds
	// now, loaded again from a file that still has that digest (once the
	// caller holds its replay turn: a load reads the file). Any other case
	// is a typed obstacle, never a replay under another adapter or none.
	var adapter *model.Adapter
	if ev.Reason == "" && len(targets) > 0 && e.Completed.AdapterDigest != nil {
		ad, err := rc.ReplayAdapter(ctx, t, *e.Completed.AdapterDigest)
		switch {
		case errors.Is(err, ErrReplayAdapterGone):
			ev.Reason = "adapter-not-registered"
		case errors.Is(err, ErrReplayAdapterChanged):
			ev.Reason = "adapter-file-changed"
		case err != nil:
			r.d.Log.Warn("replay adapter not loaded", "request", id, "err", err)
			ev.Reason = "replay-failed"
		case audit.Digest(ad.Digest) != *e.Completed.AdapterDigest:
			ev.Reason = "adapter-file-changed" // unreachable: ReplayAdapter's duty
		default:
			// Not closed after the replay: only the cpu backend loads
			// adapters, and its tensors are the garbage collector's once
			// the engine drops the request.
			adapter = ad
		}
	}
	for _, tg := range targets {
		if ev.Reason != "" || ev.Verdict == audit.VerdictConfirmed {
			break // a failure, or the evidence found
		}
		csp := sp
		csp.Seed = tg.seed
		greq := engine.GenerateRequest{ID: replayID(), Tenant: t, Prompt: prompt,
			MaxTokens: int(sv.Sampling.MaxTokens), Sampling: csp, StopStrings: in.Stop, IgnoreEOS: sv.Sampling.IgnoreEOS, Adapter: adapter}
		ids, took, err := r.runReplay(ctx, greq)
		if charged != nil && took > 0 {
			*charged += len(prompt) + len(ids)
		}
		res.ReplayMicros += took.Microseconds()
		ev.ReplayMicros = res.ReplayMicros
		switch {
		case errors.Is(err, ErrReplayBusy):
			return ReplayResult{}, err
		case err != nil:
			r.d.Log.Warn("replay failed", "request", id, "err", err)
			ev.Reason = "replay-failed"
		default:
			key, _ := audit.DigestKey(rc.KEK, t, sv.Key)
			d := audit.CompletionDigest(key, ids)
			if !audit.DigestsEqual(d, tg.want) {
				// The first choice that differs is the evidence.
				ev.Completion, ev.Verdict = &d, audit.VerdictConfirmed
			} else if ev.Verdict != audit.VerdictConfirmed {
				ev.Completion, ev.Verdict = &d, audit.VerdictNotIsolationFailure
			}
		}
	}
	if ev.Reason != "" {
		ev.Verdict = audit.VerdictInconclusive
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.d.LedgerTimeout)
	defer cancel()
	if _, err := r.d.Ledger.RecordReplay(lctx, r.d.Actor, t, ev); err != nil {
		r.d.Log.Error("replay record failed", "request", id, "err", err)
		return ReplayResult{}, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	if rep, err := r.d.Ledger.ReportFor(lctx, t, id); err == nil {
		res.Report, res.Incident = rep.ID, rep.Incident
	}
	r.d.Observer.Replayed(ev.Verdict)
	res.Verdict, res.Reason = ev.Verdict, ev.Reason
	return res, nil
}

// replayID names a replay's engine request: "replay-" and 24 random hex
// digits, the form of a request id.
func replayID() cloison.RequestID {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return cloison.RequestID("replay-" + hex.EncodeToString(b[:]))
}

// ReplayObstacle says why a replay of c on rc's replay engine could not be
// exact ("" when it can): equal digests would then prove little and
// different ones nothing. Sampled requests are replayable: every entry
// records its seed (the server draws one when the client names none).
func ReplayObstacle(c audit.RequestCompleted, rc ResponseConfig) audit.Name {
	sv := c.Served
	switch {
	case sv == nil:
		return "entry-has-no-digests"
	case c.Status != "":
		return "request-not-served" // its output was withheld: nothing was served to compare
	case sv.Sampling.Constrained != "":
		return "constrained-output-not-replayed" // logit_bias or response_format shaped it
	case c.AdapterDigest != nil && rc.ReplayAdapter == nil:
		// No way to load the tenant's adapter for the replay engine: an
		// adapter request is refused replay, never replayed without its
		// adapter.
		return "adapter-not-replayed"
	case sv.ModelDigest != rc.ModelDigest:
		return "model-digest-differs"
	case !batchInvariant[string(sv.Backend)] || !batchInvariant[rc.ReplayBackend]:
		return "backend-not-batch-invariant"
	case string(sv.Backend) != SanitizeName(rc.ReplayBackend) || string(sv.KernelPath) != SanitizeName(rc.ReplayKernelPath):
		return "kernel-path-differs"
	}
	return ""
}

// runReplay runs one request on the replay engine, once it holds one of
// the engine's slots (replayGate.acquire), in a partition of the replay
// pool of its tenant (always zeroed), and returns its token ids.
func (r *Responses) runReplay(ctx context.Context, greq engine.GenerateRequest) ([]int32, time.Duration, error) {
	release, err := r.replays.acquire(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer release()
	rc := r.cfg
	if rc.ReplayPool != nil {
		if _, err := rc.ReplayPool.MaxLeaseTokens(greq.Tenant); errors.Is(err, isolation.ErrUnknownTenant) {
			if err := rc.ReplayPool.AddTenant(isolation.TenantConfig{ID: greq.Tenant, Tier: isolation.TierShared, Zeroing: isolation.ZeroAlways}); err != nil {
				return nil, 0, err
			}
		}
	}
	start := time.Now()
	st, err := rc.Replay.Submit(ctx, greq)
	if err != nil {
		return nil, 0, err
	}
	var ids []int32
	for {
		tok, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			return ids, time.Since(start), nil
		}
		if err != nil {
			st.Cancel()
			_ = drainErr(st, nil) // the engine releases the request before the slot is
			return nil, time.Since(start), err
		}
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
	}
}

// ReportInput is a report of a suspicious response.
type ReportInput struct {
	Request     cloison.RequestID `json:"request"`
	Reason      audit.Name        `json:"reason"`
	ForeignText *string           `json:"foreign_text"`
	Details     *string           `json:"details"`
}

// ReportResult answers a report.
type ReportResult struct {
	Report    audit.Name        `json:"report"`
	Incident  audit.Name        `json:"incident"`
	Request   cloison.RequestID `json:"request"`
	Duplicate bool              `json:"duplicate"`
	Status    string            `json:"status"`
}

// sealedText is what a report's sealed blob holds.
type sealedText struct {
	ForeignText *string `json:"foreign_text,omitempty"`
	Details     *string `json:"details,omitempty"`
}

func reportAD(t cloison.TenantID, req cloison.RequestID) []byte {
	return []byte("cloison report v1\x00" + string(t) + "\x00" + string(req))
}

func (r *Responses) reportAEAD(t cloison.TenantID) (cipher.AEAD, error) {
	return tenantGCM(audit.ReportKey, r.cfg.KEK, t)
}

// tenantGCM is AES-256-GCM under the key that derive makes for tenant t
// from kek: each tenant's texts are sealed under keys of its own.
func tenantGCM(derive func(kek []byte, t cloison.TenantID) ([]byte, error), kek []byte, t cloison.TenantID) (cipher.AEAD, error) {
	k, err := derive(kek, t)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Report records a report of tenant p's own request (the text it carries
// sealed) and opens, or adds to, a potential incident; it reports whether
// the request was already reported (a duplicate changes nothing). A new
// report is notified to the webhook, if one is configured, without holding
// the answer.
//
// Errors: ErrInvalidField (reason, text too long); ErrNoRequest;
// audit.ErrReportRate (the tenant's limit; retry within the window); ErrResponsesOff;
// ErrLedgerUnavailable.
func (r *Responses) Report(ctx context.Context, p tenancy.Principal, in ReportInput) (ReportResult, bool, error) {
	if audit.CheckName("reason", string(in.Reason)) != nil || !validReason(in.Reason) {
		return ReportResult{}, false, ErrInvalidField.Withf("reason must be one of %v", audit.ReportReasons)
	}
	for _, t := range []*string{in.ForeignText, in.Details} {
		if t != nil && len(*t) > audit.MaxTextLen {
			return ReportResult{}, false, ErrInvalidField.Withf("foreign_text and details are at most %d bytes each", audit.MaxTextLen)
		}
	}
	e, err := r.entry(ctx, p.Tenant, in.Request)
	if err != nil {
		return ReportResult{}, false, err
	}
	var sealed []byte
	if in.ForeignText != nil || in.Details != nil {
		g, err := r.reportAEAD(p.Tenant)
		if err != nil {
			return ReportResult{}, false, err
		}
		plain, _ := json.Marshal(sealedText{ForeignText: in.ForeignText, Details: in.Details})
		nonce := make([]byte, g.NonceSize())
		_, _ = rand.Read(nonce)
		sealed = g.Seal(nonce, nonce, plain, reportAD(p.Tenant, in.Request))
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.d.LedgerTimeout)
	defer cancel()
	rep, dup, err := r.d.Ledger.RecordReport(lctx, TenantActor(p), audit.NewReport{Tenant: p.Tenant, Request: in.Request, Reason: in.Reason,
		Sealed: sealed, RequestAt: e.OccurredAt, EntrySeq: e.Seq}, r.cfg.ReportLimit)
	if errors.Is(err, audit.ErrReportRate) {
		// The oldest report in the window leaves it within the window:
		// an upper bound on the wait, never too early.
		return ReportResult{}, false, retryIn{err, r.cfg.ReportLimit.Window}
	}
	if err != nil {
		r.d.Log.Error("report record failed", "request", in.Request, "err", err)
		return ReportResult{}, false, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	res := ReportResult{Report: rep.ID, Incident: rep.Incident, Request: rep.Request, Duplicate: dup, Status: string(audit.IncidentUnderAssessment)}
	if rep.Verdict != "" {
		res.Status = string(rep.Verdict)
	}
	if !dup {
		r.d.Observer.Reported(p.Tenant)
		r.notifyReport(rep)
	}
	return res, dup, nil
}

func validReason(r audit.Name) bool {
	for _, x := range audit.ReportReasons {
		if x == r {
			return true
		}
	}
	return false
}

// notifyReport POSTs the report's identifiers to the webhook, if one is
// configured, without holding the tenant's answer.
func (r *Responses) notifyReport(rep audit.Report) {
	url := r.cfg.ReportWebhook
	if url == "" {
		return
	}
	body, _ := json.Marshal(map[string]string{"event": string(audit.KindReportReceived), "report": string(rep.ID), "incident": string(rep.Incident),
		"tenant": string(rep.Tenant), "request": string(rep.Request), "reason": string(rep.Reason), "received_at": rep.ReceivedAt.UTC().Format(time.RFC3339Nano)})
	client := r.cfg.WebhookClient
	if client == nil {
		client = http.DefaultClient
	}
	r.webhooks.Add(1)
	go func() {
		defer r.webhooks.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			SignWebhook(req.Header, r.cfg.WebhookSecret, string(rep.ID), time.Now(), body)
			var resp *http.Response
			if resp, err = client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					err = fmt.Errorf("webhook answered %s", resp.Status)
				}
			}
		}
		if err != nil {
			r.d.Observer.WebhookFailed()
			r.d.Log.Warn("report webhook failed", "report", rep.ID, "err", err)
		}
	}()
}

// SignWebhook sets the Standard Webhooks headers of a notice (the spec at
// standardwebhooks.com): webhook-id (the report id, stable across retries),
// webhook-timestamp (Unix seconds) and webhook-signature, "v1," and the
// base64 HMAC-SHA256 under secret of "id.timestamp.body".
func SignWebhook(h http.Header, secret []byte, id string, at time.Time, body []byte) {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

// ReportView is a report as the tenant's compliance officer reads it.
type ReportView struct {
	Report      audit.Name        `json:"report"`
	Request     cloison.RequestID `json:"request"`
	Reason      audit.Name        `json:"reason"`
	Incident    audit.Name        `json:"incident"`
	ReceivedAt  time.Time         `json:"received_at"`
	Verdict     audit.Name        `json:"verdict,omitempty"`
	ForeignText *string           `json:"foreign_text,omitempty"`
	Details     *string           `json:"details,omitempty"`
}

// ReadReport opens tenant t's report id for its compliance officer.
// Errors: ErrResponsesOff; ErrNoReport for another tenant's or an unknown
// report; the ledger's; a sealed text that does not open.
func (r *Responses) ReadReport(ctx context.Context, t cloison.TenantID, id audit.Name) (ReportView, error) {
	if r.cfg.KEK == nil {
		return ReportView{}, ErrResponsesOff
	}
	if audit.CheckName("report", string(id)) != nil || t == "" {
		return ReportView{}, ErrNoReport
	}
	rep, err := r.d.Ledger.ReportOf(ctx, t, id)
	if errors.Is(err, audit.ErrNotFound) {
		return ReportView{}, ErrNoReport
	}
	if err != nil {
		return ReportView{}, err
	}
	v := ReportView{Report: rep.ID, Request: rep.Request, Reason: rep.Reason, Incident: rep.Incident, ReceivedAt: rep.ReceivedAt, Verdict: rep.Verdict}
	if rep.Sealed != nil {
		g, err := r.reportAEAD(t)
		if err != nil {
			return ReportView{}, err
		}
		n := g.NonceSize()
		if len(rep.Sealed) < n {
			return ReportView{}, fmt.Errorf("report %s: sealed text too short", id)
		}
		plain, err := g.Open(nil, rep.Sealed[:n], rep.Sealed[n:], reportAD(t, rep.Request))
		if err != nil {
			return ReportView{}, fmt.Errorf("report %s: sealed text does not open: %w", id, err)
		}
		var st sealedText
		if err := json.Unmarshal(plain, &st); err != nil {
			return ReportView{}, err
		}
		v.ForeignText, v.Details = st.ForeignText, st.Details
	}
	return v, nil
}

// replayBusyRetry is the wait a client is told when the replay engine's
// slots, or its own one replay, are taken: a replay of a short answer
// takes about that long.
const replayBusyRetry = time.Second

// retryIn is an error that tells the client when to retry (Retry-After on
// HTTP, RetryInfo on gRPC); its code and message are the wrapped error's.
type retryIn struct {
	error
	wait time.Duration
}

func (e retryIn) Unwrap() error             { return e.error }
func (e retryIn) RetryDelay() time.Duration { return e.wait }
