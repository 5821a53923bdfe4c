package api

import (
	"context"
	"encoding/base64"

	"github.com/cloison/cloison"
	responsev1 "github.com/cloison/cloison/api/proto/cloison/response/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/tenancy"
)

// responseService is ResponseService over service.Responses, the
// operations the HTTP routes of responses.go call.
type responseService struct {
	responsev1.UnimplementedResponseServiceServer
	s *Server
}

func init() {
	for _, m := range []string{responsev1.ResponseService_Verify_FullMethodName, responsev1.ResponseService_Report_FullMethodName,
		responsev1.ResponseService_Replay_FullMethodName} {
		MethodScopes[m] = []tenancy.Scope{tenancy.ScopeInfer}
	}
	grpcServices = append(grpcServices, responsev1.ResponseService_ServiceDesc.ServiceName)
}

// promptOf converts a Prompt message: exactly one of text, tokens and
// messages, each bounded as an HTTP body.
func (g *responseService) promptOf(p *responsev1.Prompt) (promptInput, error) {
	n := 0
	var in promptInput
	if p.Text != nil {
		n++
		if err := g.s.promptText(p.GetText()); err != nil {
			return in, err
		}
		in.Prompt = &Prompt{Text: p.GetText()}
	}
	if len(p.GetTokens()) > 0 {
		n++
		in.Prompt = &Prompt{Tokens: p.GetTokens(), IsIDs: true}
	}
	if len(p.GetMessages()) > 0 {
		n++
		var size int64
		for _, m := range p.GetMessages() {
			size += int64(len(m.GetRole()) + len(m.GetContent()))
			in.Messages = append(in.Messages, chat.Message{Role: m.GetRole(), Content: m.GetContent()})
		}
		if size > g.s.cfg.MaxBody {
			return in, ErrBodyTooLarge.Withf("more than %d bytes of messages", g.s.cfg.MaxBody)
		}
	}
	if n != 1 {
		return in, ErrBadField.Withf("give exactly one of prompt text, tokens and messages")
	}
	return in, nil
}

func (g *responseService) Verify(ctx context.Context, req *responsev1.VerifyRequest) (*responsev1.VerifyResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	pin, err := g.promptOf(req.GetPrompt())
	if err != nil {
		return nil, err
	}
	in := VerifyInput{promptInput: pin, Completion: req.Completion}
	if req.Choice != nil {
		c := int(req.GetChoice())
		in.Choice = &c
	}
	if len(req.GetCompletionTokens()) > 0 {
		in.CompletionTokens = req.GetCompletionTokens()
	}
	res, err := g.s.verify(ctx, grpcPrincipal(ctx), cloison.RequestID(req.GetRequest()), in)
	if err != nil {
		return nil, err
	}
	proof := make([][]byte, len(res.Entry.Proof))
	for i, h := range res.Entry.Proof {
		proof[i], _ = base64.StdEncoding.DecodeString(h)
	}
	return &responsev1.VerifyResponse{Request: string(res.Request), Match: res.Match, PromptMatch: res.PromptMatch, CompletionMatch: res.CompletionMatch,
		Reason: res.Reason, Entry: &responsev1.Entry{Position: res.Entry.Position, TreeSize: res.Entry.TreeSize, Payload: res.Entry.Payload,
			Proof: proof, Checkpoint: res.Entry.Checkpoint}}, nil
}

func (g *responseService) Report(ctx context.Context, req *responsev1.ReportRequest) (*responsev1.ReportResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	res, _, err := g.s.ops.responses.Report(ctx, grpcPrincipal(ctx), ReportInput{Request: cloison.RequestID(req.GetRequest()), Reason: audit.Name(req.GetReason()),
		ForeignText: req.ForeignText, Details: req.Details})
	if err != nil {
		return nil, err
	}
	return &responsev1.ReportResponse{Report: string(res.Report), Incident: string(res.Incident), Duplicate: res.Duplicate, Status: res.Status}, nil
}

func (g *responseService) Replay(ctx context.Context, req *responsev1.ReplayRequest) (*responsev1.ReplayResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	pin, err := g.promptOf(req.GetPrompt())
	if err != nil {
		return nil, err
	}
	p := grpcPrincipal(ctx)
	res, err := g.s.replay(ctx, p.Tenant, tenantActor(p), cloison.RequestID(req.GetRequest()), ReplayInput{promptInput: pin, Stop: req.GetStop()}, false)
	if err != nil {
		return nil, err
	}
	return &responsev1.ReplayResponse{Request: string(res.Request), Verdict: string(res.Verdict), Reason: string(res.Reason), Report: string(res.Report),
		Incident: string(res.Incident), ReplayMicros: res.ReplayMicros, OriginalMicros: res.OriginalMicros}, nil
}
