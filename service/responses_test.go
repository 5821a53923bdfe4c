package service

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/tenancy"
)

// A replay is inconclusive, with its reason, wherever equality of digests
// would not mean the output is the prompt's own.
func TestReplayObstacles(t *testing.T) {
	rc := ResponseConfig{ModelDigest: audit.Digest{1}, ReplayBackend: "cpu", ReplayKernelPath: "avx2"}
	ok := audit.Served{ModelDigest: audit.Digest{1}, Backend: "cpu", KernelPath: "avx2"}
	with := func(f func(*audit.Served)) *audit.Served { s := ok; f(&s); return &s }
	for _, c := range []struct {
		name    string
		status  cloison.Code
		served  *audit.Served
		rc      func(*ResponseConfig)
		want    audit.Name
		adapter *audit.Digest
	}{
		{"exact", "", &ok, nil, "", nil},
		{"no digests", "", nil, nil, "entry-has-no-digests", nil},
		{"withheld", cloison.CodeIsolationViolation, &ok, nil, "request-not-served", nil},
		{"other model file", "", with(func(s *audit.Served) { s.ModelDigest = audit.Digest{2} }), nil, "model-digest-differs", nil},
		{"served on a GPU", "", with(func(s *audit.Served) { s.Backend, s.KernelPath = "cuda", "cuda" }), nil, "backend-not-batch-invariant", nil},
		{"replayed on a GPU", "", &ok, func(r *ResponseConfig) { r.ReplayBackend = "cuda" }, "backend-not-batch-invariant", nil},
		{"other kernel path", "", with(func(s *audit.Served) { s.KernelPath = "generic" }), nil, "kernel-path-differs", nil},
		{"logit_bias shaped it", "", with(func(s *audit.Served) { s.Sampling.Constrained = "logit_bias" }), nil, "constrained-output-not-replayed", nil},
		{"under a tenant's adapter, none loadable", "", &ok, nil, "adapter-not-replayed", &audit.Digest{3}},
		{"under a tenant's adapter", "", &ok, func(r *ResponseConfig) {
			r.ReplayAdapter = func(context.Context, cloison.TenantID, audit.Digest) (*model.Adapter, error) {
				return nil, ErrReplayAdapterGone
			}
		}, "", &audit.Digest{3}},
	} {
		r := rc
		if c.rc != nil {
			c.rc(&r)
		}
		got := ReplayObstacle(audit.RequestCompleted{Status: c.status, Served: c.served, AdapterDigest: c.adapter}, r)
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func testResponses(led *fakeServed) *Responses {
	return NewResponses(ResponsesDeps{Config: ResponseConfig{KEK: bytes.Repeat([]byte{7}, 32)}, Ledger: led})
}

// A request of another tenant is answered as an unknown one; without a KEK
// nothing is verifiable.
func TestVerifyOtherTenantIsUnknown(t *testing.T) {
	led := &fakeServed{entries: map[cloison.TenantID]map[cloison.RequestID]audit.TenantEntry{"acme": {"req-1": {}}}}
	r := testResponses(led)
	text := "hi"
	in := VerifyRequest{Prompt: []int32{1}, Completion: &text}
	if res, err := r.Verify(context.Background(), tenancy.Principal{Tenant: "acme"}, "req-1", in); err != nil || res.Reason == "" {
		t.Fatalf("own request without digests: got %+v, %v; want the reason nothing compares", res, err)
	}
	if _, err := r.Verify(context.Background(), tenancy.Principal{Tenant: "globex"}, "req-1", in); !errors.Is(err, ErrNoRequest) {
		t.Fatalf("another tenant's request: got %v, want ErrNoRequest", err)
	}
	if _, err := NewResponses(ResponsesDeps{Ledger: led}).Verify(context.Background(), tenancy.Principal{Tenant: "acme"}, "req-1", in); !errors.Is(err, ErrResponsesOff) {
		t.Fatalf("no KEK: got %v, want ErrResponsesOff", err)
	}
	in.CompletionTokens = []int32{2}
	if _, err := r.Verify(context.Background(), tenancy.Principal{Tenant: "acme"}, "req-1", in); !errors.Is(err, ErrInvalidField) {
		t.Fatalf("both completions: got %v, want ErrInvalidField", err)
	}
}

// A report's text is sealed for its tenant: the ledger's row holds no
// plaintext, the tenant's officer reads it back, another tenant cannot.
func TestReportTextSealedForItsTenant(t *testing.T) {
	led := &fakeServed{entries: map[cloison.TenantID]map[cloison.RequestID]audit.TenantEntry{"acme": {"req-1": {}}}}
	r := testResponses(led)
	secret := "the answer held globex's invoice"
	p := tenancy.Principal{Tenant: "acme", Subject: "bob"}
	res, dup, err := r.Report(context.Background(), p, ReportInput{Request: "req-1", Reason: "foreign-content", ForeignText: &secret})
	if err != nil || dup {
		t.Fatalf("got %+v, %v, %v", res, dup, err)
	}
	if led.holds(secret) {
		t.Fatal("the stored report holds the text in clear")
	}
	v, err := r.ReadReport(context.Background(), "acme", res.Report)
	if err != nil || v.ForeignText == nil || *v.ForeignText != secret {
		t.Fatalf("got %+v, %v; want the text back", v, err)
	}
	if _, err := r.ReadReport(context.Background(), "globex", res.Report); !errors.Is(err, ErrNoReport) {
		t.Fatalf("another tenant: got %v, want ErrNoReport", err)
	}
	if _, _, err := r.Report(context.Background(), p, ReportInput{Request: "req-1", Reason: "because"}); !errors.Is(err, ErrInvalidField) {
		t.Fatalf("unknown reason: got %v, want ErrInvalidField", err)
	}
}

// A stored response is sealed under its tenant's key and bound to its id:
// another tenant's id is unknown, and a blob moved to another id does not
// open.
func TestStoredResponseBoundToTenantAndID(t *testing.T) {
	led := &fakeServed{}
	r := testResponses(led)
	p := tenancy.Principal{Tenant: "acme", Subject: "bob"}
	body := []byte(`{"response":{"id":"resp_1"},"messages":[{"role":"user","content":"secret plan"}]}`)
	if err := r.Store(context.Background(), p, "req-1", "resp_1", body); err != nil {
		t.Fatal(err)
	}
	if led.holds("secret plan") {
		t.Fatal("the stored row holds the text in clear")
	}
	got, err := r.LoadStored(context.Background(), "acme", "resp_1")
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("got %s, %v", got, err)
	}
	if _, err := r.LoadStored(context.Background(), "globex", "resp_1"); !errors.Is(err, ErrNoResponse) {
		t.Fatalf("another tenant: got %v, want ErrNoResponse", err)
	}
	moved := led.stored[0]
	moved.ID = "resp_2"
	led.stored = append(led.stored, moved)
	if _, err := r.LoadStored(context.Background(), "acme", "resp_2"); err == nil {
		t.Fatal("a sealed blob moved to another id opened")
	}
	if err := NewResponses(ResponsesDeps{Ledger: led}).Store(context.Background(), p, "req-1", "resp_3", body); !errors.Is(err, ErrStoreOff) {
		t.Fatalf("no KEK: got %v, want ErrStoreOff", err)
	}
}
