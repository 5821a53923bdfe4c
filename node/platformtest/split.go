package platformtest

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/prefill"
)

// PrefillNode is a split platform's prefill node.
type PrefillNode struct {
	Pool        *isolation.Pool
	Attestation attest.Attestation // its own, as it publishes it
	node        *prefill.Node
}

// MetricsHandler serves the prefill node's Prometheus metrics.
func (n *PrefillNode) MetricsHandler() http.Handler { return n.node.MetricsHandler() }

// Calls is the number of prefills the node was asked for.
func (n *PrefillNode) Calls() int { return n.node.Calls() }

// startSplit starts the prefill node (its own model instance, pool, arena,
// PrefillService: prefill.Open) and returns the decode node's part of
// the platform's spec (node.DecodeSpec: transfer listener, prefill peers).
// Unless o.Split.SkipAttestation, a pool that cannot hold the served
// context stops the prefill node here, or the decode node in node.Open, with
// attest.ErrFailed, as cloisond refuses to start.
func startSplit(t testing.TB, o Options, flt faults, ggufBytes []byte, served int, db *pgxpool.Pool) (*PrefillNode, *node.DecodeSpec, error) {
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

	// The prefill node: its own model instance, pool and arena; the
	// tenants read from the platform's database.
	pln := listen(t)
	p, err := prefill.Open(context.Background(), prefill.Spec{DB: db, Keys: keys, Model: node.ModelFile{Bytes: ggufBytes, Name: Model},
		Capacity: node.Capacity{Pool: isolation.Config{Pages: sp.PrefillPages, PageTokens: 16}, ServedContext: sp.ServedContext, Labels: sp.Labels},
		Listener: pln, ServerTLS: prefillTLS.server, ClientTLS: prefillTLS.client,
		AttestUnsafe: flt.attest, Unsafe: flt.engine, SenderUnsafe: flt.sender, Logger: quiet, Tracer: sp.Tracer})
	if err != nil {
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
	d := &node.DecodeSpec{Listener: listen(t), Peers: []string{pln.Addr().String()}, ServerTLS: decodeTLS.server, ClientTLS: decodeTLS.client,
		Keys: keys, ReceiverUnsafe: flt.recv, AttestUnsafe: flt.attest}
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
