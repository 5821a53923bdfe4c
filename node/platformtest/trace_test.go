package platformtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"pgregory.net/rapid"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// recorder is an in-process exporter and the provider that feeds it
// synchronously (a span is exported when it ends).
func recorder(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp, tp
}

// chatTraced posts a chat completion with the headers and returns the
// status, the response headers and the completion text.
func chatTraced(t *testing.T, p *platformtest.Platform, token, prompt string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": platformtest.Model, "max_tokens": 4, "temperature": 0,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(raw, &v)
	text := ""
	if len(v.Choices) > 0 {
		text = v.Choices[0].Message.Content
	}
	return resp.StatusCode, resp.Header, text
}

// waitSpan waits for a span named name to be exported (the server span
// ends just after the response is written) and returns every span.
func waitSpan(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	t.Helper()
	var spans tracetest.SpanStubs
	testwait.Eventually(t, 10*time.Second, func() bool {
		spans = exp.GetSpans()
		return slices.ContainsFunc(spans, func(s tracetest.SpanStub) bool { return s.Name == name })
	}, "span %q (among %s)", name, testwait.Lazy(func() string { return fmt.Sprint(names(spans)) }))
	return spans
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// only returns the one span named name.
func only(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q, want 1 (all: %v)", len(found), name, names(spans))
	}
	return found[0]
}

func attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

const (
	inTrace    = "4bf92f3577b34da6a3ce929d0e0e4736"
	inParent   = "00f067aa0ba902b7"
	traceparen = "00-" + inTrace + "-" + inParent + "-01"
)

// TestTraceChatCompletion: a chat completion that arrives with a W3C
// traceparent is one span tree under it — the server span is the child of
// the caller's span, auth and inference its children, and policy, the
// ledger appends, queue, prefill and decode the inference's — named by the
// request id the client got, with the tenant id, model and token counts;
// the response names the server span (traceresponse).
func TestTraceChatCompletion(t *testing.T) {
	exp, tp := recorder(t)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Tracer: tp})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	code, hdr, _ := chatTraced(t, p, tok, "The quick brown fox", map[string]string{"traceparent": traceparen})
	if code != 200 {
		t.Fatalf("status %d, want 200", code)
	}
	spans := waitSpan(t, exp, "POST /v1/chat/completions")
	for _, s := range spans {
		if got := s.SpanContext.TraceID().String(); got != inTrace {
			t.Errorf("span %s in trace %s, want %s", s.Name, got, inTrace)
		}
	}
	srv := only(t, spans, "POST /v1/chat/completions")
	if got := srv.Parent.SpanID().String(); got != inParent || !srv.Parent.IsRemote() {
		t.Errorf("server span's parent %s (remote %v), want the caller's %s", got, srv.Parent.IsRemote(), inParent)
	}
	if srv.SpanKind != trace.SpanKindServer {
		t.Errorf("server span kind %v", srv.SpanKind)
	}
	if got, want := hdr.Get("traceresponse"), "00-"+inTrace+"-"+srv.SpanContext.SpanID().String()+"-01"; got != want {
		t.Errorf("traceresponse %q, want %q", got, want)
	}
	inf := only(t, spans, "inference")
	parentOf := map[string]string{"auth": srv.SpanContext.SpanID().String(), "admission": srv.SpanContext.SpanID().String(), "inference": srv.SpanContext.SpanID().String(),
		"policy": inf.SpanContext.SpanID().String(), "queue": inf.SpanContext.SpanID().String(),
		"prefill": inf.SpanContext.SpanID().String(), "decode": inf.SpanContext.SpanID().String()}
	for name, want := range parentOf {
		if got := only(t, spans, name).Parent.SpanID().String(); got != want {
			t.Errorf("%s's parent %s, want %s", name, got, want)
		}
	}
	ledgered := 0
	for _, s := range spans {
		if s.Name == "ledger.append" {
			ledgered++
			if s.Parent.SpanID() != inf.SpanContext.SpanID() {
				t.Errorf("ledger.append's parent %s, want inference %s", s.Parent.SpanID(), inf.SpanContext.SpanID())
			}
		}
	}
	if ledgered < 2 { // policy.decision, request.completed
		t.Errorf("%d ledger.append spans, want at least 2", ledgered)
	}
	// The engine's phases follow each other within the inference span.
	q, pf, dc := only(t, spans, "queue"), only(t, spans, "prefill"), only(t, spans, "decode")
	if q.EndTime.After(pf.StartTime) || pf.EndTime.After(dc.StartTime) || q.StartTime.Before(inf.StartTime) || dc.EndTime.After(inf.EndTime) {
		t.Errorf("phases out of order: queue %v–%v prefill %v–%v decode %v–%v within %v–%v",
			q.StartTime, q.EndTime, pf.StartTime, pf.EndTime, dc.StartTime, dc.EndTime, inf.StartTime, inf.EndTime)
	}
	for k, want := range map[attribute.Key]string{"cloison.request_id": hdr.Get("X-Request-Id"), "cloison.tenant": "victim", "cloison.model": platformtest.Model} {
		if v, _ := attr(inf, k); v.AsString() != want {
			t.Errorf("inference %s = %q, want %q", k, v.AsString(), want)
		}
	}
	if v, _ := attr(inf, "cloison.prompt_tokens"); v.AsInt64() < 1 {
		t.Errorf("prompt_tokens %v", v.AsInt64())
	}
	if v, _ := attr(inf, "cloison.completion_tokens"); v.AsInt64() < 1 {
		t.Errorf("completion_tokens %v", v.AsInt64())
	}
	if v, _ := attr(only(t, spans, "policy"), "cloison.allowed"); !v.AsBool() {
		t.Errorf("policy span not allowed")
	}
	for _, s := range spans {
		if s.Status.Code == codes.Error {
			t.Errorf("span %s failed: %v", s.Name, s.Status)
		}
	}
}

// TestTraceFailure: a refused request marks its spans failed with the
// error's code, not its message — a bad token fails auth, a prompt over the
// tenant's context fails admission with context_length_exceeded.
func TestTraceFailure(t *testing.T) {
	exp, tp := recorder(t)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Tracer: tp, Context: 64, Pages: 8})
	if code, _, _ := chatTraced(t, p, "not-a-token", "hello", nil); code != 401 {
		t.Fatalf("status %d, want 401", code)
	}
	spans := waitSpan(t, exp, "POST /v1/chat/completions")
	if a := only(t, spans, "auth"); a.Status.Code != codes.Error || a.Status.Description != string(cloison.CodeUnauthenticated) {
		t.Errorf("auth status %+v, want error %s", a.Status, cloison.CodeUnauthenticated)
	}
	exp.Reset()
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	if code, _, _ := chatTraced(t, p, tok, strings.Repeat("word ", 200), nil); code != 400 {
		t.Fatalf("status %d, want 400", code)
	}
	spans = waitSpan(t, exp, "POST /v1/chat/completions")
	// Refused from its length before it is tokenized: the admission span
	// fails, no inference span starts.
	if adm := only(t, spans, "admission"); adm.Status.Code != codes.Error || adm.Status.Description != "context_length_exceeded" {
		t.Errorf("admission status %+v, want error context_length_exceeded", adm.Status)
	}
	for _, sp := range spans {
		if sp.Name == "inference" {
			t.Errorf("an inference span for a prompt refused at admission")
		}
	}
}

// TestTraceSplitOneTrace: a disaggregated request is one trace across its
// two nodes, each with its own exporter. The decode node's transfer span
// (child of inference) is the parent of the prefill node's PrefillService
// span, under which the prefill node computes and sends; the decode node's
// transfer server records the stream as a child of that send.
func TestTraceSplitOneTrace(t *testing.T) {
	dexp, dtp := recorder(t)
	pexp, ptp := recorder(t)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Tracer: dtp, Split: &platformtest.Split{Tracer: ptp}})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	code, _, _ := chatTraced(t, p, tok, "Disaggregated prefill and decode", nil) // no traceparent: the decode node starts the trace
	if code != 200 {
		t.Fatalf("status %d, want 200", code)
	}
	if p.Prefill.Calls() != 1 {
		t.Fatalf("%d prefills, want 1", p.Prefill.Calls())
	}
	dspans := waitSpan(t, dexp, "POST /v1/chat/completions")
	pspans := waitSpan(t, pexp, "/cloison.prefill.v1.PrefillService/Prefill")
	srv := only(t, dspans, "POST /v1/chat/completions")
	if srv.Parent.IsValid() {
		t.Errorf("server span has parent %v without a traceparent", srv.Parent.SpanID())
	}
	tid := srv.SpanContext.TraceID()
	for _, s := range append(append(tracetest.SpanStubs{}, dspans...), pspans...) {
		if s.Name == "/cloison.prefill.v1.PrefillService/Attest" {
			continue // at start: a trace of its own
		}
		if s.SpanContext.TraceID() != tid {
			t.Errorf("span %s in trace %s, want %s", s.Name, s.SpanContext.TraceID(), tid)
		}
	}
	inf, tr := only(t, dspans, "inference"), only(t, dspans, "transfer")
	if tr.Parent.SpanID() != inf.SpanContext.SpanID() {
		t.Errorf("transfer's parent %s, want inference %s", tr.Parent.SpanID(), inf.SpanContext.SpanID())
	}
	if v, _ := attr(tr, "cloison.transfer_tokens"); v.AsInt64() < 1 {
		t.Errorf("transfer_tokens %d", v.AsInt64())
	}
	rpc := only(t, pspans, "/cloison.prefill.v1.PrefillService/Prefill")
	if rpc.Parent.SpanID() != tr.SpanContext.SpanID() || !rpc.Parent.IsRemote() {
		t.Errorf("PrefillService span's parent %s (remote %v), want the decode node's transfer %s", rpc.Parent.SpanID(), rpc.Parent.IsRemote(), tr.SpanContext.SpanID())
	}
	comp, send := only(t, pspans, "prefill.compute"), only(t, pspans, "transfer.send")
	if comp.Parent.SpanID() != rpc.SpanContext.SpanID() || send.Parent.SpanID() != rpc.SpanContext.SpanID() {
		t.Errorf("compute's parent %s, send's %s, want the PrefillService span %s", comp.Parent.SpanID(), send.Parent.SpanID(), rpc.SpanContext.SpanID())
	}
	recv := 0
	for _, s := range dspans {
		if strings.HasPrefix(s.Name, "/cloison.transfer.v1.") {
			recv++
			if s.Parent.SpanID() != send.SpanContext.SpanID() {
				t.Errorf("%s's parent %s, want the prefill node's transfer.send %s", s.Name, s.Parent.SpanID(), send.SpanContext.SpanID())
			}
		}
	}
	if recv == 0 {
		t.Errorf("no transfer server span on the decode node: %v", names(dspans))
	}
}

// TestTraceNoPromptText (property): whatever the prompt, no span of either
// node — name, attribute, status or event — holds its text or the
// completion's. Prompts are drawn from letters no identifier uses (no hex
// digits), so a hit is the text itself.
func TestTraceNoPromptText(t *testing.T) {
	dexp, dtp := recorder(t)
	pexp, ptp := recorder(t)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Tracer: dtp, Split: &platformtest.Split{Tracer: ptp}})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	word := rapid.StringOfN(rapid.RuneFrom([]rune("ghijklmnopqrstuvwxyz")), 6, 12, -1)
	rapid.Check(t, func(rt *rapid.T) {
		dexp.Reset()
		pexp.Reset()
		prompt := strings.Join(rapid.SliceOfN(word, 2, 8).Draw(rt, "words"), " ")
		code, _, completion := chatTraced(t, p, tok, prompt, map[string]string{"traceparent": traceparen})
		if code != 200 {
			rt.Fatalf("status %d, want 200", code)
		}
		spans := append(waitSpan(t, dexp, "POST /v1/chat/completions"), waitSpan(t, pexp, "/cloison.prefill.v1.PrefillService/Prefill")...)
		secrets := append([]string{prompt}, strings.Fields(prompt)...)
		if len(strings.TrimSpace(completion)) >= 6 {
			secrets = append(secrets, strings.TrimSpace(completion))
		}
		for _, s := range spans {
			texts := []string{s.Name, s.Status.Description}
			for _, a := range s.Attributes {
				texts = append(texts, a.Value.String())
			}
			for _, e := range s.Events {
				texts = append(texts, e.Name)
				for _, a := range e.Attributes {
					texts = append(texts, a.Value.String())
				}
			}
			for _, txt := range texts {
				for _, sec := range secrets {
					if strings.Contains(txt, sec) {
						rt.Fatalf("span %s carries %q (in %q)", s.Name, sec, txt)
					}
				}
			}
		}
	})
}

// TestTraceOffByDefault: a node built without a tracer records nothing —
// not through the global provider either — and answers no traceresponse,
// even to a request that carries a traceparent.
func TestTraceOffByDefault(t *testing.T) {
	exp, tp := recorder(t)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp) // a node that fell back on the global provider would record here
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Split: &platformtest.Split{}})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	// The request goes through a server of this test's own, whose Close
	// returns once every handler has: a server span would have ended then.
	hs := httptest.NewServer(p.Server.Handler())
	p.URL = hs.URL
	code, hdr, _ := chatTraced(t, p, tok, "nothing recorded", map[string]string{"traceparent": traceparen})
	if code != 200 {
		t.Fatalf("status %d, want 200", code)
	}
	hs.Close()
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("%d spans recorded with tracing off: %v", len(spans), names(spans))
	}
	if h := hdr.Get("traceresponse"); h != "" {
		t.Errorf("traceresponse %q with tracing off", h)
	}
}

// TestTraceGRPC: a gRPC generation whose metadata carries a traceparent is
// traced under it as the HTTP route is: the call's server span is the
// caller's child, auth and inference (with the request id the call was
// given) inside it.
func TestTraceGRPC(t *testing.T) {
	exp, tp := recorder(t)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Tracer: tp})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	conn, ctx := p.GRPC(t)
	client := inferencev1.NewInferenceServiceClient(conn)
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok, "traceparent", traceparen)
	mt := int64(4)
	var hdr metadata.MD
	st, err := client.Generate(actx, &inferencev1.GenerateRequest{Model: platformtest.Model, MaxTokens: &mt,
		Prompt: &inferencev1.GenerateRequest_Chat{Chat: &inferencev1.ChatMessages{Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "Over gRPC"}}}}}, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	const method = "/cloison.inference.v1.InferenceService/Generate"
	spans := waitSpan(t, exp, method)
	srv := only(t, spans, method)
	if srv.Parent.SpanID().String() != inParent || srv.SpanContext.TraceID().String() != inTrace {
		t.Errorf("server span %s/%s parent %s, want trace %s parent %s", srv.SpanContext.TraceID(), srv.SpanContext.SpanID(), srv.Parent.SpanID(), inTrace, inParent)
	}
	inf := only(t, spans, "inference")
	for _, name := range []string{"auth", "inference"} {
		if got := only(t, spans, name).Parent.SpanID(); got != srv.SpanContext.SpanID() {
			t.Errorf("%s's parent %s, want the call's %s", name, got, srv.SpanContext.SpanID())
		}
	}
	ids := hdr.Get(api.RequestIDKey)
	if v, _ := attr(inf, "cloison.request_id"); len(ids) != 1 || v.AsString() != ids[0] {
		t.Errorf("inference request id %q, want the call's %v", v.AsString(), ids)
	}
	if v, _ := attr(srv, "cloison.request_id"); len(ids) != 1 || v.AsString() != ids[0] {
		t.Errorf("server span request id %q, want %v", v.AsString(), ids)
	}
}
