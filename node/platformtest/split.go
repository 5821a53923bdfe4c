package platformtest

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cloison/cloison/api/prefillrpc"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/node"
)

// PrefillNode is a split platform's prefill node.
type PrefillNode struct {
	Pool        *isolation.Pool
	Attestation attest.Attestation // its own, as it publishes it
	node        *node.Prefill
}

// MetricsHandler serves the prefill node's Prometheus metrics.
func (n *PrefillNode) MetricsHandler() http.Handler { return n.node.MetricsHandler() }

// Calls is the number of prefills the node was asked for.
func (n *PrefillNode) Calls() int { return n.node.Calls() }

// startSplit starts the prefill node (its own model instance, pool, arena,
// PrefillService: node.NewPrefill) and returns the decode node's part of
// the platform's assembly (node.Decode: transfer listener, prefill client).
// Unless o.Split.SkipAttestation, a pool that cannot hold the served
// context stops the prefill node here, or the decode node in node.New, with
// attest.ErrFailed, as cloisond refuses to start.
func startSplit(t testing.TB, o Options, flt faults, ggufBytes []byte, served int, dm node.Model, tenants node.TenantSource) (*PrefillNode, *node.Decode, error) {
	sp := *o.Split
	if sp.PrefillPages == 0 {
		sp.PrefillPages = o.Pages
	}
	if sp.ServedContext == 0 {
		sp.ServedContext = served // both nodes serve the same context
	}
	key, err := transfer.NewKey("platformtest")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := transfer.NewKeyRing(key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA("platformtest")
	if err != nil {
		t.Fatal(err)
	}
	// Role-bound certificates, each node accepting only the other role (as
	// cloisond configures them).
	issue := func(role, peerRole string, labels pki.Labels) nodeTLS {
		c, err := ca.IssueNode(role, role, labels, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return nodeTLS{server: pki.RequirePeerRole(pki.ServerConfig(c, ca.Pool()), peerRole),
			client: pki.RequirePeerRole(pki.ClientConfig(c, ca.Pool(), ""), peerRole)}
	}
	// The prefill node's certificate names the labels it attests (the
	// decode node checks them: attest.Prefill).
	decodeTLS := issue(pki.RoleDecode, pki.RolePrefill, pki.Labels{Region: o.Labels.Region, Tier: o.Labels.Tier})
	prefillTLS := issue(pki.RolePrefill, pki.RoleDecode, pki.Labels{Region: sp.Labels.Region, Tier: sp.Labels.Tier})

	// The prefill node: its own model instance, pool and arena.
	f, err := gguf.Parse(ggufBytes)
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	m, err := model.Load(be, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	pln := listen(t)
	p, err := node.NewPrefill(context.Background(), node.PrefillConfig{Model: node.Model{Backend: be, Model: m, Tokenizer: dm.Tokenizer, Name: dm.Name, Digest: dm.Digest},
		Capacity: node.Capacity{Pool: isolation.Config{Pages: sp.PrefillPages, PageTokens: 16}, ServedContext: sp.ServedContext, Labels: sp.Labels},
		Tenants:  tenants, Keys: keys, Listener: pln, ServerOptions: transfer.ServerOptions(prefillTLS.server), ClientTLS: prefillTLS.client,
		AttestUnsafe: flt.attest, Unsafe: flt.engine, SenderUnsafe: flt.sender, Logger: quiet, Tracer: sp.Tracer})
	if err != nil {
		pln.Close()
		return nil, nil, err // the prefill node refuses to start
	}
	go func() { _ = p.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})

	// The decode node's part: its transfer server (served from node.Start,
	// into the platform's pool) and its prefill client.
	tln := listen(t)
	client, err := prefillrpc.NewClient([]string{pln.Addr().String()}, tln.Addr().String(), decodeTLS.client)
	if err != nil {
		t.Fatal(err)
	}
	d := &node.Decode{Listener: tln, ServerOptions: transfer.ServerOptions(decodeTLS.server), Keys: keys, Client: client, ReceiverUnsafe: flt.recv, AttestUnsafe: flt.attest}
	return &PrefillNode{Pool: p.Pool, Attestation: p.Attestation, node: p}, d, nil
}

// quiet discards the prefill node's per-request log lines.
var quiet = slog.New(slog.DiscardHandler)

// listen is a loopback listener.
func listen(t testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

type nodeTLS struct{ server, client *tls.Config }
