package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/transfer/pki"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// testModel is a small random llama model on the CPU reference backend, and
// its digest (SHA-256 of the GGUF bytes, as a node would compute it).
func testModel(t testing.TB) (*model.Model, Digest) {
	t.Helper()
	w, err := synth.Random(synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, Context: 512, DType: gguf.F32, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(kernels.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m, err := model.Load(b, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, sha256.Sum256(buf.Bytes())
}

// node is one process's KV memory: a pool and an arena.
type node struct {
	pool  *isolation.Pool
	arena kernels.Arena
}

func newNode(t testing.TB, b kernels.Backend, ac kernels.ArenaConfig, tenants ...cloison.TenantID) *node {
	t.Helper()
	p, err := isolation.NewPool(isolation.Config{Pages: ac.Pages, PageTokens: ac.PageTokens})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tenants {
		if err := p.AddTenant(isolation.TenantConfig{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := b.NewArena(ac)
	if err != nil {
		t.Fatal(err)
	}
	return &node{pool: p, arena: a}
}

func (n *node) check(t testing.TB) {
	t.Helper()
	if err := n.pool.Check(); err != nil {
		t.Fatal(err)
	}
}

// scrub does the driver's scrub step and returns how many pages it zeroed.
func (n *node) scrub(t testing.TB) int {
	t.Helper()
	work := n.pool.ScrubWork()
	if err := n.arena.ZeroPages(work); err != nil {
		t.Fatal(err)
	}
	if err := n.pool.ConfirmScrub(work); err != nil {
		t.Fatal(err)
	}
	return len(work)
}

// forward runs one step of toks at pos for lease: Write, BlockTable, Forward.
func (n *node) forward(t testing.TB, m *model.Model, l isolation.Lease, pos int, toks []int32) []float32 {
	t.Helper()
	if err := n.pool.Write(l, len(toks)); err != nil {
		t.Fatal(err)
	}
	return n.run(t, m, l, pos, toks)
}

// run is forward for positions the pool already recorded.
func (n *node) run(t testing.TB, m *model.Model, l isolation.Lease, pos int, toks []int32) []float32 {
	t.Helper()
	bt, err := n.pool.BlockTable(l, pos+len(toks))
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(n.arena, []model.Seq{{Table: bt, Pos: pos, Tokens: toks}}, false)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func prompt(n int, seed int32) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = 3 + (seed*31+int32(i)*17)%290
	}
	return p
}

func keyRing(t testing.TB, id string, older ...Key) (*KeyRing, Key) {
	t.Helper()
	k, err := NewKey(id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewKeyRing(k, older...)
	if err != nil {
		t.Fatal(err)
	}
	return r, k
}

// cluster is a decode node serving Transfer over gRPC with mutual TLS on
// loopback, and the TLS material of the cluster.
type cluster struct {
	ca     *pki.CA
	addr   string
	server *grpc.Server
}

// serveGRPC serves r as a decode node: a decode-role certificate, and only
// prefill-role clients accepted (as cloisond configures it).
func serveGRPC(t testing.TB, r Service) *cluster {
	t.Helper()
	ca, err := pki.NewCA("cloison-test")
	if err != nil {
		t.Fatal(err)
	}
	return serveGRPCAs(t, r, ca, pki.RoleDecode)
}

// serveGRPCAs serves r with a certificate of role (the test of a node
// serving in the wrong role).
func serveGRPCAs(t testing.TB, r Service, ca *pki.CA, role string) *cluster {
	t.Helper()
	cert, err := ca.IssueRole(role+"-0", role, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(ServerOptions(pki.RequirePeerRole(pki.ServerConfig(cert, ca.Pool()), pki.RolePrefill))...)
	Register(s, r)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return &cluster{ca: ca, addr: ln.Addr().String(), server: s}
}

// dial connects a prefill node whose certificate ca signed.
func (c *cluster) dial(t testing.TB, ca *pki.CA) Dialer {
	t.Helper()
	return c.dialAs(t, ca, "prefill-0", pki.RolePrefill)
}

// dialAs connects a node named name with a certificate of role that ca
// signed; like a prefill node, it accepts only a decode-role server.
func (c *cluster) dialAs(t testing.TB, ca *pki.CA, name, role string) Dialer {
	t.Helper()
	cert, err := ca.IssueRole(name, role, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(c.addr, DialOptions(pki.RequirePeerRole(pki.ClientConfig(cert, c.ca.Pool(), "127.0.0.1"), pki.RoleDecode))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return GRPC(conn)
}

// tamperDialer wraps the streams a Dialer opens: every frame the sender sends
// goes through fn, which returns the frames to put on the wire instead (a
// faulty or malicious prefill node, or a broken network path).
type tamperDialer struct {
	d  Dialer
	fn func(i int, f *transferv1.Frame) []*transferv1.Frame
}

func (td tamperDialer) Open(ctx context.Context) (Stream, error) {
	st, err := td.d.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &tamperStream{Stream: st, fn: td.fn}, nil
}

type tamperStream struct {
	Stream
	fn func(i int, f *transferv1.Frame) []*transferv1.Frame
	i  int
}

func (s *tamperStream) Send(f *transferv1.Frame) error {
	// Tamper with a copy: the sender's frames are its own.
	out := s.fn(s.i, proto.Clone(f).(*transferv1.Frame))
	s.i++
	for _, g := range out {
		if err := s.Stream.Send(g); err != nil {
			return err
		}
	}
	return nil
}

// hook records the receiver's verification failures.
type hook struct {
	mu sync.Mutex
	fs []Failure
}

func (h *hook) record(f Failure) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fs = append(h.fs, f)
}

func (h *hook) failures() []Failure {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Failure(nil), h.fs...)
}

func isVerification(err error) bool {
	return errors.Is(err, ErrVerification) && cloison.ErrorCode(err) == cloison.CodeTransferVerification
}
