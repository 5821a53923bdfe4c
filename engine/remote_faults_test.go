//go:build faults

package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/transfer"
)

// The 2026 path: a prompt larger than the prefill pool becomes a one-token
// placeholder that the prefill node tries to send as the whole prompt (its
// sender refuses: the lease did not write the reservation's tokens). The
// decode node never decodes: the request fails, no token reaches the
// client, the reservation is discarded.
func TestRemotePlaceholderFailsClosed(t *testing.T) {
	l := randomModel(t)
	d := newDisagg(t, l, true)
	d.prefill.Unsafe = Unsafe{Placeholder: true} // the 2026 prefill node
	s, err := d.e.Submit(context.Background(), GenerateRequest{ID: "long", Tenant: "b", Prompt: prompt(100, 9), MaxTokens: 4, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	toks, _, err := collect(t, s)
	t.Logf("the request failed with: %v", err)
	if err == nil || len(toks) != 0 {
		t.Fatalf("got tokens %v, err %v; want an error and no token", toks, err)
	}
	if c := cloison.ErrorCode(err); c != cloison.CodeIsolationViolation && c != cloison.CodeTransferVerification && c != cloison.CodeUnavailable {
		t.Fatalf("error %v (code %s)", err, c)
	}
	if !errors.Is(err, ErrRemotePrefill) && !errors.Is(err, transfer.ErrVerification) {
		t.Fatalf("error %v is neither a refused transfer nor a failed prefill", err)
	}
	d.close()
	if st := d.pool.Stats(); st.Leased != 0 || st.Draining != 0 {
		t.Fatalf("decode pages left: %+v", st)
	}
	if err := d.pool.Check(); err != nil {
		t.Fatal(err)
	}
}
