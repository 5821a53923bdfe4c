package transfer

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// routedModel is one model of a decode node that serves two: its pool,
// arena and receiver, and a prefill node's sender of its KV.
type routedModel struct {
	digest  Digest
	prefill *node
	decode  *node
	sender  *Sender
	recv    *Receiver
}

// TestRouterSeveralModels: a decode node serving two models has one
// receiver per model behind one Transfer service, over gRPC with mutual
// TLS. Each model's transfer commits into its own pool, though both pools
// hand out the same lease epochs; a transfer naming a model the node does
// not serve (a forged or unloaded digest) is refused with ReasonModel and
// reported, and the reservation it aimed at is untouched: it still
// commits its own model's transfer. Another served model's digest aimed at
// a reservation is judged by that model's receiver only (no such
// reservation there), never committed into the other pool.
func TestRouterSeveralModels(t *testing.T) {
	m, digestA := testModel(t)
	digestB := digestA
	digestB[0] ^= 0xff // a second model file: another digest
	keys, _ := keyRing(t, "k1")
	h := &hook{}
	ac := m.ArenaConfig(16, pageTokens, kernels.KVF32)
	mk := func(d Digest) *routedModel {
		rm := &routedModel{digest: d, prefill: newNode(t, m.Backend(), ac, "a"), decode: newNode(t, m.Backend(), ac, "a")}
		var err error
		if rm.sender, err = NewSender(SenderConfig{Pool: rm.prefill.pool, Arena: rm.prefill.arena, Keys: keys, Model: d}); err != nil {
			t.Fatal(err)
		}
		if rm.recv, err = NewReceiver(ReceiverConfig{Pool: rm.decode.pool, Arena: rm.decode.arena, Keys: keys, Model: d, OnVerificationFailed: h.record}); err != nil {
			t.Fatal(err)
		}
		return rm
	}
	a, b := mk(digestA), mk(digestB)
	forged := digestA
	forged[1] ^= 0xff
	x := mk(forged) // a sender of a model the decode node does not serve
	rt := NewRouter(a.recv)
	if err := rt.Add(b.recv); err != nil {
		t.Fatal(err)
	}
	if err := rt.Add(b.recv); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a model routed twice: got %v, want ErrInvalid", err)
	}
	c := serveGRPC(t, rt)
	d := c.dial(t, c.ca)
	toks := prompt(promptLen, 3)

	prefillOf := func(rm *routedModel, req string) isolation.Lease {
		t.Helper()
		l, err := rm.prefill.pool.Allocate("a", cloison.RequestID(req), len(toks))
		if err != nil {
			t.Fatal(err)
		}
		rm.prefill.forward(t, m, l, 0, toks)
		return l
	}
	reserve := func(rm *routedModel, req string) *Ticket {
		t.Helper()
		l, err := rm.decode.pool.Allocate("a", cloison.RequestID(req), len(toks))
		if err != nil {
			t.Fatal(err)
		}
		tk, err := rm.recv.Expect(l, len(toks))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	send := func(from *routedModel, req string, tk *Ticket) error {
		t.Helper()
		l := prefillOf(from, req)
		defer func() { _ = from.prefill.pool.Release(l) }()
		_, err := from.sender.Send(context.Background(), d, l, tk.Target())
		return err
	}

	ta, tb := reserve(a, "r1"), reserve(b, "r1")
	if ta.Target().Epoch != tb.Target().Epoch {
		t.Fatalf("the two pools' first leases have epochs %d and %d; the test wants them equal", ta.Target().Epoch, tb.Target().Epoch)
	}
	// A forged model aimed at A's reservation: refused before any
	// reservation is claimed.
	if err := send(x, "r1", ta); !errors.Is(err, ErrVerification) {
		t.Fatalf("a transfer of an unserved model: got %v, want ErrVerification", err)
	}
	if fs := h.failures(); len(fs) != 1 || fs[0].Reason != ReasonModel || fs[0].Lease != (isolation.Lease{}) {
		t.Fatalf("reported %+v, want one ReasonModel refusal naming no reservation", fs)
	}
	if ta.Started() {
		t.Fatal("the forged transfer claimed A's reservation")
	}
	// B's KV aimed at A's reservation goes to B's receiver, which has no
	// reservation with that nonce.
	if err := send(b, "r1", ta); !errors.Is(err, ErrVerification) {
		t.Fatalf("B's KV into A's reservation: got %v, want ErrVerification", err)
	}
	if !tb.Started() {
		t.Fatal("B's transfer was not routed to B's receiver")
	}
	if _, err := tb.Wait(context.Background()); !errors.Is(err, ErrVerification) {
		t.Fatalf("B's reservation after another reservation's manifest: got %v, want ErrVerification", err)
	}
	if ta.Started() {
		t.Fatal("B's transfer claimed A's reservation")
	}
	// Each model's own transfer commits into its own pool.
	if err := send(a, "r1", ta); err != nil {
		t.Fatalf("A's transfer: %v", err)
	}
	if res, err := ta.Wait(context.Background()); err != nil || res.Tokens != len(toks) {
		t.Fatalf("A's reservation: %+v %v", res, err)
	}
	tb2 := reserve(b, "r3")
	if err := send(b, "r3", tb2); err != nil {
		t.Fatalf("B's transfer: %v", err)
	}
	if _, err := tb2.Wait(context.Background()); err != nil {
		t.Fatalf("B's reservation: %v", err)
	}
	// B unloaded: its transfers are refused as an unserved model's.
	rt.Remove(digestB)
	tb3 := reserve(b, "r4")
	before := len(h.failures())
	if err := send(b, "r4", tb3); !errors.Is(err, ErrVerification) {
		t.Fatalf("a transfer of an unloaded model: got %v, want ErrVerification", err)
	}
	if fs := h.failures(); len(fs) != before+1 || fs[before].Reason != ReasonModel || tb3.Started() {
		t.Fatalf("after Remove: reported %+v, claimed %v", fs[before:], tb3.Started())
	}
	tb3.Cancel()
	<-tb3.Done()
	for _, rm := range []*routedModel{a, b} {
		rm.decode.check(t)
	}
}
