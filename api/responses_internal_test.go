package api

import (
	"reflect"
	"testing"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/service"
)

// Recorded sampling values read back as the exact float64 and seed the
// request ran with.
func TestSamplingRoundTrips(t *testing.T) {
	s := service.NewResponses(service.ResponsesDeps{Config: Responses{KEK: make([]byte, 32), DigestKey: "sd1", Backend: "cpu", KernelPath: "generic"}})
	in := Common{Model: "m", Temperature: ptr(0.7), TopP: ptr(0.1 + 0.2), MinP: ptr(1e-7), FrequencyPenalty: ptr(-1.5), PresencePenalty: ptr(2.0),
		RepetitionPenalty: ptr(1.1), TopK: ptr(40), Seed: ptr(int64(-1))}
	sp := in.Sampling(false, 0)
	sv := s.Served("t", engineRequest(sp), nil, "", true)
	got, err := service.RecordedSampling(sv.Sampling)
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
	s := service.NewResponses(service.ResponsesDeps{Config: Responses{KEK: make([]byte, 32), DigestKey: "sd1", Backend: "cpu", KernelPath: "generic"}})
	plain := Common{Model: "m"}
	if sv := s.Served("t", engineRequest(plain.Sampling(false, 0)), nil, "", false); sv.Sampling.Constrained != "" {
		t.Fatalf("plain request recorded as constrained: %q", sv.Sampling.Constrained)
	}
	sp := plain.Sampling(false, 0)
	sp.LogitBias = map[int32]float64{5: -100}
	sv := s.Served("t", engineRequest(sp), nil, "", false)
	if sv.Sampling.Constrained != "logit_bias" {
		t.Fatalf("logit_bias not recorded: %q", sv.Sampling.Constrained)
	}
	if got := service.ReplayObstacle(audit.RequestCompleted{Served: sv}, Responses{ReplayBackend: "cpu", ReplayKernelPath: "generic"}); got != "constrained-output-not-replayed" {
		t.Fatalf("replay obstacle %q", got)
	}
}

func ptr[T any](v T) *T { return &v }

func engineRequest(sp sample.Params) engine.GenerateRequest {
	return engine.GenerateRequest{Sampling: sp, MaxTokens: 3}
}
