package audit

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// Property: whatever single tampering is applied to a valid chain, the
// Verifier stops at exactly the first seq it affects.
func TestVerifierFindsFirstTamperedSeq(t *testing.T) {
	base := buildChain(t, 120)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, len(base)).Draw(t, "n")
		recs := append([]Record(nil), base[:n]...)
		i := rapid.IntRange(0, n-1).Draw(t, "i")
		var want uint64
		switch kind := rapid.SampledFrom([]string{"payload", "hash", "prev", "delete", "swap", "duplicate"}).Draw(t, "kind"); kind {
		case "payload":
			p := append([]byte(nil), recs[i].Payload...)
			p[rapid.IntRange(0, len(p)-1).Draw(t, "byte")] ^= byte(rapid.IntRange(1, 255).Draw(t, "xor"))
			recs[i].Payload = p
			want = recs[i].Seq
		case "hash":
			recs[i].Hash[rapid.IntRange(0, 31).Draw(t, "byte")] ^= 1
			want = recs[i].Seq // its own recomputation fails first
		case "prev":
			recs[i].PrevHash[0] ^= 1
			want = recs[i].Seq
		case "delete":
			if i == n-1 {
				t.Skip("deleting the last row without a checkpoint is undetectable by design")
			}
			want = recs[i].Seq
			recs = append(recs[:i:i], recs[i+1:]...)
		case "swap":
			if i == n-1 {
				i--
			}
			recs[i], recs[i+1] = recs[i+1], recs[i]
			want = recs[i+1].Seq // the smaller seq, now second
		case "duplicate":
			recs = append(recs[:i+1:i+1], append([]Record{recs[i]}, recs[i+1:]...)...)
			want = recs[i].Seq
		}
		_, err := verifyAll(recs, nil)
		var be *BreakError
		if !errors.As(err, &be) {
			t.Fatalf("got %v, want a break", err)
		}
		if be.Seq != want {
			t.Fatalf("got seq %d (%s: %s), want %d", be.Seq, be.Reason, be.Detail, want)
		}
	})
}
