package node_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/engine/transfer/prefillrpc"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/tenancy"
)

// fixture is what a node is assembled from in these tests.
type fixture struct {
	ledger *auditpg.Store
	store  *tenancy.Store
	api    api.Config
	model  node.Model
	key    ed25519.PrivateKey // the ledger's signing key
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	pool := db.RuntimePool(t)
	_, key, _ := ed25519.GenerateKey(nil)
	ledger, err := auditpg.Open(ctx, pool, auditpg.Config{Origin: "nodetest", SigningKey: key, CheckpointDir: t.TempDir(),
		Organization: audit.Organization{Name: "Cloison test"}, Contact: audit.Contact{Name: "DPO", Email: "dpo@example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	store := tenancy.NewStore(pool).WithLedger(ledger)
	kek := make([]byte, tenancy.KEKSize)
	_, _ = rand.Read(kek)
	ring, err := tenancy.OpenKeyRing(ctx, store, "nodetest", kek)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := tenancy.NewVerifier(tenancy.VerifierConfig{Audience: "cloison", Sources: []tenancy.KeySource{ring}, Tenants: store, Clients: store, Revocations: store})
	if err != nil {
		t.Fatal(err)
	}
	w, err := synth.ContextBag(synth.BagConfig{Context: 1024, GapTokens: 1024})
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
	be, err := cpu.New(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	m, err := model.Load(be, f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{ledger: ledger, store: store, api: api.Config{Verifier: verifier, Limiter: tenancy.NewLimiter(), Keys: ring},
		model: node.Model{Backend: be, Model: m, Tokenizer: tok, Name: "cloison-context-bag", Digest: transfer.Digest(sha256.Sum256(buf.Bytes()))}, key: key}
}

func (f fixture) config(pages int) node.Config {
	return node.Config{Model: f.model, Capacity: node.Capacity{Pool: isolation.Config{Pages: pages, PageTokens: 16}},
		Ledger: f.ledger, NodeName: "nodetest", Actor: "engine:nodetest", Tenants: f.store, API: f.api}
}

// kinds counts the ledger's events by kind.
func kinds(t *testing.T, l *auditpg.Store) map[audit.Kind]int {
	t.Helper()
	n := map[audit.Kind]int{}
	if err := l.Scan(context.Background(), 1, 0, func(r audit.Record) error { n[r.Kind]++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A node whose pool cannot hold the served context refuses to start with
// attest.ErrFailed, and its attestation is on the record all the same; one
// that passes records it and the bundle it serves before it exists.
func TestNewRecordsAttestation(t *testing.T) {
	f := newFixture(t)
	if _, err := node.New(context.Background(), f.config(32)); !errors.Is(err, attest.ErrFailed) { // 512 tokens < 1024
		t.Fatalf("got %v, want attest.ErrFailed", err)
	}
	if got := kinds(t, f.ledger); got[audit.KindCapacityAttestation] != 1 || got[audit.KindPolicyReloaded] != 0 {
		t.Fatalf("after a refused start: got %v, want one capacity.attestation and no policy.reloaded", got)
	}
	n, err := node.New(context.Background(), f.config(64))
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := kinds(t, f.ledger); got[audit.KindCapacityAttestation] != 2 || got[audit.KindPolicyReloaded] != 1 {
		t.Fatalf("after a start: got %v, want two capacity.attestation and one policy.reloaded", got)
	}
	if !n.Attestation.OK || !reflect.DeepEqual(n.Engine.Attestation(), n.Attestation) {
		t.Fatalf("published %+v, engine serves %+v", n.Attestation, n.Engine.Attestation())
	}
}

// A decode node's transfer server serves no stream before what it reports
// refusals to exists (it once served at once, and a refusal
// before the API server was built dereferenced a nil server). Between New
// and Start a prefill node's stream gets no answer and nothing is reported;
// after Start the same junk is refused and the refusal is in the ledger.
func TestDecodeServesTransfersOnlyOnceStarted(t *testing.T) {
	f := newFixture(t)
	ca, err := pki.NewCA("nodetest")
	if err != nil {
		t.Fatal(err)
	}
	cert := func(role, peerRole string) (server, client *tls.Config) {
		c, err := ca.IssueRole(role, role, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return pki.RequirePeerRole(pki.ServerConfig(c, ca.Pool()), peerRole), pki.RequirePeerRole(pki.ClientConfig(c, ca.Pool(), ""), peerRole)
	}
	decodeServer, decodeClient := cert(pki.RoleDecode, pki.RolePrefill)
	_, prefillClient := cert(pki.RolePrefill, pki.RoleDecode)
	key, err := transfer.NewKey("nodetest")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := transfer.NewKeyRing(key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client, err := prefillrpc.NewClient([]string{"127.0.0.1:1"}, ln.Addr().String(), decodeClient)
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config(64)
	digest := hex.EncodeToString(f.model.Digest[:])
	cfg.Decode = &node.Decode{Listener: ln, ServerOptions: transfer.ServerOptions(decodeServer), Keys: keys, Client: client,
		Peers: func(_ context.Context, self attest.Attestation) ([]attest.PrefillPeer, error) {
			return []attest.PrefillPeer{{Addr: "prefill-1", ModelDigest: digest, Attestation: self}}, nil
		}}
	n, err := node.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if len(n.Attestation.Prefill) != 1 || !n.Attestation.Prefill[0].OK {
		t.Fatalf("got prefill attestations %+v, want the one peer checked in", n.Attestation.Prefill)
	}

	conn, err := grpc.NewClient(ln.Addr().String(), transfer.DialOptions(prefillClient)...)
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
	if err := junk(time.Second); err == nil {
		t.Fatal("got a receipt before Start, want no answer")
	}
	if got := kinds(t, f.ledger)[audit.KindTransferVerification]; got != 0 {
		t.Fatalf("before Start: got %d transfer refusals recorded, want none", got)
	}
	n.Start()
	if err := junk(30 * time.Second); err == nil {
		t.Fatal("got a receipt for junk, want a refusal")
	}
	if err := n.Close(context.Background()); err != nil { // every refusal durable
		t.Fatal(err)
	}
	if got := kinds(t, f.ledger)[audit.KindTransferVerification]; got != 1 {
		t.Fatalf("after Start: got %d transfer refusals recorded, want 1", got)
	}
}
