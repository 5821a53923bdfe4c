package service

import (
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// A replay is inconclusive, with its reason, wherever equality of digests
// would not mean the output is the prompt's own.
func TestReplayObstacles(t *testing.T) {
	rc := ResponseConfig{ModelDigest: audit.Digest{1}, ReplayBackend: "cpu", ReplayKernelPath: "avx2"}
	ok := audit.Served{ModelDigest: audit.Digest{1}, Backend: "cpu", KernelPath: "avx2"}
	with := func(f func(*audit.Served)) *audit.Served { s := ok; f(&s); return &s }
	for _, c := range []struct {
		name   string
		status cloison.Code
		served *audit.Served
		rc     func(*ResponseConfig)
		want   audit.Name
	}{
		{"exact", "", &ok, nil, ""},
		{"no digests", "", nil, nil, "entry-has-no-digests"},
		{"withheld", cloison.CodeIsolationViolation, &ok, nil, "request-not-served"},
		{"other model file", "", with(func(s *audit.Served) { s.ModelDigest = audit.Digest{2} }), nil, "model-digest-differs"},
		{"served on a GPU", "", with(func(s *audit.Served) { s.Backend, s.KernelPath = "cuda", "cuda" }), nil, "backend-not-batch-invariant"},
		{"replayed on a GPU", "", &ok, func(r *ResponseConfig) { r.ReplayBackend = "cuda" }, "backend-not-batch-invariant"},
		{"other kernel path", "", with(func(s *audit.Served) { s.KernelPath = "generic" }), nil, "kernel-path-differs"},
		{"logit_bias shaped it", "", with(func(s *audit.Served) { s.Sampling.Constrained = "logit_bias" }), nil, "constrained-output-not-replayed"},
	} {
		r := rc
		if c.rc != nil {
			c.rc(&r)
		}
		got := ReplayObstacle(audit.RequestCompleted{Status: c.status, Served: c.served}, r)
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
