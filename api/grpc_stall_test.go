package api_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/node/platformtest"
)

// A gRPC client that opens a generation and never reads it (its
// flow-control window fills) is cut off after the send timeout: the
// generation is cancelled and ledgered, and the tenant's stream slot comes
// back (before, Send blocked until the client went away, holding the slot:
// a reader that stalls could hold every slot).
func TestGRPCStalledReaderCut(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{API: func(c *api.Config) {
		c.MaxStreamsPerTenant = 1
		c.Streams.SendTimeout = 300 * time.Millisecond
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gs := p.Server.GRPCServer(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	// The smallest windows gRPC allows, and no BDP growth: a client that
	// does not read holds the server after 64 KiB.
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := inferencev1.NewInferenceServiceClient(conn)
	from := head(t, p)
	const maxTokens = 3000
	stalled, err := c.Generate(bearer(t, p, "victim"), &inferencev1.GenerateRequest{Model: platformtest.Model, MaxTokens: ptr(int64(maxTokens)),
		Logprobs: true, TopLogprobs: 20, Prompt: &inferencev1.GenerateRequest_Text{Text: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = stalled // never read

	var done *audit.RequestCompleted
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, r := range rows(t, p, from) {
			if r.Kind != audit.KindRequestCompleted || r.Tenant != "victim" {
				continue
			}
			env, err := audit.DecodeEnvelope(r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := env.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			done = pl.(*audit.RequestCompleted)
		}
		return done != nil
	}, "a request.completed for the stalled generation (it is cut off and ledgered)")
	if done.Status != cloison.CodeCanceled || done.CompletionTokens >= maxTokens {
		t.Fatalf("got status %q after %d completion tokens, want %s before %d", done.Status, done.CompletionTokens, cloison.CodeCanceled, maxTokens)
	}
	// The slot is back: the same tenant, at one stream at most, is served.
	st, err := c.Generate(bearer(t, p, "victim"), &inferencev1.GenerateRequest{Model: platformtest.Model, MaxTokens: ptr(int64(2)),
		Prompt: &inferencev1.GenerateRequest_Text{Text: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("the next generation: %v, want served", err)
		}
		if m.GetFinal() != nil {
			break
		}
	}
}
