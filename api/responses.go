package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// Responses a tenant can verify, report and replay: the routes are codecs
// of service.Responses, shared with the gRPC ResponseService.
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

// Errors of the response routes (service.Responses').
var (
	ErrNoRequest       = service.ErrNoRequest
	ErrResponsesOff    = service.ErrResponsesOff
	ErrReplayOff       = service.ErrReplayOff
	ErrPromptMismatch  = service.ErrPromptMismatch
	ErrReplayResidency = service.ErrReplayResidency
	ErrReplayBusy      = service.ErrReplayBusy
	// ErrReplayTenantBusy: the tenant already has a replay waiting or
	// running on this node.
	ErrReplayTenantBusy = service.ErrReplayTenantBusy
)

// DefaultReplayWait is how long a replay waits for the replay engine
// (service.DefaultReplayWait).
const DefaultReplayWait = service.DefaultReplayWait

// DefaultDigestKey is the digest key id when Responses.DigestKey is empty.
const DefaultDigestKey = service.DefaultDigestKey

// Responses configures keyed digests, reports and replay. Without KEK the
// server records no digests and the routes answer ErrResponsesOff.
type Responses = service.ResponseConfig

// responseState is the server's part of this file: the metrics the
// response operations report to (it is their service.ResponsesObserver).
type responseState struct {
	reports     *prometheus.CounterVec
	webhookFail prometheus.Counter
	replays     *prometheus.CounterVec
	metrics     *Metrics
	svc         *service.Responses
	// webhooks is what Close waits on: the report notices in flight.
	webhooks interface{ Wait() }
}

func (r *responseState) Reported(t cloison.TenantID) {
	r.reports.WithLabelValues(r.metrics.tenant(t)).Inc()
}

func (r *responseState) Replayed(verdict audit.Name) {
	r.replays.WithLabelValues(string(verdict)).Inc()
}

func (r *responseState) WebhookFailed() { r.webhookFail.Inc() }

func newResponseState(s *Server) *responseState {
	r := &responseState{
		reports:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison_reports_received_total", Help: "Reports of suspicious responses received (new, not duplicates), by tenant (bounded label)."}, []string{"tenant"}),
		webhookFail: prometheus.NewCounter(prometheus.CounterOpts{Name: "cloison_report_webhook_failures_total", Help: "Report notices the webhook did not accept."}),
		replays:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cloison_replays_total", Help: "Replays of requests, by verdict."}, []string{"verdict"}),
		metrics:     s.metrics,
	}
	// As every cloison_ series: with model_name, in the server's registry.
	prometheus.WrapRegistererWith(prometheus.Labels{"model_name": s.cfg.ModelName}, s.metrics.reg).MustRegister(r.reports, r.webhookFail, r.replays)
	s.metrics.own = append(s.metrics.own, r.reports, r.webhookFail, r.replays)
	s.cfg.Responses = s.cfg.Responses.WithDefaults()
	r.svc = service.NewResponses(service.ResponsesDeps{Config: s.cfg.Responses, Ledger: s.cfg.Ledger, Tenants: s.cfg.Tenants,
		Node: s.cfg.Engine, Actor: s.cfg.Node, Limiter: s.cfg.Limiter, LedgerTimeout: s.cfg.LedgerTimeout, Observer: r, Log: s.log})
	r.webhooks = r.svc
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
// digests are off): service.Responses.Served.
func (s *Server) served(t cloison.TenantID, greq engine.GenerateRequest, completion []int32, text string, clientSeed bool) *audit.Served {
	return s.ops.responses.Served(t, greq, completion, text, clientSeed)
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
	case in.Prompt != nil:
		return s.text().CompletionPrompt(in.Prompt.Text, in.Prompt.Tokens, in.Prompt.IsIDs, "")
	}
	return s.text().ChatPrompt(in.Messages, nil)
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

// VerifyInput is a verify request.
type VerifyInput struct {
	promptInput
	Completion       *string `json:"completion"`
	CompletionTokens []int32 `json:"completion_tokens"`
	// Choice is the index of the choice to compare, for a request of
	// n > 1 choices (default 0).
	Choice *int `json:"choice"`
}

// VerifyResult is the answer to a verify request.
type VerifyResult = service.VerifyResult

// verify tokenizes the prompt of in and hands it to
// service.Responses.Verify; the completion's shape is checked first, as
// before the prompt is read.
func (s *Server) verify(ctx context.Context, p tenancy.Principal, id cloison.RequestID, in VerifyInput) (VerifyResult, error) {
	if err := service.CheckCompletion(in.Completion, in.CompletionTokens); err != nil {
		return VerifyResult{}, err
	}
	prompt, err := s.promptIDs(in.promptInput)
	if err != nil {
		return VerifyResult{}, err
	}
	return s.ops.responses.Verify(ctx, p, id, service.VerifyRequest{Prompt: prompt, Completion: in.Completion,
		CompletionTokens: in.CompletionTokens, Choice: in.Choice})
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
type ReplayResult = service.ReplayResult

// replay tokenizes the prompt of in and hands it to
// service.Responses.Replay.
func (s *Server) replay(ctx context.Context, t cloison.TenantID, by audit.Name, id cloison.RequestID, in ReplayInput, operator bool) (ReplayResult, error) {
	prompt, err := s.promptIDs(in.promptInput)
	if err != nil {
		return ReplayResult{}, err
	}
	return s.ops.responses.Replay(ctx, t, by, id, service.ReplayRequest{Prompt: prompt, Stop: in.Stop, Operator: operator})
}

func tenantActor(p tenancy.Principal) audit.Name { return service.TenantActor(p) }

func (s *Server) httpReplay(w http.ResponseWriter, r *http.Request) {
	var in ReplayInput
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &in); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	res, err := s.replay(r.Context(), p.Tenant, tenantActor(p), cloison.RequestID(r.PathValue("id")), in, false)
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
	by := service.OperatorActor(p)
	res, err := s.replay(r.Context(), cloison.TenantID(r.PathValue("tenant")), by, cloison.RequestID(r.PathValue("id")), in, true)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, res)
}

// ReportInput is a report of a suspicious response.
type ReportInput = service.ReportInput

// ReportResult answers a report.
type ReportResult = service.ReportResult

// SignWebhook sets the Standard Webhooks headers of a notice
// (service.SignWebhook).
func SignWebhook(h http.Header, secret []byte, id string, at time.Time, body []byte) {
	service.SignWebhook(h, secret, id, at, body)
}

func (s *Server) httpReport(w http.ResponseWriter, r *http.Request) {
	var in ReportInput
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &in); err != nil {
		WriteHTTPError(w, err)
		return
	}
	res, dup, err := s.ops.responses.Report(r.Context(), principal(r), in)
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
type ReportView = service.ReportView

func (s *Server) httpReadReport(w http.ResponseWriter, r *http.Request) {
	v, err := s.ops.responses.ReadReport(r.Context(), principal(r).Tenant, audit.Name(r.PathValue("id")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, v)
}
