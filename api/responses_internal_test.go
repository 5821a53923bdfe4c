package api

import (
	"reflect"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/sample"
)

// A replay is inconclusive, with its reason, wherever equality of digests
// would not mean the output is the prompt's own.
func TestReplayObstacles(t *testing.T) {
	rc := Responses{ModelDigest: audit.Digest{1}, ReplayBackend: "cpu", ReplayKernelPath: "avx2"}
	ok := audit.Served{ModelDigest: audit.Digest{1}, Backend: "cpu", KernelPath: "avx2"}
	with := func(f func(*audit.Served)) *audit.Served { s := ok; f(&s); return &s }
	for _, c := range []struct {
		name   string
		status cloison.Code
		served *audit.Served
		rc     func(*Responses)
		want   audit.Name
	}{
		{"exact", "", &ok, nil, ""},
		{"no digests", "", nil, nil, "entry-has-no-digests"},
		{"withheld", cloison.CodeIsolationViolation, &ok, nil, "request-not-served"},
		{"other model file", "", with(func(s *audit.Served) { s.ModelDigest = audit.Digest{2} }), nil, "model-digest-differs"},
		{"served on a GPU", "", with(func(s *audit.Served) { s.Backend, s.KernelPath = "cuda", "cuda" }), nil, "backend-not-batch-invariant"},
		{"replayed on a GPU", "", &ok, func(r *Responses) { r.ReplayBackend = "cuda" }, "backend-not-batch-invariant"},
		{"other kernel path", "", with(func(s *audit.Served) { s.KernelPath = "generic" }), nil, "kernel-path-differs"},
		{"logit_bias shaped it", "", with(func(s *audit.Served) { s.Sampling.Constrained = "logit_bias" }), nil, "constrained-output-not-replayed"},
	} {
		r := rc
		if c.rc != nil {
			c.rc(&r)
		}
		got := replayObstacle(audit.RequestCompleted{Status: c.status, Served: c.served}, r)
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// Recorded sampling values read back as the exact float64 and seed the
// request ran with.
func TestSamplingRoundTrips(t *testing.T) {
	s := &Server{}
	s.cfg.Responses = Responses{KEK: make([]byte, 32), DigestKey: "sd1", Backend: "cpu", KernelPath: "generic"}
	in := Common{Model: "m", Temperature: ptr(0.7), TopP: ptr(0.1 + 0.2), MinP: ptr(1e-7), FrequencyPenalty: ptr(-1.5), PresencePenalty: ptr(2.0),
		RepetitionPenalty: ptr(1.1), TopK: ptr(40), Seed: ptr(int64(-1))}
	sp := in.Sampling(false, 0)
	sv := s.served("t", engineRequest(sp), nil, "", true)
	got, err := samplingOf(sv.Sampling)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sp) {
		t.Fatalf("got %+v, want %+v", got, sp)
	}
}

// A request shaped by logit_bias or response_format records it: its replay
// (which does not re-apply them) must not compare as if it were plain.
func TestServedRecordsConstraints(t *testing.T) {
	s := &Server{}
	s.cfg.Responses = Responses{KEK: make([]byte, 32), DigestKey: "sd1", Backend: "cpu", KernelPath: "generic"}
	plain := Common{Model: "m"}
	if sv := s.served("t", engineRequest(plain.Sampling(false, 0)), nil, "", false); sv.Sampling.Constrained != "" {
		t.Fatalf("plain request recorded as constrained: %q", sv.Sampling.Constrained)
	}
	sp := plain.Sampling(false, 0)
	sp.LogitBias = map[int32]float64{5: -100}
	sv := s.served("t", engineRequest(sp), nil, "", false)
	if sv.Sampling.Constrained != "logit_bias" {
		t.Fatalf("logit_bias not recorded: %q", sv.Sampling.Constrained)
	}
	if got := replayObstacle(audit.RequestCompleted{Served: sv}, Responses{ReplayBackend: "cpu", ReplayKernelPath: "generic"}); got != "constrained-output-not-replayed" {
		t.Fatalf("replay obstacle %q", got)
	}
}

func ptr[T any](v T) *T { return &v }

func engineRequest(sp sample.Params) engine.GenerateRequest {
	return engine.GenerateRequest{Sampling: sp, MaxTokens: 3}
}
