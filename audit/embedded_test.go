package audit

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A rerank's request.completed names its operation; an embeddings entry
// carries no operation key, so entries written before the field encode to
// the same bytes and verify unchanged; an unknown operation is refused.
func TestEmbeddedOperation(t *testing.T) {
	base := func(op Name) *RequestCompleted {
		return &RequestCompleted{Request: "req-1", Model: "m", PromptTokens: 9, Pages: 1, Tier: "cross-tenant",
			Embedding: &Embedded{Key: "k1", Inputs: 3, Dimensions: 1, InputsDigest: Sum([]byte("in")), Vectors: Sum([]byte("out")),
				ModelDigest: Sum([]byte("model")), Backend: "cpu", KernelPath: "avx2", Operation: op}}
	}
	for _, tc := range []struct {
		op      Name
		wantKey bool
		wantErr error
	}{
		{"", false, nil},
		{OperationRank, true, nil},
		{"classify", false, ErrInvalidEvent},
		{"rank text", false, ErrTextNotAllowed},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			p := base(tc.op)
			b, err := Event{OccurredAt: t0, Tenant: "tenant-a", Actor: "engine:node-1", Payload: p}.Canonical()
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), `"operation"`); got != tc.wantKey {
				t.Fatalf("operation key present %v, want %v: %s", got, tc.wantKey, b)
			}
			env, err := DecodeEnvelope(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := env.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("got %+v, want %+v", got, p)
			}
		})
	}
}
