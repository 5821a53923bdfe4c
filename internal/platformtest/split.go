package platformtest

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api/prefillrpc"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// PrefillNode is a split platform's prefill node.
type PrefillNode struct {
	Pool        *isolation.Pool
	Attestation attest.Attestation // its own, as it publishes it
	calls       atomic.Int64
}

// Calls is the number of prefills the node was asked for.
func (n *PrefillNode) Calls() int { return int(n.calls.Load()) }

// startSplit starts the prefill node (model instance, pool, arena,
// PrefillService) and the decode node's transfer server, and returns the
// decode engine's Remote and its attestation with the prefill node's
// checked in (attest.Prefill). Unless o.Split.SkipAttestation, a pool
// that cannot hold the served context stops it with attest.ErrFailed,
// as cloisond refuses to start.
func startSplit(t testing.TB, o Options, flt faults, ggufBytes []byte, kv *isolation.Pool, arena kernels.Arena, att attest.Attestation,
	onFailure func(transfer.Failure)) (*PrefillNode, *engine.Remote, attest.Attestation, error) {
	sp := *o.Split
	if sp.PrefillPages == 0 {
		sp.PrefillPages = o.Pages
	}
	if sp.ServedContext == 0 {
		sp.ServedContext = att.ServedContext // both nodes serve the same context
	}
	digest := transfer.Digest(sha256.Sum256(ggufBytes))
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
	issue := func(role, peerRole string) nodeTLS {
		c, err := ca.IssueRole(role, role, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return nodeTLS{server: pki.RequirePeerRole(pki.ServerConfig(c, ca.Pool()), peerRole),
			client: pki.RequirePeerRole(pki.ClientConfig(c, ca.Pool(), ""), peerRole)}
	}
	decodeTLS, prefillTLS := issue(pki.RoleDecode, pki.RolePrefill), issue(pki.RolePrefill, pki.RoleDecode)

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
	pn := &PrefillNode{}
	pn.Attestation, err = attest.Capacity(attest.Config{ModelContext: m.Context, ServedContext: sp.ServedContext, PoolPages: sp.PrefillPages, PageTokens: 16})
	if err != nil && !sp.SkipAttestation {
		return nil, nil, att, err // the prefill node refuses to start
	}
	if pn.Pool, err = isolation.NewPool(isolation.Config{Pages: sp.PrefillPages, PageTokens: 16}); err != nil {
		t.Fatal(err)
	}
	for _, id := range o.Tenants {
		if err := pn.Pool.AddTenant(isolation.TenantConfig{ID: id, Tier: isolation.TierShared, Zeroing: isolation.ZeroCrossTenant}); err != nil {
			t.Fatal(err)
		}
	}
	parena, err := be.NewArena(m.ArenaConfig(sp.PrefillPages, 16))
	if err != nil {
		t.Fatal(err)
	}
	sender, err := transfer.NewSender(transfer.SenderConfig{Pool: pn.Pool, Arena: parena, Keys: keys, Model: digest, Unsafe: flt.sender})
	if err != nil {
		t.Fatal(err)
	}
	runner := &engine.PrefillRunner{Model: m, Pool: pn.Pool, Arena: parena, Sender: sender, Unsafe: flt.engine}
	var mu sync.Mutex // one prefill at a time, as cloisond runs them
	svc := prefillrpc.NewServer(func(ctx context.Context, d transfer.Dialer, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
		pn.calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		runner.Dialer = d
		return runner.Prefill(ctx, tenant, req, tokens, to)
	}, prefillTLS.client, nil)
	t.Cleanup(svc.Close)
	svc.SetAttestation(pn.Attestation, hex.EncodeToString(digest[:]))
	paddr := serve(t, prefillTLS, func(g *grpc.Server) { prefillrpc.Register(g, svc) })

	// The decode node: the transfer server into the platform's pool.
	recv, err := transfer.NewReceiver(transfer.ReceiverConfig{Pool: kv, Arena: arena, Keys: keys, Model: digest, OnVerificationFailed: onFailure,
		Unsafe: flt.recv})
	if err != nil {
		t.Fatal(err)
	}
	taddr := serve(t, decodeTLS, func(g *grpc.Server) { transfer.Register(g, recv) })
	client, err := prefillrpc.NewClient([]string{paddr}, taddr, decodeTLS.client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	peers, err := client.Attest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	att, capacity, err := attest.Prefill(att, hex.EncodeToString(digest[:]), peers)
	if err != nil {
		if !sp.SkipAttestation {
			return nil, nil, att, err // the decode node refuses to start
		}
		// Skipped (tests only): the engine starts as if it had passed;
		// the published attestation keeps each peer's verdict.
		att.OK, att.Reason = true, ""
	}
	return pn, &engine.Remote{Receiver: recv, Prefill: client.Prefill, Capacity: capacity, Unsafe: flt.engine}, att, nil
}

type nodeTLS struct{ server, client *tls.Config }

// serve runs a gRPC server with mutual TLS on loopback until the test ends.
func serve(t testing.TB, c nodeTLS, register func(*grpc.Server)) string {
	g := grpc.NewServer(transfer.ServerOptions(c.server)...)
	register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}
