package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// accessLines parses the "access" lines of a JSON log.
func accessLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		if m["msg"] == "access" {
			out = append(out, m)
		}
	}
	return out
}

// TestAccessLog: one JSON line per HTTP request and per gRPC call, with the
// request id the client was answered with, the tenant, the route pattern or
// method, the status or code, the latency and, for generations, the token
// counts — and no prompt or completion text: neither the prompt's word nor
// the completion appears anywhere in the log. Probes log at debug, below
// the logger's info level.
func TestAccessLog(t *testing.T) {
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"},
		API: func(c *api.Config) { c.Logger = log }})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	const secret = "quokka"
	prompt := strings.Repeat(secret+" ", 12)

	type want struct {
		transport, route, status string
		tokens                   bool
	}
	var wants []want
	var ids []string
	var usage struct {
		Usage struct {
			Prompt     float64 `json:"prompt_tokens"`
			Completion float64 `json:"completion_tokens"`
		} `json:"usage"`
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	var completion string
	for _, stream := range []bool{false, true} {
		body, _ := json.Marshal(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 5, "temperature": 0, "stream": stream})
		resp, b := send(t, "POST", p.URL+"/v1/completions", tok, string(body))
		if resp.StatusCode != 200 {
			t.Fatalf("got %d %s, want 200", resp.StatusCode, b)
		}
		if !stream {
			if err := json.Unmarshal(b, &usage); err != nil || usage.Usage.Prompt == 0 || usage.Usage.Completion == 0 || len(usage.Choices) != 1 {
				t.Fatalf("usage of %s: %v", b, err)
			}
			if completion = usage.Choices[0].Text; len(completion) < 4 {
				t.Fatalf("got completion %q, want 4 bytes or more to look for in the log", completion)
			}
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
		wants = append(wants, want{"http", "POST /v1/completions", "200", true})
	}
	resp, _ := send(t, "GET", p.URL+"/v1/models", "", "")
	ids, wants = append(ids, resp.Header.Get("X-Request-Id")), append(wants, want{"http", "GET /v1/models", "401", false})
	resp, _ = send(t, "GET", p.URL+"/no/such/"+secret, tok, "")
	ids, wants = append(ids, resp.Header.Get("X-Request-Id")), append(wants, want{"http", "unmatched", "404", false})
	if resp, _ := send(t, "GET", p.URL+"/healthz", "", ""); resp.StatusCode != 200 {
		t.Fatalf("healthz: got %d, want 200", resp.StatusCode)
	}

	// gRPC: a generation and a call without a token.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gs := p.Server.GRPCServer(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := inferencev1.NewInferenceServiceClient(conn)
	max := int64(5)
	var hdr metadata.MD
	st, err := c.Generate(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok),
		&inferencev1.GenerateRequest{Model: platformtest.Model, Prompt: &inferencev1.GenerateRequest_Text{Text: prompt}, MaxTokens: &max}, grpc.Header(&hdr))
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
	ids, wants = append(ids, hdr.Get(api.RequestIDKey)[0]), append(wants, want{"grpc", inferencev1.InferenceService_Generate_FullMethodName, "OK", true})
	hdr = nil
	_, err = c.ListModels(ctx, &inferencev1.ListModelsRequest{}, grpc.Header(&hdr))
	if err == nil {
		t.Fatal("ListModels without a token succeeded")
	}
	// Refused before its message is read, the call's request id comes in
	// its status (google.rpc.RequestInfo), not in a header.
	refusedID := ""
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RequestInfo); ok {
			refusedID = ri.GetRequestId()
		}
	}
	ids, wants = append(ids, refusedID), append(wants, want{"grpc", inferencev1.InferenceService_ListModels_FullMethodName, "Unauthenticated", false})
	gs.GracefulStop() // every call's line is written

	out := logs.String()
	if strings.Contains(out, secret) || strings.Contains(out, completion) {
		t.Fatalf("the log holds prompt or completion text:\n%s", out)
	}
	lines := accessLines(t, out)
	if len(lines) != len(wants) {
		t.Fatalf("got %d access lines, want %d (the probe at debug is not written):\n%s", len(lines), len(wants), out)
	}
	byID := map[string]map[string]any{}
	for _, l := range lines {
		id, _ := l["request_id"].(string)
		if !strings.HasPrefix(id, "req-") {
			t.Fatalf("access line without a request id: %v", l)
		}
		byID[id] = l
	}
	for i, w := range wants {
		l := byID[ids[i]]
		if l == nil {
			t.Fatalf("no access line for request %s (%s %s)", ids[i], w.transport, w.route)
		}
		route, status := l["route"], l["status"]
		if w.transport == "grpc" {
			route, status = l["method"], l["code"]
		}
		if l["transport"] != w.transport || route != w.route || toString(status) != w.status {
			t.Errorf("got %v, want %s %s %s", l, w.transport, w.route, w.status)
		}
		if lat, ok := l["latency_seconds"].(float64); !ok || lat <= 0 {
			t.Errorf("got latency %v in %v, want > 0 seconds", l["latency_seconds"], l)
		}
		if w.status == "200" || w.status == "OK" {
			if l["tenant"] != "victim" {
				t.Errorf("got tenant %v, want victim: %v", l["tenant"], l)
			}
		}
		if w.tokens {
			if pt, ct := l["prompt_tokens"], l["completion_tokens"]; pt != usage.Usage.Prompt || ct != usage.Usage.Completion {
				t.Errorf("got prompt %v and completion %v tokens, want %v and %v (the answer's usage): %v", pt, ct, usage.Usage.Prompt, usage.Usage.Completion, l)
			}
		} else if _, ok := l["prompt_tokens"]; ok {
			t.Errorf("token counts on a request that generated nothing: %v", l)
		}
	}
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.Itoa(int(v))
	}
	return ""
}
