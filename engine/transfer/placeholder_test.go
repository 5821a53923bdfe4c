//go:build faults

package transfer

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// The 2026 prefill node: it computed a one-token placeholder and announces
// the whole reservation. Each of the receiver's count and digest checks
// refuses it alone; with both off the receiver records only what arrived (one
// page), never the claim, so the pool's fill check still refuses decoding
// over the rest.
func TestPlaceholderClaimRefused(t *testing.T) {
	m, digest := testModel(t)
	keys, _ := keyRing(t, "k1")
	ac := m.ArenaConfig(16, pageTokens, kernels.KVF32)
	pre := newNode(t, m.Backend(), ac, "a")
	sender, err := NewSender(SenderConfig{Pool: pre.pool, Arena: pre.arena, Keys: keys, Model: digest, Unsafe: SenderUnsafe{ClaimReservation: true}})
	if err != nil {
		t.Fatal(err)
	}
	toks := prompt(promptLen, 5)
	tests := []struct {
		name   string
		unsafe ReceiverUnsafe
		reason Reason // "": committed
	}{
		{"every check", ReceiverUnsafe{}, ReasonPageCount},
		{"no count check", ReceiverUnsafe{SkipCountCheck: true}, ReasonDigest},
		{"no digest check", ReceiverUnsafe{SkipDigestCheck: true}, ReasonPageCount},
		{"neither", ReceiverUnsafe{SkipCountCheck: true, SkipDigestCheck: true}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dec := newNode(t, m.Backend(), ac, "a")
			h := &hook{}
			recv, err := NewReceiver(ReceiverConfig{Pool: dec.pool, Arena: dec.arena, Keys: keys, Model: digest, OnVerificationFailed: h.record, Unsafe: tc.unsafe})
			if err != nil {
				t.Fatal(err)
			}
			rl, err := dec.pool.Allocate("a", "long", len(toks))
			if err != nil {
				t.Fatal(err)
			}
			tk, err := recv.Expect(rl, len(toks))
			if err != nil {
				t.Fatal(err)
			}
			// The placeholder: one token computed.
			pl, err := pre.pool.Allocate("a", "long", 1)
			if err != nil {
				t.Fatal(err)
			}
			pre.forward(t, m, pl, 0, toks[:1])
			go func() { _, _ = sender.Send(context.Background(), Local(recv, 0), pl, tk.Target()) }()
			res, werr := tk.Wait(context.Background())
			if err := pre.pool.Release(pl); err != nil {
				t.Fatal(err)
			}
			if tc.reason != "" {
				var v *VerificationError
				if !errors.As(werr, &v) || v.Reason != tc.reason {
					t.Fatalf("got %v, want a %s refusal", werr, tc.reason)
				}
				if fs := h.failures(); len(fs) != 1 || fs[0].Reason != tc.reason {
					t.Fatalf("hook saw %+v", fs)
				}
				if _, err := dec.pool.Written(rl); !errors.Is(err, isolation.ErrStaleLease) {
					t.Fatalf("the refused reservation is still live: %v", err)
				}
				return
			}
			if werr != nil {
				t.Fatalf("with both checks off the transfer was refused: %v", werr)
			}
			// One page arrived: one page's tokens are recorded, not the claim.
			if w, _ := dec.pool.Written(rl); w != pageTokens || res.Tokens != pageTokens {
				t.Fatalf("recorded %d tokens (result %d), want the %d of the one page received", w, res.Tokens, pageTokens)
			}
			var v *isolation.ViolationError
			if _, err := dec.pool.BlockTable(rl, len(toks)); !errors.As(err, &v) || v.Reason != isolation.ReasonUnwritten {
				t.Fatalf("decoding over the claimed tokens: %v, want an unwritten-slot violation", err)
			}
		})
	}
}
