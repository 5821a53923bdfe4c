package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// The gRPC services are thin: they convert messages and call the same
// operations as the HTTP handlers (generate, service.Admin,
// service.Compliance, ...). Errors are returned as they are; the interceptors map
// them through GRPCError.

type inferenceService struct {
	inferencev1.UnimplementedInferenceServiceServer
	s *Server
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// chatMessages converts and bounds chat messages (MaxBody bytes in all, as
// an HTTP body).
func (s *Server) chatMessages(in *inferencev1.ChatMessages) ([]chat.Message, error) {
	if len(in.GetMessages()) == 0 {
		return nil, ErrBadField.Withf("messages must not be empty")
	}
	var size int64
	out := make([]chat.Message, len(in.GetMessages()))
	for i, m := range in.GetMessages() {
		size += int64(len(m.GetRole()) + len(m.GetContent()) + len(m.GetToolCallId()))
		out[i] = chat.Message{Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
		for _, c := range m.GetToolCalls() {
			if c.GetChoice() != 0 {
				return nil, ErrUnsupported.Withf("messages[%d].tool_calls.choice (a response field)", i)
			}
			size += int64(len(c.GetId()) + len(c.GetName()) + len(c.GetArguments()))
			out[i].ToolCalls = append(out[i].ToolCalls, chat.ToolCall{ID: c.GetId(), Type: "function",
				Function: chat.FunctionCall{Name: c.GetName(), Arguments: c.GetArguments()}})
		}
	}
	if size > s.cfg.MaxBody {
		return nil, ErrBodyTooLarge.Withf("more than %d bytes of messages", s.cfg.MaxBody)
	}
	return out, nil
}

// promptText checks a text prompt as decode checks an HTTP body.
func (s *Server) promptText(text string) error {
	if int64(len(text)) > s.cfg.MaxBody {
		return ErrBodyTooLarge.Withf("more than %d bytes of prompt", s.cfg.MaxBody)
	}
	if !utf8.ValidString(text) {
		return ErrBadUTF8
	}
	return nil
}

// grpcResponseFormat checks a gRPC ResponseFormat with the HTTP rules
// (ResponseFormat), by spelling it as the JSON the HTTP route receives.
func grpcResponseFormat(rf *inferencev1.ResponseFormat) ([]byte, error) {
	if rf == nil {
		return nil, nil
	}
	obj := map[string]any{"type": rf.GetType()}
	if js := rf.GetJsonSchema(); js != nil {
		if !json.Valid([]byte(js.GetSchema())) {
			return nil, grammar.ErrBadSchema.Withf("response_format.json_schema.schema is not JSON text")
		}
		obj["json_schema"] = map[string]any{"name": js.GetName(), "description": js.GetDescription(),
			"schema": json.RawMessage(js.GetSchema()), "strict": js.GetStrict()}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, ErrBadField.Withf("response_format")
	}
	return ResponseFormat(raw)
}

// grpcConstraint is the constraint of a gRPC ResponseFormat: a schema
// (grpcResponseFormat), or a structural tag (type structural_tag, the
// object in structural_tag, read as HTTP's response_format of that type).
// Errors: as ResponseFormat; ErrBadField for structural_tag beside
// another type, or a structural tag that is no JSON object of that type.
func grpcConstraint(rf *inferencev1.ResponseFormat) (service.Constraint, error) {
	if rf.GetType() != "structural_tag" {
		if rf.GetStructuralTag() != "" {
			return service.Constraint{}, ErrBadField.Withf("response_format.structural_tag is only for type structural_tag")
		}
		schema, err := grpcResponseFormat(rf)
		return service.Constraint{Schema: schema, Whitespace: grpcWhitespace(rf)}, err
	}
	if rf.GetJsonSchema() != nil {
		return service.Constraint{}, ErrBadField.Withf("response_format.json_schema is only for type json_schema")
	}
	tag, err := structuralTagFormat(json.RawMessage(rf.GetStructuralTag()))
	if err != nil {
		return service.Constraint{}, err
	}
	if tag == "" {
		return service.Constraint{}, ErrBadField.Withf(`response_format.structural_tag must be a JSON object of type "structural_tag"`)
	}
	return service.Constraint{Syntax: grammar.StructuralTag, Grammar: tag}, nil
}

// grpcDecided sends the id of the decision that refused a request before
// its prompt was tokenized (textFor) in the stream's header, where
// Generate's sink sends it.
func grpcDecided(ctx context.Context) func(string) {
	return func(d string) { _ = grpc.SetHeader(ctx, metadata.Pairs(DecisionIDKey, d)) }
}

// grpcInference validates a GenerateRequest with the HTTP API's rules
// (Common.validate) and tokenizes its prompt.
func (s *Server) grpcInference(ctx context.Context, req *inferencev1.GenerateRequest) (inference, error) {
	if err := checkProtoFields(req); err != nil {
		return inference{}, err
	}
	c := &Common{Model: req.GetModel(), MaxTokens: req.MaxTokens, Temperature: req.Temperature, TopP: req.TopP, MinP: req.MinP,
		FrequencyPenalty: req.FrequencyPenalty, PresencePenalty: req.PresencePenalty, RepetitionPenalty: req.RepetitionPenalty,
		Seed: req.Seed, Stop: req.GetStop()}
	if req.N != nil {
		n := int(req.GetN())
		c.N = &n
	}
	if req.TopK != nil {
		k := int(*req.TopK)
		c.TopK = &k
	}
	if lb := req.GetLogitBias(); len(lb) > 0 {
		c.LogitBias = make(map[string]float64, len(lb))
		for id, v := range lb {
			c.LogitBias[strconv.Itoa(int(id))] = v
		}
	}
	if err := c.validate(); err != nil {
		return inference{}, err
	}
	if err := s.checkN(c); err != nil {
		return inference{}, err
	}
	constraint, err := grpcConstraint(req.GetResponseFormat())
	if err != nil {
		return inference{}, err
	}
	if top := req.GetTopLogprobs(); top < 0 || top > 20 {
		return inference{}, ErrBadField.Withf("top_logprobs must be in [0, 20]")
	}
	in := inference{common: c, logprobs: req.GetLogprobs() || req.GetTopLogprobs() > 0, topLogprobs: int(req.GetTopLogprobs()), constraint: constraint}
	if _, isChat := req.GetPrompt().(*inferencev1.GenerateRequest_Chat); !isChat && (len(req.GetTools()) > 0 || req.GetToolChoice() != "" || req.ParallelToolCalls != nil) {
		return inference{}, ErrBadField.Withf("tools, tool_choice and parallel_tool_calls need a chat prompt")
	}
	switch p := req.GetPrompt().(type) {
	case *inferencev1.GenerateRequest_Text:
		if err := s.promptText(p.Text); err != nil {
			return inference{}, err
		}
		if in.prompt, err = s.textFor(ctx, grpcPrincipal(ctx), c, grpcDecided(ctx)).CompletionPrompt(p.Text, nil, false, ""); err != nil {
			return inference{}, err
		}
	case *inferencev1.GenerateRequest_TokenIds:
		for _, id := range p.TokenIds.GetIds() {
			if id < 0 {
				return inference{}, ErrBadField.Withf("token id %d out of range", id)
			}
		}
		in.prompt = p.TokenIds.GetIds()
	case *inferencev1.GenerateRequest_Chat:
		msgs, err := s.chatMessages(p.Chat)
		if err != nil {
			return inference{}, err
		}
		if in.tools, err = s.grpcTools(req); err != nil {
			return inference{}, err
		}
		if in.prompt, in.constraint, err = s.textFor(ctx, grpcPrincipal(ctx), c, grpcDecided(ctx)).PrepareChatWith(msgs, in.tools, in.constraint, chat.Options{GenerationPrompt: true}); err != nil {
			return inference{}, err
		}
		in.chat = true
	default:
		return inference{}, ErrBadField.Withf("prompt is required (text, token_ids or chat)")
	}
	return in, nil
}

// grpcTools validates a GenerateRequest's tools as DecodeChat does
// (service.Model.PrepareChat then checks that the model can take them).
func (s *Server) grpcTools(req *inferencev1.GenerateRequest) (*service.ToolUse, error) {
	var defs []ToolDef
	var size int64
	for _, t := range req.GetTools() {
		var d ToolDef
		d.Type, d.Function.Name, d.Function.Description = "function", t.GetName(), t.GetDescription()
		if t.GetParametersJson() != "" {
			if !json.Valid([]byte(t.GetParametersJson())) {
				return nil, ErrBadField.Withf("tools: parameters_json is not JSON")
			}
			d.Function.Parameters = json.RawMessage(t.GetParametersJson())
		}
		size += int64(len(t.GetName()) + len(t.GetDescription()) + len(t.GetParametersJson()))
		defs = append(defs, d)
	}
	if size > s.cfg.MaxBody {
		return nil, ErrBodyTooLarge.Withf("more than %d bytes of tools", s.cfg.MaxBody)
	}
	var choice json.RawMessage
	switch c := req.GetToolChoice(); c {
	case "":
	case "auto", "none", "required":
		choice, _ = json.Marshal(c)
	default:
		choice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c}})
	}
	return parseToolUse(defs, choice, req.ParallelToolCalls)
}

func (g *inferenceService) logprob(id int32, lp float64) *inferencev1.TokenLogprob {
	return &inferencev1.TokenLogprob{TokenId: id, Token: string(g.s.cfg.Tokenizer.Piece(id, false)), Logprob: lp}
}

// Generate runs generate and streams its tokens; the Final message is sent
// only after generate returned success (request.completed ledgered).
func (g *inferenceService) Generate(req *inferencev1.GenerateRequest, stream grpc.ServerStreamingServer[inferencev1.GenerateResponse]) error {
	g = g.on(req.GetModel())
	in, err := g.s.grpcInference(stream.Context(), req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	id := grpcRequestID(ctx)
	decision := ""
	var sendErr error
	send := func(msg *inferencev1.GenerateResponse) {
		// A client that stops reading (its flow-control window full)
		// is cut off after the send timeout, like a compliance stream.
		if sendErr = g.s.streams.sendWithin(ctx, func() error { return stream.Send(msg) }); sendErr != nil {
			cancel() // the client is gone or stalled: generate cancels the request and ledgers it
		}
	}
	sendCalls := func(choice int, calls []ToolCallOut) {
		for _, c := range calls {
			if sendErr != nil {
				return
			}
			send(&inferencev1.GenerateResponse{Kind: &inferencev1.GenerateResponse_ToolCall{ToolCall: &inferencev1.ToolCall{
				Id: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments, Index: int32(*c.Index), Choice: int32(choice)}}})
		}
	}
	var tools []*collector // with tools: each choice's output split into content and calls
	if in.tools != nil {
		for range in.choices() {
			c := newCollector(g.s, in)
			c.reason = nil // gRPC chunks carry the raw text, reasoning included
			tools = append(tools, c)
		}
	}
	sink := service.Sink{
		Decided: func(d string) {
			decision = d
			_ = stream.SetHeader(metadata.Pairs(DecisionIDKey, d))
		},
		Token: func(choice int, tok engine.Token) {
			if sendErr != nil {
				return
			}
			ch := &inferencev1.TokenChunk{Text: tok.Text, TokenId: tok.ID, Choice: int32(choice)}
			var calls []ToolCallOut
			if tools != nil {
				ch.Text, calls = tools[choice].add(tok)
			}
			if tok.ID < 0 {
				ch.TokenId = -1
			} else if in.logprobs {
				ch.Logprob = g.logprob(tok.ID, tok.Logprob)
				for _, alt := range tok.Top {
					ch.TopLogprobs = append(ch.TopLogprobs, g.logprob(alt.Token, alt.Logprob))
				}
			}
			send(&inferencev1.GenerateResponse{Kind: &inferencev1.GenerateResponse_Chunk{Chunk: ch}})
			sendCalls(choice, calls)
		},
	}
	res, err := g.s.generate(ctx, grpcPrincipal(ctx), id, in, sink)
	if err != nil {
		return err
	}
	finishes := make([]string, len(res.Finishes))
	for i, f := range res.Finishes {
		finishes[i] = string(f)
		if tools != nil && sendErr == nil {
			// What tool parsing held back is released only after success.
			text, calls := tools[i].finish()
			if text != "" {
				send(&inferencev1.GenerateResponse{Kind: &inferencev1.GenerateResponse_Chunk{Chunk: &inferencev1.TokenChunk{Text: text, TokenId: -1, Choice: int32(i)}}})
			}
			sendCalls(i, calls)
			finishes[i] = tools[i].finishReason(f)
		}
	}
	finish := finishes[0]
	if len(finishes) == 1 {
		finishes = nil // n = 1: finish_reason alone
	}
	if sendErr != nil {
		return sendErr
	}
	final := &inferencev1.GenerateResponse{Kind: &inferencev1.GenerateResponse_Final{Final: &inferencev1.Final{
		FinishReason: finish, FinishReasons: finishes, RequestId: string(id), DecisionId: decision,
		Usage: &inferencev1.Usage{PromptTokens: int64(res.Prompt), CompletionTokens: int64(res.Completion), TotalTokens: int64(res.Prompt + res.Completion)}}}}
	if err := g.s.streams.sendWithin(ctx, func() error { return stream.Send(final) }); err != nil {
		return err
	}
	// The receipt rides in the trailer, which leaves with the OK status
	// after the final message: never with an error.
	stream.SetTrailer(metadata.Pairs(ReceiptKey, res.Receipt))
	return nil
}

func (g *inferenceService) checkModel(ctx context.Context, model string) error {
	p := grpcPrincipal(ctx)
	if model != g.s.cfg.ModelName || !p.TenantRecord.Allows(model) {
		return ErrUnknownModel.Withf("%q", model)
	}
	return nil
}

// Tokenize tokenizes text or chat messages. It is metered as inference is:
// it holds one of the tenant's concurrent-request slots and is charged
// against its tokens-per-minute quota (Limiter), first for an upper bound
// (one token per byte, plus BOS and EOS, capped at the quota) and, once
// done, refunded down to the tokens it produced; and it is counted in
// cloison_tokenize_tokens_total. Without this a tenant could burn CPU
// without bound outside its quota.
// Errors: ErrUnsupported, ErrUnknownModel, ErrBodyTooLarge, ErrBadUTF8,
// ErrBadField, the chat template's, and the Limiter's (*tenancy.LimitError,
// 429 with retry-after).
func (g *inferenceService) Tokenize(ctx context.Context, req *inferencev1.TokenizeRequest) (*inferencev1.TokenizeResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	g = g.on(req.GetModel())
	if err := g.checkModel(ctx, req.GetModel()); err != nil {
		return nil, err
	}
	in := service.TokenizeInput{BOS: true}
	switch input := req.GetInput().(type) {
	case *inferencev1.TokenizeRequest_Text:
		if err := g.s.promptText(input.Text); err != nil {
			return nil, err
		}
		in.Text = input.Text
	case *inferencev1.TokenizeRequest_Chat:
		msgs, err := g.s.chatMessages(input.Chat)
		if err != nil {
			return nil, err
		}
		in.Chat, in.Messages = true, msgs
	default:
		return nil, ErrBadField.Withf("input is required (text or chat)")
	}
	p := grpcPrincipal(ctx)
	ids, err := g.s.req.Tokenize(p, in)
	if err != nil {
		return nil, err
	}
	g.s.metrics.forModel(g.s.cfg.ModelName).tokenizeToks.WithLabelValues(g.s.metrics.tenant(p.Tenant)).Add(float64(len(ids)))
	out := &inferencev1.TokenizeResponse{Ids: ids, Count: int64(len(ids)), MaxContext: int64(g.s.cfg.Engine.Attestation().ServedContext)}
	for _, id := range ids {
		out.Pieces = append(out.Pieces, string(g.s.cfg.Tokenizer.Piece(id, true)))
	}
	return out, nil
}

func (g *inferenceService) ListModels(ctx context.Context, _ *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	out := &inferencev1.ListModelsResponse{}
	p := grpcPrincipal(ctx)
	for _, v := range g.s.views() { // only the models the tenant may use
		if p.TenantRecord.Allows(v.cfg.ModelName) {
			out.Models = append(out.Models, &inferencev1.Model{Id: v.cfg.ModelName, OwnedBy: "cloison",
				ContextLength: int64(v.contextFor(p))})
			for _, id := range v.req.AdapterModels(p) { // the tenant's own adapters only
				out.Models = append(out.Models, &inferencev1.Model{Id: id, OwnedBy: string(p.Tenant), ContextLength: int64(v.contextFor(p))})
			}
		}
	}
	return out, nil
}

// on is the service as it serves model (Server.view).
func (g *inferenceService) on(model string) *inferenceService {
	if v := g.s.view(model); v != g.s {
		return &inferenceService{s: v}
	}
	return g
}

func attestationPB(a attest.Attestation) *inferencev1.Attestation {
	out := &inferencev1.Attestation{ModelContext: int64(a.ModelContext), ServedContext: int64(a.ServedContext), PoolTokens: int64(a.PoolTokens),
		PoolPages: int64(a.PoolPages), PageTokens: int64(a.PageTokens), K: int64(a.K), Zeroing: a.Zeroing, Ok: a.OK, Reason: a.Reason,
		Labels: labelsPB(a.Labels), Model: a.Model, ModelDigest: a.ModelDigest}
	for _, r := range a.Reserved {
		out.Reserved = append(out.Reserved, &inferencev1.Reservation{Tenant: string(r.Tenant), Pages: int64(r.Pages)})
	}
	for _, ad := range a.Adapters {
		out.Adapters = append(out.Adapters, &inferencev1.AttestedAdapter{Tenant: string(ad.Tenant), Name: ad.Name, Digest: ad.Digest, Rank: int64(ad.Rank)})
	}
	return out
}

func (g *inferenceService) GetAttestation(ctx context.Context, req *inferencev1.GetAttestationRequest) (*inferencev1.Attestation, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	if id := req.GetModel(); id != "" {
		// A model's own pool, as GET /v1/attestation?model=ID.
		p := grpcPrincipal(ctx)
		if g = g.on(id); g.s.cfg.ModelName != id || !p.TenantRecord.Allows(id) {
			return nil, ErrUnknownModel.Withf("%q", truncate(id, maxFieldName))
		}
	}
	a, tp := g.s.tenantAttestation(grpcPrincipal(ctx))
	out := attestationPB(a)
	pb := &inferencev1.TenantPlacement{Tenant: string(tp.Tenant), IsolationTier: tp.IsolationTier, Zeroing: tp.Zeroing,
		AllowedRegions: tp.Residency.Regions, RequiredTier: tp.Residency.Tier, Decode: labelsPB(tp.Decode), Compliant: tp.Compliant}
	for _, l := range tp.Prefill {
		pb.Prefill = append(pb.Prefill, labelsPB(l))
	}
	out.Tenant = pb
	return out, nil
}

func labelsPB(l attest.Labels) *inferencev1.NodeLabels {
	return &inferencev1.NodeLabels{Region: l.Region, Tier: l.Tier}
}

// grpcActor is the ledger actor of the admin or officer who called.
func grpcActor(ctx context.Context) audit.Name { return actorOf(grpcPrincipal(ctx)) }

// ---- admin ----

type adminService struct {
	adminv1.UnimplementedAdminServiceServer
	s *Server
}

func tenantPB(t tenancy.Tenant) *adminv1.Tenant {
	return &adminv1.Tenant{Id: string(t.ID), Name: t.Name, Status: string(t.Status), Tier: t.Tier.String(), Zeroing: t.Zeroing.String(),
		Classification: string(t.Classification), AllowedModels: t.AllowedModels, IncidentContact: t.IncidentContact,
		Quotas: &adminv1.Quotas{MaxConcurrent: int64(t.Quotas.MaxConcurrent), KvPages: int64(t.Quotas.KVPages),
			TokensPerMinute: int64(t.Quotas.TokensPerMinute), MaxContext: int64(t.Quotas.MaxContext)},
		CreatedAt: rfc3339(t.CreatedAt), UpdatedAt: rfc3339(t.UpdatedAt),
		Residency: &adminv1.Residency{Regions: t.Residency.Regions, Tier: t.Residency.Tier}}
}

// tenantFromPB reads a tenant through the same JSON decoding as the HTTP
// API (its defaults for tier, zeroing and status included).
func tenantFromPB(pb *adminv1.Tenant) (tenancy.Tenant, error) {
	if pb == nil {
		return tenancy.Tenant{}, ErrBadField.Withf("tenant is required")
	}
	q := pb.GetQuotas()
	b, err := json.Marshal(map[string]any{"id": pb.GetId(), "name": pb.GetName(), "status": pb.GetStatus(), "tier": pb.GetTier(),
		"zeroing": pb.GetZeroing(), "classification": pb.GetClassification(), "allowed_models": pb.GetAllowedModels(),
		"incident_contact": pb.GetIncidentContact(), "residency": map[string]any{"regions": regionsOf(pb.GetResidency()), "tier": pb.GetResidency().GetTier()},
		"quotas": map[string]int64{"max_concurrent": q.GetMaxConcurrent(),
			"kv_pages": q.GetKvPages(), "tokens_per_minute": q.GetTokensPerMinute(), "max_context": q.GetMaxContext()}})
	if err != nil {
		return tenancy.Tenant{}, err
	}
	var t tenancy.Tenant
	if err := decode(bytes.NewReader(b), DefaultMaxBody, &t); err != nil {
		return tenancy.Tenant{}, err
	}
	return t, nil
}

// regionsOf is never nil (JSON null would not be a list).
func regionsOf(r *adminv1.Residency) []string {
	return append([]string{}, r.GetRegions()...)
}

func (a *adminService) ListTenants(ctx context.Context, _ *adminv1.ListTenantsRequest) (*adminv1.ListTenantsResponse, error) {
	ts, err := a.s.ops.admin.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	out := &adminv1.ListTenantsResponse{}
	for _, t := range ts {
		out.Tenants = append(out.Tenants, tenantPB(t))
	}
	return out, nil
}

func (a *adminService) GetTenant(ctx context.Context, req *adminv1.GetTenantRequest) (*adminv1.Tenant, error) {
	t, err := a.s.ops.admin.Tenant(ctx, cloison.TenantID(req.GetId()))
	if err != nil {
		return nil, err
	}
	return tenantPB(t), nil
}

func (a *adminService) CreateTenant(ctx context.Context, req *adminv1.CreateTenantRequest) (*adminv1.Tenant, error) {
	t, err := tenantFromPB(req.GetTenant())
	if err != nil {
		return nil, err
	}
	created, err := a.s.ops.admin.CreateTenant(ctx, grpcActor(ctx), t)
	if err != nil {
		return nil, err
	}
	return tenantPB(created), nil
}

func (a *adminService) SuspendTenant(ctx context.Context, req *adminv1.SuspendTenantRequest) (*adminv1.Tenant, error) {
	t, err := a.s.ops.admin.SetStatus(ctx, grpcActor(ctx), cloison.TenantID(req.GetId()), tenancy.StatusSuspended)
	if err != nil {
		return nil, err
	}
	return tenantPB(t), nil
}

func (a *adminService) ActivateTenant(ctx context.Context, req *adminv1.ActivateTenantRequest) (*adminv1.Tenant, error) {
	t, err := a.s.ops.admin.SetStatus(ctx, grpcActor(ctx), cloison.TenantID(req.GetId()), tenancy.StatusActive)
	if err != nil {
		return nil, err
	}
	return tenantPB(t), nil
}

func keysPB(ks []tenancy.KeyInfo) *adminv1.ListKeysResponse {
	out := &adminv1.ListKeysResponse{}
	for _, k := range ks {
		out.Keys = append(out.Keys, &adminv1.Key{Kid: k.ID, Issuer: k.Issuer, State: string(k.State), PublicKey: k.Public,
			CreatedAt: rfc3339(k.CreatedAt), ActivatedAt: rfc3339(k.ActivatedAt), RetiredAt: rfc3339(k.RetiredAt)})
	}
	return out
}

func (a *adminService) ListKeys(context.Context, *adminv1.ListKeysRequest) (*adminv1.ListKeysResponse, error) {
	ks, err := a.s.ops.admin.Keys()
	if err != nil {
		return nil, err
	}
	return keysPB(ks), nil
}

func (a *adminService) RotateKeys(ctx context.Context, _ *adminv1.RotateKeysRequest) (*adminv1.ListKeysResponse, error) {
	ks, err := a.s.ops.admin.RotateKeys(ctx, grpcActor(ctx))
	if err != nil {
		return nil, err
	}
	return keysPB(ks), nil
}

func (a *adminService) RetireKey(ctx context.Context, req *adminv1.RetireKeyRequest) (*adminv1.ListKeysResponse, error) {
	ks, err := a.s.ops.admin.RetireKey(ctx, grpcActor(ctx), req.GetKid())
	if err != nil {
		return nil, err
	}
	return keysPB(ks), nil
}

// intField narrows an optional int64 of a request to an int; out of range
// is a bad field, never a wrapped value.
func intField(name string, v *int64) (*int, error) {
	if v == nil {
		return nil, nil
	}
	if *v < 0 || *v > 1<<31-1 {
		return nil, ErrBadField.Withf("%s out of range", name)
	}
	n := int(*v)
	return &n, nil
}

func (a *adminService) UpdateTenant(ctx context.Context, req *adminv1.UpdateTenantRequest) (*adminv1.Tenant, error) {
	var u TenantUpdate
	if q := req.GetQuotas(); q != nil {
		u.Quotas = &struct {
			MaxConcurrent   *int `json:"max_concurrent"`
			KVPages         *int `json:"kv_pages"`
			TokensPerMinute *int `json:"tokens_per_minute"`
			MaxContext      *int `json:"max_context"`
		}{}
		var err error
		for _, f := range []struct {
			name string
			v    *int64
			dst  **int
		}{{"max_concurrent", q.MaxConcurrent, &u.Quotas.MaxConcurrent}, {"kv_pages", q.KvPages, &u.Quotas.KVPages},
			{"tokens_per_minute", q.TokensPerMinute, &u.Quotas.TokensPerMinute}, {"max_context", q.MaxContext, &u.Quotas.MaxContext}} {
			if *f.dst, err = intField(f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	if m := req.GetAllowedModels(); m != nil {
		models := append([]string{}, m.GetModels()...)
		u.AllowedModels = &models
	}
	if r := req.GetResidency(); r != nil {
		u.Residency = &tenancy.Residency{Regions: regionsOf(r), Tier: r.GetTier()}
	}
	t, err := a.s.ops.admin.UpdateTenant(ctx, grpcActor(ctx), cloison.TenantID(req.GetId()), u)
	if err != nil {
		return nil, err
	}
	return tenantPB(t), nil
}

func clientPB(c tenancy.Client) *adminv1.Client {
	scopes := make([]string, len(c.Scopes))
	for i, sc := range c.Scopes {
		scopes[i] = string(sc)
	}
	return &adminv1.Client{Id: c.ID, Tenant: string(c.Tenant), Name: c.Name, Scopes: scopes, Status: string(c.Status),
		CreatedAt: rfc3339(c.CreatedAt), RevokedAt: rfc3339(c.RevokedAt)}
}

func (a *adminService) ListClients(ctx context.Context, req *adminv1.ListClientsRequest) (*adminv1.ListClientsResponse, error) {
	cs, err := a.s.ops.admin.Clients(ctx, cloison.TenantID(req.GetTenant()))
	if err != nil {
		return nil, err
	}
	out := &adminv1.ListClientsResponse{}
	for _, c := range cs {
		out.Clients = append(out.Clients, clientPB(c))
	}
	return out, nil
}

func (a *adminService) CreateClient(ctx context.Context, req *adminv1.CreateClientRequest) (*adminv1.Client, error) {
	pb := req.GetClient()
	if pb == nil {
		return nil, ErrBadField.Withf("client is required")
	}
	c := tenancy.Client{ID: pb.GetId(), Tenant: cloison.TenantID(pb.GetTenant()), Name: pb.GetName()}
	for _, sc := range pb.GetScopes() {
		p, err := tenancy.ParseScope(sc)
		if err != nil {
			return nil, ErrBadField.Withf("scopes: %q", sc)
		}
		c.Scopes = append(c.Scopes, p)
	}
	out, err := a.s.ops.admin.CreateClient(ctx, grpcActor(ctx), c)
	if err != nil {
		return nil, err
	}
	return clientPB(out), nil
}

func (a *adminService) RevokeClient(ctx context.Context, req *adminv1.RevokeClientRequest) (*adminv1.Client, error) {
	c, err := a.s.ops.admin.RevokeClient(ctx, grpcActor(ctx), req.GetId())
	if err != nil {
		return nil, err
	}
	return clientPB(c), nil
}

func (a *adminService) RevokeToken(ctx context.Context, req *adminv1.RevokeTokenRequest) (*adminv1.RevokeTokenResponse, error) {
	exp, err := time.Parse(time.RFC3339, req.GetExpiresAt())
	if err != nil {
		return nil, ErrBadField.Withf("expires_at: want RFC 3339")
	}
	if err := a.s.ops.admin.RevokeToken(ctx, grpcActor(ctx), TokenRevocation{TokenID: req.GetJti(), Issuer: req.GetIssuer(), ExpiresAt: exp,
		Tenant: cloison.TenantID(req.GetTenant())}); err != nil {
		return nil, err
	}
	return &adminv1.RevokeTokenResponse{}, nil
}

func (a *adminService) PoolStatus(context.Context, *adminv1.PoolStatusRequest) (*adminv1.PoolStatusResponse, error) {
	var out adminv1.PoolStatusResponse
	for _, st := range a.s.poolStates() {
		p := st.Pool
		pool := &adminv1.Pool{Pages: int64(p.Pages), PageTokens: int64(p.PageTokens), Free: int64(p.Free), Leased: int64(p.Leased),
			Cached: int64(p.Cached), Quarantined: int64(p.Quarantined), Draining: int64(p.Draining), Scrubbed: p.Scrubbed}
		for _, t := range p.Tenants {
			pool.Tenants = append(pool.Tenants, &adminv1.TenantPages{Tenant: string(t.Tenant), Tier: t.Tier.String(), Zeroing: t.Zeroing.String(),
				Reserved: int64(t.Reserved), Leased: int64(t.Leased), Leases: int64(t.Leases), Cached: int64(t.Cached), Affine: int64(t.Affine),
				Scrubbed: t.Scrubbed, Violations: t.Violations})
		}
		out.Models = append(out.Models, &adminv1.ModelPool{Attestation: attestationPB(st.Attestation), Pool: pool, Running: int64(st.Running), Waiting: int64(st.Waiting)})
	}
	first := out.Models[0] // the node's first model, always served
	out.Attestation, out.Pool, out.Running, out.Waiting = first.Attestation, first.Pool, first.Running, first.Waiting
	return &out, nil
}

func (a *adminService) ReloadPolicies(ctx context.Context, req *adminv1.ReloadPoliciesRequest) (*adminv1.ReloadPoliciesResponse, error) {
	rev, err := a.s.ops.admin.ReloadPolicies(ctx, grpcActor(ctx), req.GetFiles())
	if err != nil {
		return nil, err
	}
	return &adminv1.ReloadPoliciesResponse{Revision: rev}, nil
}

// ReloadPoliciesStream takes a bundle over several messages (each at most
// MaxBody, gRPC's limit), joining the parts of a file in order, up to 8 ×
// MaxBody in all as POST /admin/v1/policies takes; it reloads when the
// client closes its side.
func (a *adminService) ReloadPoliciesStream(st adminv1.AdminService_ReloadPoliciesStreamServer) error {
	files := map[string]string{}
	var size int64
	limit := 8 * a.s.cfg.MaxBody
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		for name, src := range req.GetFiles() {
			if size += int64(len(name) + len(src)); size > limit {
				return ErrBodyTooLarge.Withf("a policy bundle of more than %d bytes", limit)
			}
			files[name] += src
		}
	}
	rev, err := a.s.ops.admin.ReloadPolicies(st.Context(), grpcActor(st.Context()), files)
	if err != nil {
		return err
	}
	return st.SendAndClose(&adminv1.ReloadPoliciesResponse{Revision: rev})
}

// ---- compliance ----

type complianceService struct {
	compliancev1.UnimplementedComplianceServiceServer
	s *Server
}

// incidentPB is f as p may see it (service.Compliance.IncidentViews): a tenant gets no ledger
// sequence number and counts only the notices it sees.
func (s *Server) incidentPB(ctx context.Context, p tenancy.Principal, f audit.IncidentFile) (*compliancev1.Incident, error) {
	seq, notices := f.LedgerSeq, len(f.Notices)
	views, err := s.ops.compliance.IncidentViews(ctx, p, []audit.IncidentFile{f})
	if err != nil {
		return nil, err
	}
	if tv, ok := views[0].(service.TenantIncident); ok {
		seq, notices = 0, len(tv.Notices)
	}
	b, err := json.Marshal(views[0])
	if err != nil {
		return nil, err
	}
	return &compliancev1.Incident{Id: string(f.ID), Source: string(f.Source), OpenedAt: rfc3339(f.OpenedAt), OpenedBy: string(f.OpenedBy),
		LedgerSeq: seq, Versions: int64(len(f.Versions)), Notices: int64(notices), Json: b}, nil
}

// registerVouched answers service.ErrRegisterMismatch when the register
// disagrees with the ledger: the gRPC messages have no room for the
// RegisterCheck the HTTP routes carry, so the register is refused rather
// than served short.
func (c *complianceService) registerVouched(ctx context.Context) error {
	rc, err := c.s.ops.compliance.CheckRegister(ctx, grpcPrincipal(ctx))
	if err != nil {
		return err
	}
	if !rc.OK {
		return service.ErrRegisterMismatch.Withf("%d disagreements; POST /compliance/v1/ledger/verify names them", rc.Failures)
	}
	return nil
}

func (c *complianceService) ListIncidents(ctx context.Context, _ *compliancev1.ListIncidentsRequest) (*compliancev1.ListIncidentsResponse, error) {
	if err := c.registerVouched(ctx); err != nil {
		return nil, err
	}
	fs, err := c.s.ops.compliance.Incidents(ctx, grpcPrincipal(ctx))
	if err != nil {
		return nil, err
	}
	out := &compliancev1.ListIncidentsResponse{}
	for _, f := range fs {
		pb, err := c.s.incidentPB(ctx, grpcPrincipal(ctx), f)
		if err != nil {
			return nil, err
		}
		out.Incidents = append(out.Incidents, pb)
	}
	return out, nil
}

func (c *complianceService) GetIncident(ctx context.Context, req *compliancev1.GetIncidentRequest) (*compliancev1.Incident, error) {
	if err := c.registerVouched(ctx); err != nil {
		return nil, err
	}
	f, err := c.s.ops.compliance.Incident(ctx, grpcPrincipal(ctx), audit.Name(req.GetId()))
	if err != nil {
		return nil, err
	}
	return c.s.incidentPB(ctx, grpcPrincipal(ctx), f)
}

func versionPB(v audit.StoredVersion) (*compliancev1.IncidentVersion, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &compliancev1.IncidentVersion{Incident: string(v.Incident), Version: int64(v.Version), Json: b}, nil
}

func (c *complianceService) OpenIncident(ctx context.Context, req *compliancev1.OpenIncidentRequest) (*compliancev1.IncidentVersion, error) {
	var v audit.IncidentVersion
	if err := decode(bytes.NewReader(req.GetVersionJson()), c.s.cfg.MaxBody, &v); err != nil {
		return nil, err
	}
	st, err := c.s.ops.compliance.OpenIncident(ctx, grpcActor(ctx), v)
	if err != nil {
		return nil, err
	}
	return versionPB(st)
}

func (c *complianceService) UpdateIncident(ctx context.Context, req *compliancev1.UpdateIncidentRequest) (*compliancev1.IncidentVersion, error) {
	var patch json.RawMessage
	if err := decode(bytes.NewReader(req.GetPatchJson()), c.s.cfg.MaxBody, &patch); err != nil {
		return nil, err
	}
	st, err := c.s.ops.compliance.UpdateIncident(ctx, grpcActor(ctx), audit.Name(req.GetId()), patch)
	if err != nil {
		return nil, err
	}
	return versionPB(st)
}

func (c *complianceService) AddNotice(ctx context.Context, req *compliancev1.AddNoticeRequest) (*compliancev1.Notice, error) {
	var n audit.Notice
	if err := decode(bytes.NewReader(req.GetNoticeJson()), c.s.cfg.MaxBody, &n); err != nil {
		return nil, err
	}
	n.Incident = audit.Name(req.GetIncident())
	st, err := c.s.ops.compliance.AddNotice(ctx, grpcActor(ctx), n)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &compliancev1.Notice{Incident: string(n.Incident), Number: st.Number, Json: b}, nil
}

func (c *complianceService) VerifyLedger(ctx context.Context, _ *compliancev1.VerifyLedgerRequest) (*compliancev1.VerifyLedgerResponse, error) {
	res, broken, reg, err := c.s.ops.compliance.VerifyLedger(ctx, grpcPrincipal(ctx))
	if err != nil {
		return nil, err
	}
	if broken != nil && len(broken.All) > 0 {
		first := broken.All[0]
		return &compliancev1.VerifyLedgerResponse{Ok: false, Summary: broken.Error(), BrokenSeq: first.Seq, BrokenReason: string(first.Reason)}, nil
	}
	if !reg.OK {
		return &compliancev1.VerifyLedgerResponse{Ok: false, Summary: strings.Join(reg.Problems, "\n"), BrokenReason: "register"}, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return &compliancev1.VerifyLedgerResponse{Ok: true, Summary: res.String(), ResultJson: b}, nil
}

// LedgerRange is GET /compliance/v1/ledger: the operator (admin) streams
// ledger rows by global seq with their hashes; a tenant streams its tenant
// log (service.Compliance.ScanTenantLog): Seq is the position in its log (what
// GetTenantInclusionProof takes), Payload the leaf as hashed, Tenant its
// own, and no hashes. Tenant names the log to list, as ?tenant= does on
// HTTP: the caller's own, or any with admin (another's without admin is
// permission denied).
func (c *complianceService) LedgerRange(req *compliancev1.LedgerRangeRequest, stream grpc.ServerStreamingServer[compliancev1.LedgerRow]) error {
	ctx := stream.Context()
	if req.GetTo() != 0 && req.GetTo() < req.GetFrom() {
		return ErrBadField.Withf("to (%d) is before from (%d)", req.GetTo(), req.GetFrom())
	}
	p := grpcPrincipal(ctx)
	t, err := service.ListedLog(p, req.GetTenant())
	if err != nil {
		return err
	}
	if t != "" {
		return c.s.ops.compliance.ScanTenantLog(ctx, p, t, req.GetFrom(), req.GetTo(), func(e audit.TenantLogEntry) error {
			row := &compliancev1.LedgerRow{Seq: e.Pos, Kind: string(e.Kind), Tenant: string(t), Actor: string(e.Actor), Payload: e.Leaf}
			return c.s.streams.sendWithin(ctx, func() error { return stream.Send(row) })
		})
	}
	return c.s.ops.compliance.ScanLedger(ctx, p, req.GetFrom(), req.GetTo(), func(rec audit.Record) error {
		row := &compliancev1.LedgerRow{Seq: rec.Seq, PrevHash: rec.PrevHash[:], Hash: rec.Hash[:], Kind: string(rec.Kind),
			Tenant: string(rec.Tenant), Actor: string(rec.Actor), Payload: rec.Payload}
		return c.s.streams.sendWithin(ctx, func() error { return stream.Send(row) })
	})
}

// exportChunk bounds one ExportChunk's data.
const exportChunk = 64 << 10

// Export streams the files of a signed export (service.Compliance.Export)
// in chunks of at most exportChunk bytes.
func (c *complianceService) Export(req *compliancev1.ExportRequest, stream grpc.ServerStreamingServer[compliancev1.ExportChunk]) error {
	ctx := stream.Context()
	return c.s.ops.compliance.Export(ctx, grpcPrincipal(ctx), grpcActor(ctx), req.GetFrom(), req.GetTo(), func(name, path string) error {
		return c.s.sendFile(ctx, path, name, stream)
	})
}

func (s *Server) sendFile(ctx context.Context, path, name string, stream grpc.ServerStreamingServer[compliancev1.ExportChunk]) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, exportChunk)
	var off uint64
	for {
		n, err := io.ReadFull(f, buf)
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			return err
		}
		if n > 0 || eof {
			// buf is reused: copy, the send may outlive a cut-off stream.
			chunk := &compliancev1.ExportChunk{Name: name, Offset: off, Data: append([]byte(nil), buf[:n]...), Eof: eof}
			if err := s.streams.sendWithin(ctx, func() error { return stream.Send(chunk) }); err != nil {
				return err
			}
		}
		off += uint64(n)
		if eof {
			return nil
		}
	}
}
