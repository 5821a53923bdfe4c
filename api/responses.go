package api

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// Responses a tenant can verify, report and replay (issue 17 §1–§3).
//
//	POST /v1/requests/{id}/verify   scope infer — do this prompt and completion match the request's entry? + its inclusion proof
//	POST /v1/requests/{id}/replay   scope infer — re-run the request alone (prompt supplied again) and give the verdict
//	POST /v1/reports                scope infer — report a suspicious response (opens a potential incident)
//	GET  /compliance/v1/reports/{id}               compliance:read — the report, its sealed text opened (own tenant only)
//	POST /admin/v1/tenants/{tenant}/requests/{id}/replay  admin — the operator's replay, with the prompt supplied
//
// A request id of another tenant is 404 on every route, the answer an
// unknown id gets: the routes are no oracle of other tenants' ids. Nothing
// here writes text to the ledger: digests, identifiers and counts; the text
// a report carries is sealed (AES-256-GCM, key audit.ReportKey of the
// tenant) in the report row.

// Errors of the response routes.
var (
	// ErrNoRequest: no served request of the caller's tenant has this id.
	ErrNoRequest = cloison.NewError(cloison.CodeNotFound, "no request of this tenant has this id")
	// ErrResponsesOff: the server holds no key-encryption key for digests.
	ErrResponsesOff = cloison.NewError(cloison.CodeUnavailable, "response verification is not configured on this server")
	// ErrReplayOff: the server has no replay engine.
	ErrReplayOff = cloison.NewError(cloison.CodeUnavailable, "replay is not configured on this server")
	// ErrPromptMismatch: the prompt supplied for a replay is not the one
	// whose digest the request's entry holds (or the stop strings are not).
	ErrPromptMismatch = cloison.NewError(cloison.CodeInvalid, "the prompt (or stop list) supplied does not match the request's recorded digest")
	// ErrReplayResidency: the tenant's residency does not allow this node
	// (issue 17 §5): a replay would process the prompt outside it.
	ErrReplayResidency = cloison.NewError(cloison.CodePermissionDenied, "this node is outside the tenant's residency; the prompt is not replayed here")
	// ErrReplayBusy: another replay is running on this node.
	ErrReplayBusy = cloison.NewError(cloison.CodeCapacityExhausted, "a replay is already running on this node; try again")
)

// DefaultDigestKey is the digest key id when Responses.DigestKey is empty.
const DefaultDigestKey audit.Name = "sd1"

// Responses configures keyed digests, reports and replay. Without KEK the
// server records no digests and the routes answer ErrResponsesOff.
type Responses struct {
	// KEK is the key-encryption key (tenancy.LoadKEK); digest keys and the
	// report-sealing key are derived from it per tenant.
	KEK []byte
	// DigestKey is the id of the digest key new entries use (rotate by
	// naming a new one; older entries stay checkable under theirs).
	DigestKey audit.Name
	// ModelDigest is the SHA-256 of the model file served; Backend and
	// KernelPath what computes it (kernels.Backend.Name, cpu Path).
	ModelDigest         audit.Digest
	Backend, KernelPath string
	// Replay (optional) is an engine with its own pool (ReplayPool) and
	// arena, on the same model file, that runs nothing but replays, one at
	// a time: a replay shares no page with any other request.
	Replay     *engine.Engine
	ReplayPool *isolation.Pool
	// ReplayBackend and ReplayKernelPath name what computes on Replay
	// (default Backend and KernelPath).
	ReplayBackend, ReplayKernelPath string
	// ReportLimit bounds each tenant's reports (default 10 an hour).
	ReportLimit auditpg.ReportLimit
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

// batchInvariant are the backends whose output for one request is known
// bit-identical whatever ran beside it (kernels/cpu: fixed reduction order
// per row, checked by its conformance suite). A replay on any other backend
// is inconclusive: equal digests would prove little, different ones
// nothing.
var batchInvariant = map[string]bool{"cpu": true}

// responseState is the server's part of this file: metrics and the replay
// slot.
type responseState struct {
	reports     *prometheus.CounterVec
	webhookFail prometheus.Counter
	replays     *prometheus.CounterVec
	replaySlot  chan struct{} // one replay at a time
	webhooks    sync.WaitGroup
}

func newResponseState(s *Server) *responseState {
	r := &responseState{
		reports:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison_reports_received_total", Help: "Reports of suspicious responses received (new, not duplicates), by tenant (bounded label)."}, []string{"tenant"}),
		webhookFail: prometheus.NewCounter(prometheus.CounterOpts{Name: "cloison_report_webhook_failures_total", Help: "Report notices the webhook did not accept."}),
		replays:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison_replays_total", Help: "Replays of requests, by verdict."}, []string{"verdict"}),
		replaySlot:  make(chan struct{}, 1),
	}
	// As every cloison_ series: with model_name, in the server's registry.
	prometheus.WrapRegistererWith(prometheus.Labels{"model_name": s.cfg.ModelName}, s.metrics.reg).MustRegister(r.reports, r.webhookFail, r.replays)
	s.metrics.own = append(s.metrics.own, r.reports, r.webhookFail, r.replays)
	rc := &s.cfg.Responses
	if rc.DigestKey == "" {
		rc.DigestKey = DefaultDigestKey
	}
	if rc.ReportLimit.N == 0 {
		rc.ReportLimit = auditpg.ReportLimit{N: 10, Window: time.Hour}
	}
	if rc.ReplayBackend == "" {
		rc.ReplayBackend = rc.Backend
	}
	if rc.ReplayKernelPath == "" {
		rc.ReplayKernelPath = rc.KernelPath
	}
	return r
}

func (s *Server) responseRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/requests/{id}/verify", s.auth(s.httpVerify, tenancy.ScopeInfer))
	mux.Handle("POST /v1/requests/{id}/replay", s.auth(s.httpReplay, tenancy.ScopeInfer))
	mux.Handle("POST /v1/reports", s.auth(s.httpReport, tenancy.ScopeInfer))
	mux.Handle("GET /compliance/v1/reports/{id}", s.auth(s.httpReadReport, tenancy.ScopeComplianceRead))
	mux.Handle("POST /admin/v1/tenants/{tenant}/requests/{id}/replay", s.auth(s.httpAdminReplay, tenancy.ScopeAdmin))
}

// served is what request.completed records of what was served (nil when
// digests are off).
func (s *Server) served(t cloison.TenantID, greq engine.GenerateRequest, completion []int32, text string, clientSeed bool) *audit.Served {
	rc := s.cfg.Responses
	if rc.KEK == nil {
		return nil
	}
	key, err := audit.DigestKey(rc.KEK, t, rc.DigestKey)
	if err != nil {
		s.log.Error("served digest key", "err", err)
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
	return &audit.Served{Key: rc.DigestKey, Prompt: audit.PromptDigest(key, greq.Prompt), Completion: audit.CompletionDigest(key, completion),
		CompletionText: audit.CompletionTextDigest(key, text), ModelDigest: rc.ModelDigest,
		Backend: audit.Name(sanitizeName(rc.Backend)), KernelPath: audit.Name(sanitizeName(rc.KernelPath)),
		Sampling: audit.Sampling{Temperature: f(sp.Temperature), TopK: int64(sp.TopK), TopP: f(sp.TopP), MinP: f(sp.MinP),
			RepetitionPenalty: f(sp.RepetitionPenalty), FrequencyPenalty: f(sp.FrequencyPenalty), PresencePenalty: f(sp.PresencePenalty),
			Seed: audit.Name(strconv.FormatUint(sp.Seed, 10)), SeedSource: src, MaxTokens: int64(greq.MaxTokens),
			Stops: int64(len(greq.StopStrings)), Stop: audit.StopDigest(key, greq.StopStrings), IgnoreEOS: greq.IgnoreEOS,
			Constrained: audit.Name(strings.Join(shaped, "+"))}}
}

// samplingOf reads back the recorded sampling parameters exactly.
func samplingOf(r audit.Sampling) (sample.Params, error) {
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

// promptInput is a prompt as a tenant supplies it again: exactly one of a
// completion prompt (text or ids) and chat messages.
type promptInput struct {
	Prompt   *Prompt        `json:"prompt"`
	Messages []chat.Message `json:"messages"`
}

// ids tokenizes the prompt exactly as the completion routes did.
func (s *Server) promptIDs(in promptInput) ([]int32, error) {
	switch {
	case in.Prompt != nil && in.Messages != nil, in.Prompt == nil && in.Messages == nil:
		return nil, ErrBadField.Withf("give exactly one of prompt and messages")
	case in.Prompt != nil && in.Prompt.IsIDs:
		return in.Prompt.Tokens, nil
	case in.Prompt != nil:
		return s.cfg.Tokenizer.Encode(in.Prompt.Text, true, false), nil
	}
	return s.chatPrompt(in.Messages, nil)
}

// decodeStrict reads a JSON body whose unknown fields are refused as
// unsupported (the API implements every field it accepts).
func decodeStrict(r io.Reader, limit int64, v any) error {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return ErrBadJSON.Withf("%v", err)
	}
	if int64(len(body)) > limit {
		return ErrBodyTooLarge.Withf("more than %d bytes", limit)
	}
	if !utf8.Valid(body) {
		return ErrBadUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return ErrUnsupported.Withf("%s", f)
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return ErrBadField.Withf("%s: want %s", ute.Field, ute.Type)
		}
		return ErrBadJSON.Withf("%v", err)
	}
	if dec.More() {
		return ErrBadJSON.Withf("trailing data after the JSON object")
	}
	return nil
}

// entryJSON is a tenant-log entry and its proof (checkable offline with
// audit.VerifyTenantInclusion and the published verifier key).
type entryJSON struct {
	Position   uint64          `json:"position"`
	TreeSize   uint64          `json:"tree_size"`
	Payload    json.RawMessage `json:"payload"`
	Proof      []string        `json:"proof"`
	Checkpoint string          `json:"checkpoint"`
}

func entryOf(e auditpg.TenantEntry) entryJSON {
	return entryJSON{Position: e.Position, TreeSize: e.Size, Payload: e.Payload, Proof: hashesB64(e.Proof), Checkpoint: string(e.Checkpoint)}
}

// entry finds tenant t's request id; another tenant's is ErrNoRequest.
func (s *Server) entry(ctx context.Context, t cloison.TenantID, id cloison.RequestID) (auditpg.TenantEntry, error) {
	if s.cfg.Responses.KEK == nil {
		return auditpg.TenantEntry{}, ErrResponsesOff
	}
	if audit.CheckName("request", string(id)) != nil || t == "" {
		return auditpg.TenantEntry{}, ErrNoRequest
	}
	e, err := s.cfg.Ledger.RequestEntry(ctx, t, id)
	if errors.Is(err, auditpg.ErrNotFound) {
		return e, ErrNoRequest
	}
	return e, err
}

// VerifyInput is a verify request.
type VerifyInput struct {
	promptInput
	Completion       *string `json:"completion"`
	CompletionTokens []int32 `json:"completion_tokens"`
}

// VerifyResult is the answer to a verify request.
type VerifyResult struct {
	Request         cloison.RequestID `json:"request"`
	Match           bool              `json:"match"`
	PromptMatch     bool              `json:"prompt_match"`
	CompletionMatch bool              `json:"completion_match"`
	Reason          string            `json:"reason,omitempty"`
	Entry           entryJSON         `json:"entry"`
}

// verify compares a prompt and completion with request id's digests.
// Errors: ErrNoRequest, ErrResponsesOff, ErrBadField, the ledger's.
func (s *Server) verify(ctx context.Context, p tenancy.Principal, id cloison.RequestID, in VerifyInput) (VerifyResult, error) {
	if (in.Completion == nil) == (in.CompletionTokens == nil) {
		return VerifyResult{}, ErrBadField.Withf("give exactly one of completion and completion_tokens")
	}
	prompt, err := s.promptIDs(in.promptInput)
	if err != nil {
		return VerifyResult{}, err
	}
	e, err := s.entry(ctx, p.Tenant, id)
	if err != nil {
		return VerifyResult{}, err
	}
	res := VerifyResult{Request: id, Entry: entryOf(e)}
	sv := e.Completed.Served
	if sv == nil {
		res.Reason = "the entry predates keyed digests: nothing to compare"
		return res, nil
	}
	key, err := audit.DigestKey(s.cfg.Responses.KEK, p.Tenant, sv.Key)
	if err != nil {
		return VerifyResult{}, err
	}
	res.PromptMatch = audit.DigestsEqual(audit.PromptDigest(key, prompt), sv.Prompt)
	if in.Completion != nil {
		res.CompletionMatch = audit.DigestsEqual(audit.CompletionTextDigest(key, *in.Completion), sv.CompletionText)
	} else {
		res.CompletionMatch = audit.DigestsEqual(audit.CompletionDigest(key, in.CompletionTokens), sv.Completion)
	}
	res.Match = res.PromptMatch && res.CompletionMatch
	return res, nil
}

func (s *Server) httpVerify(w http.ResponseWriter, r *http.Request) {
	var in VerifyInput
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &in); err != nil {
		WriteHTTPError(w, err)
		return
	}
	res, err := s.verify(r.Context(), principal(r), cloison.RequestID(r.PathValue("id")), in)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, res)
}

// ReplayInput is a replay request: the prompt again and the stop strings
// the request named (only their digest was recorded).
type ReplayInput struct {
	promptInput
	Stop StringOrList `json:"stop"`
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

// replay re-runs tenant t's request id alone on the replay engine with the
// recorded parameters and compares the keyed digest of its completion with
// the recorded one. Before running it checks everything that would make
// equality meaningless, and answers inconclusive with the reason instead.
// The verdict is ledgered (request.replayed) with, for a reported request,
// the register entry's new version, in one transaction.
//
// Errors: ErrNoRequest; ErrPromptMismatch; ErrReplayOff; ErrReplayBusy;
// ErrReplayResidency; ErrResponsesOff; ErrLedgerUnavailable.
func (s *Server) replay(ctx context.Context, t cloison.TenantID, by audit.Name, id cloison.RequestID, in ReplayInput) (ReplayResult, error) {
	prompt, err := s.promptIDs(in.promptInput)
	if err != nil {
		return ReplayResult{}, err
	}
	e, err := s.entry(ctx, t, id)
	if err != nil {
		return ReplayResult{}, err
	}
	// The replay runs here, on the replay engine: the prompt is processed
	// on this node, which the tenant's residency must allow.
	if tn, err := s.cfg.Tenants.Tenant(ctx, t); err != nil {
		return ReplayResult{}, err
	} else if !s.cfg.Engine.Attestation().Labels.Serves(tn.Residency.Regions, tn.Residency.Tier) {
		return ReplayResult{}, ErrReplayResidency
	}
	rc := s.cfg.Responses
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
		if sp, err = samplingOf(sv.Sampling); err != nil {
			ev.Reason = "sampling-unreadable"
		} else {
			ev.Reason = replayObstacle(e.Completed, rc)
		}
	}
	if ev.Reason == "" {
		greq := engine.GenerateRequest{ID: cloison.RequestID("replay-" + strings.TrimPrefix(string(NewRequestID()), "req-")), Tenant: t, Prompt: prompt,
			MaxTokens: int(sv.Sampling.MaxTokens), Sampling: sp, StopStrings: in.Stop, IgnoreEOS: sv.Sampling.IgnoreEOS}
		ids, took, err := s.runReplay(ctx, greq)
		res.ReplayMicros = took.Microseconds()
		ev.ReplayMicros = res.ReplayMicros
		switch {
		case errors.Is(err, ErrReplayBusy):
			return ReplayResult{}, err
		case err != nil:
			s.log.Warn("replay failed", "request", id, "err", err)
			ev.Reason = "replay-failed"
		default:
			key, _ := audit.DigestKey(rc.KEK, t, sv.Key)
			d := audit.CompletionDigest(key, ids)
			ev.Completion = &d
			ev.Verdict = audit.VerdictConfirmed
			if audit.DigestsEqual(d, sv.Completion) {
				ev.Verdict = audit.VerdictNotIsolationFailure
			}
		}
	}
	if ev.Reason != "" {
		ev.Verdict = audit.VerdictInconclusive
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.LedgerTimeout)
	defer cancel()
	if _, err := s.cfg.Ledger.RecordReplay(lctx, s.cfg.Node, t, ev); err != nil {
		s.log.Error("replay record failed", "request", id, "err", err)
		return ReplayResult{}, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	if rep, err := s.cfg.Ledger.ReportFor(lctx, t, id); err == nil {
		res.Report, res.Incident = rep.ID, rep.Incident
	}
	s.resp.replays.WithLabelValues(string(ev.Verdict)).Inc()
	res.Verdict, res.Reason = ev.Verdict, ev.Reason
	return res, nil
}

// replayObstacle says why a replay of c on rc's replay engine could not be
// exact ("" when it can): equal digests would then prove little and
// different ones nothing. Sampled requests are replayable: every entry
// records its seed (the server draws one when the client names none).
func replayObstacle(c audit.RequestCompleted, rc Responses) audit.Name {
	sv := c.Served
	switch {
	case sv == nil:
		return "entry-has-no-digests"
	case c.Status != "":
		return "request-not-served" // its output was withheld: nothing was served to compare
	case sv.Sampling.Constrained != "":
		return "constrained-output-not-replayed" // logit_bias or response_format shaped it
	case sv.ModelDigest != rc.ModelDigest:
		return "model-digest-differs"
	case !batchInvariant[string(sv.Backend)] || !batchInvariant[rc.ReplayBackend]:
		return "backend-not-batch-invariant"
	case string(sv.Backend) != sanitizeName(rc.ReplayBackend) || string(sv.KernelPath) != sanitizeName(rc.ReplayKernelPath):
		return "kernel-path-differs"
	}
	return ""
}

// runReplay runs one request alone on the replay engine, in a partition of
// the replay pool of its own (always zeroed), and returns its token ids.
func (s *Server) runReplay(ctx context.Context, greq engine.GenerateRequest) ([]int32, time.Duration, error) {
	select {
	case s.resp.replaySlot <- struct{}{}:
	default:
		return nil, 0, ErrReplayBusy
	}
	defer func() { <-s.resp.replaySlot }()
	rc := s.cfg.Responses
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
			_ = drain(st)
			return nil, time.Since(start), err
		}
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
	}
}

func tenantActor(p tenancy.Principal) audit.Name {
	return audit.Name(sanitizeName("tenant:" + string(p.Tenant) + "/" + p.Subject))
}

func (s *Server) httpReplay(w http.ResponseWriter, r *http.Request) {
	var in ReplayInput
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &in); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	res, err := s.replay(r.Context(), p.Tenant, tenantActor(p), cloison.RequestID(r.PathValue("id")), in)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, res)
}

func (s *Server) httpAdminReplay(w http.ResponseWriter, r *http.Request) {
	var in ReplayInput
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &in); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	by := audit.Name(sanitizeName("operator:" + p.Subject))
	res, err := s.replay(r.Context(), cloison.TenantID(r.PathValue("tenant")), by, cloison.RequestID(r.PathValue("id")), in)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, res)
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

func (s *Server) reportAEAD(t cloison.TenantID) (cipher.AEAD, error) {
	k, err := audit.ReportKey(s.cfg.Responses.KEK, t)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// report records a report of tenant p's own request. Errors: ErrNoRequest,
// ErrBadField (reason), auditpg.ErrReportRate (429), ErrResponsesOff,
// ErrLedgerUnavailable.
func (s *Server) report(ctx context.Context, p tenancy.Principal, in ReportInput) (ReportResult, bool, error) {
	if audit.CheckName("reason", string(in.Reason)) != nil || !validReason(in.Reason) {
		return ReportResult{}, false, ErrBadField.Withf("reason must be one of %v", audit.ReportReasons)
	}
	for _, t := range []*string{in.ForeignText, in.Details} {
		if t != nil && len(*t) > audit.MaxTextLen {
			return ReportResult{}, false, ErrBadField.Withf("foreign_text and details are at most %d bytes each", audit.MaxTextLen)
		}
	}
	e, err := s.entry(ctx, p.Tenant, in.Request)
	if err != nil {
		return ReportResult{}, false, err
	}
	var sealed []byte
	if in.ForeignText != nil || in.Details != nil {
		g, err := s.reportAEAD(p.Tenant)
		if err != nil {
			return ReportResult{}, false, err
		}
		plain, _ := json.Marshal(sealedText{ForeignText: in.ForeignText, Details: in.Details})
		nonce := make([]byte, g.NonceSize())
		_, _ = rand.Read(nonce)
		sealed = g.Seal(nonce, nonce, plain, reportAD(p.Tenant, in.Request))
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.LedgerTimeout)
	defer cancel()
	rep, dup, err := s.cfg.Ledger.RecordReport(lctx, tenantActor(p), auditpg.NewReport{Tenant: p.Tenant, Request: in.Request, Reason: in.Reason,
		Sealed: sealed, RequestAt: e.OccurredAt, EntrySeq: e.Seq}, s.cfg.Responses.ReportLimit)
	if errors.Is(err, auditpg.ErrReportRate) {
		return ReportResult{}, false, err
	}
	if err != nil {
		s.log.Error("report record failed", "request", in.Request, "err", err)
		return ReportResult{}, false, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	res := ReportResult{Report: rep.ID, Incident: rep.Incident, Request: rep.Request, Duplicate: dup, Status: string(audit.IncidentUnderAssessment)}
	if rep.Verdict != "" {
		res.Status = string(rep.Verdict)
	}
	if !dup {
		s.resp.reports.WithLabelValues(s.metrics.tenant(p.Tenant)).Inc()
		s.notifyReport(rep)
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
func (s *Server) notifyReport(rep auditpg.Report) {
	url := s.cfg.Responses.ReportWebhook
	if url == "" {
		return
	}
	body, _ := json.Marshal(map[string]string{"event": string(audit.KindReportReceived), "report": string(rep.ID), "incident": string(rep.Incident),
		"tenant": string(rep.Tenant), "request": string(rep.Request), "reason": string(rep.Reason), "received_at": rep.ReceivedAt.UTC().Format(time.RFC3339Nano)})
	client := s.cfg.Responses.WebhookClient
	if client == nil {
		client = http.DefaultClient
	}
	s.resp.webhooks.Add(1)
	go func() {
		defer s.resp.webhooks.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			SignWebhook(req.Header, s.cfg.Responses.WebhookSecret, string(rep.ID), time.Now(), body)
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
			s.resp.webhookFail.Inc()
			s.log.Warn("report webhook failed", "report", rep.ID, "err", err)
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

func (s *Server) httpReport(w http.ResponseWriter, r *http.Request) {
	var in ReportInput
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &in); err != nil {
		WriteHTTPError(w, err)
		return
	}
	res, dup, err := s.report(r.Context(), principal(r), in)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	code := 201
	if dup {
		code = 200
	}
	writeJSON(w, code, res)
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

// readReport opens tenant t's report id for its compliance officer.
// Errors: ErrNoRequest-like 404 for another tenant's or an unknown report.
func (s *Server) readReport(ctx context.Context, t cloison.TenantID, id audit.Name) (ReportView, error) {
	if s.cfg.Responses.KEK == nil {
		return ReportView{}, ErrResponsesOff
	}
	notFound := cloison.NewError(cloison.CodeNotFound, "no report of this tenant has this id")
	if audit.CheckName("report", string(id)) != nil || t == "" {
		return ReportView{}, notFound
	}
	rep, err := s.cfg.Ledger.ReportOf(ctx, t, id)
	if errors.Is(err, auditpg.ErrNotFound) {
		return ReportView{}, notFound
	}
	if err != nil {
		return ReportView{}, err
	}
	v := ReportView{Report: rep.ID, Request: rep.Request, Reason: rep.Reason, Incident: rep.Incident, ReceivedAt: rep.ReceivedAt, Verdict: rep.Verdict}
	if rep.Sealed != nil {
		g, err := s.reportAEAD(t)
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

func (s *Server) httpReadReport(w http.ResponseWriter, r *http.Request) {
	v, err := s.readReport(r.Context(), principal(r).Tenant, audit.Name(r.PathValue("id")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, v)
}
