package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestReceiptsOnEveryTransport: an acknowledged request carries its
// receipt — a JSON answer in the Cloison-Receipt header, a stream in the
// trailer of that name and in an SSE comment before [DONE], the Responses
// API likewise, gRPC Generate in the cloison-receipt trailer — and each
// opens with the published verifier key alone (GET
// /compliance/v1/tlog/key, no token) and binds the leaf hash of the
// request.completed entry the ledger actually holds.
func TestReceiptsOnEveryTransport(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	code, key := get(t, p.URL+"/compliance/v1/tlog/key", "", "")
	if code != 200 {
		t.Fatalf("verifier key: %d %s", code, key)
	}
	vk := strings.TrimSpace(string(key))
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	ctx := context.Background()

	// check opens enc and holds it to the ledger's request.completed of id.
	check := func(how, enc string, id cloison.RequestID) {
		t.Helper()
		if enc == "" {
			t.Fatalf("%s: no receipt", how)
		}
		r, err := audit.OpenReceipt(enc, vk)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if r.Request != id || r.Tenant != "victim" || r.Kind != audit.KindRequestCompleted || !r.Deadline.Equal(r.Time.Add(audit.MaxMergeDelay)) {
			t.Fatalf("%s: receipt %+v for request %s", how, r, id)
		}
		if err := p.Ledger.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		found := false
		if err := p.Ledger.Scan(ctx, 1, 0, func(rec audit.Record) error {
			if rec.Kind == audit.KindRequestCompleted && audit.LeafHash(rec) == r.Leaf {
				found = true
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Fatalf("%s: the receipt's leaf is no request.completed entry of the ledger", how)
		}
	}

	chat := `{"model":"` + platformtest.Model + `","messages":[{"role":"user","content":"hello"}],"max_tokens":4`
	resp, b := request(t, "POST", p.URL+"/v1/chat/completions", tok, chat+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	check("chat JSON header", resp.Header.Get(api.ReceiptHeader), cloison.RequestID(resp.Header.Get("X-Request-Id")))

	resp, b = request(t, "POST", p.URL+"/v1/chat/completions", tok, chat+`,"stream":true}`)
	if resp.StatusCode != 200 || resp.Header.Get(api.ReceiptHeader) != "" {
		t.Fatalf("chat stream: %d, header receipt %q", resp.StatusCode, resp.Header.Get(api.ReceiptHeader))
	}
	id := cloison.RequestID(resp.Header.Get("X-Request-Id"))
	trailer := resp.Trailer.Get(api.ReceiptHeader)
	check("chat stream trailer", trailer, id)
	comment := ""
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, ": cloison-receipt "); ok {
			comment = v
		}
	}
	if comment != trailer || !strings.HasSuffix(string(b), ": cloison-receipt "+trailer+"\n\ndata: [DONE]\n\n") {
		t.Fatalf("chat stream: SSE receipt %q, trailer %q; body ends %q", comment, trailer, b[max(0, len(b)-200):])
	}

	resp, b = request(t, "POST", p.URL+"/v1/responses", tok, `{"model":"`+platformtest.Model+`","input":"hello","max_output_tokens":4}`)
	if resp.StatusCode != 200 {
		t.Fatalf("responses: %d %s", resp.StatusCode, b)
	}
	check("responses JSON header", resp.Header.Get(api.ReceiptHeader), cloison.RequestID(resp.Header.Get("X-Request-Id")))
	resp, b = request(t, "POST", p.URL+"/v1/responses", tok, `{"model":"`+platformtest.Model+`","input":"hello","max_output_tokens":4,"stream":true}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "\n: cloison-receipt "+resp.Trailer.Get(api.ReceiptHeader)+"\n\n") {
		t.Fatalf("responses stream: %d, trailer %q, body %s", resp.StatusCode, resp.Trailer.Get(api.ReceiptHeader), b)
	}
	check("responses stream trailer", resp.Trailer.Get(api.ReceiptHeader), cloison.RequestID(resp.Header.Get("X-Request-Id")))

	conn, gctx := p.GRPC(t)
	gctx = metadata.AppendToOutgoingContext(gctx, "authorization", tok)
	maxTok := int64(4)
	st, err := inferencev1.NewInferenceServiceClient(conn).Generate(gctx, &inferencev1.GenerateRequest{Model: platformtest.Model,
		Prompt: &inferencev1.GenerateRequest_Text{Text: "hello"}, MaxTokens: &maxTok})
	if err != nil {
		t.Fatal(err)
	}
	var final *inferencev1.Final
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f := m.GetFinal(); f != nil {
			final = f
		}
	}
	rcpt := st.Trailer().Get(api.ReceiptKey)
	if final == nil || len(rcpt) != 1 {
		t.Fatalf("gRPC: final %v, receipt trailer %q", final, rcpt)
	}
	check("gRPC trailer", rcpt[0], cloison.RequestID(final.GetRequestId()))

	// A refused request is acknowledged as nothing: no receipt.
	resp, _ = request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"nope","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode == http.StatusOK || resp.Header.Get(api.ReceiptHeader) != "" {
		t.Fatalf("refused request: %d with receipt %q", resp.StatusCode, resp.Header.Get(api.ReceiptHeader))
	}
}
