package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	transferv1 "github.com/cloison/cloison/api/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// A decode node's transfer server serves no stream before what it reports
// refusals to exists (issue 12 item 15: it served at once, and a refusal
// before the API server was built dereferenced a nil server). Before serve,
// a prefill node's stream gets no answer and no hook runs; after, the same
// junk is refused and reported. A certificate of the wrong role for this
// node does not start it.
func TestDecodeServesTransfersOnlyOnceBound(t *testing.T) {
	c := newCluster(t, "prefill-1", "decode")
	cfg := config{stateDir: t.TempDir(), roles: roleConfig{role: roleDecode, tlsCA: c.ca, tlsCert: filepath.Join(c.dir, "decode.pem"),
		tlsKey: filepath.Join(c.dir, "decode-key.pem"), clusterKey: c.clusterKey, transferAddr: "127.0.0.1:0", prefillPeers: "127.0.0.1:1", prefillTimeout: time.Minute}}
	pool, err := isolation.NewPool(isolation.Config{Pages: 4, PageTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	arena, err := be.NewArena(kernels.ArenaConfig{Pages: 4, PageTokens: 16, Layers: 1, KVHeads: 1, HeadDim: 4})
	if err != nil {
		t.Fatal(err)
	}
	lm := &loadedModel{}
	wrong := cfg
	wrong.roles.tlsCert, wrong.roles.tlsKey = filepath.Join(c.dir, "prefill-1.pem"), filepath.Join(c.dir, "prefill-1-key.pem")
	if _, err := startDecode(wrong, lm, pool, arena, slog.Default()); err == nil {
		t.Fatal("got a decode node started with a prefill certificate, want it refused")
	}
	d, err := startDecode(cfg, lm, pool, arena, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()

	_, clientTLS, err := (&roleConfig{role: rolePrefill, tlsCA: c.ca, tlsCert: filepath.Join(c.dir, "prefill-1.pem"),
		tlsKey: filepath.Join(c.dir, "prefill-1-key.pem")}).tlsConfigs(roleDecode)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS.ServerName = "127.0.0.1"
	conn, err := grpc.NewClient(d.ln.Addr().String(), transfer.DialOptions(clientTLS)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	junk := func(wait time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		st, err := transfer.GRPC(conn).Open(ctx)
		if err != nil {
			return err
		}
		_ = st.Send(&transferv1.Frame{Kind: &transferv1.Frame_Chunk{Chunk: &transferv1.Chunk{Data: []byte("junk")}}})
		_, err = st.CloseAndRecv()
		return err
	}
	rep := &reporter{}
	// Before serve: the stream waits (the deadline ends it) and nothing is
	// reported; with the old wiring it reached a hook bound to nothing.
	if err := junk(time.Second); err == nil {
		t.Fatal("got a receipt before serve, want no answer")
	}
	d.serve(rep)
	if err := junk(30 * time.Second); err == nil {
		t.Fatal("got a receipt for junk, want a refusal")
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.failures) != 1 || !rep.failures[0].Unauthenticated || rep.unauth != 1 {
		t.Fatalf("got %+v and %d counted after serve, want one unauthenticated refusal", rep.failures, rep.unauth)
	}
}

type reporter struct {
	mu       sync.Mutex
	failures []transfer.Failure
	unauth   int
}

func (r *reporter) RecordTransferFailure(f transfer.Failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, f)
}

func (r *reporter) CountUnauthenticatedTransfer(string, transfer.Reason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unauth++
}
