package engine

import (
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// TestWholePromptSteps: with WholePrompt (an encoder), every prompt runs
// in one step from position 0, never in chunks: one that does not fit the
// rest of a step's budget waits for the next step, and one longer than a
// whole step's budget takes a step alone.
func TestWholePromptSteps(t *testing.T) {
	pool, err := isolation.NewPool(isolation.Config{Pages: 64, PageTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	adm := NewAdmission(AdmissionConfig{ServedContext: 256, Vocab: 300, Pool: pool})
	s := NewScheduler(pool, SchedulerConfig{MaxBatchTokens: 16, ChunkTokens: 4, WholePrompt: true})
	lens := map[string]int{"r10": 10, "r12": 12, "r30": 30, "r3": 3}
	for _, id := range []string{"r10", "r12", "r30", "r3"} {
		tk, err := adm.Admit(Request{ID: cloison.RequestID(id), Tenant: "a", Prompt: make([]int32, lens[id]), ScorePrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Enqueue(tk); err != nil {
			t.Fatal(err)
		}
	}
	done := map[string]bool{}
	for step := 0; len(done) < len(lens) && step < 8; step++ {
		rd := s.Ready()
		for _, it := range rd.Batch {
			if it.Pos != 0 || len(it.Tokens) != lens[string(it.ID)] {
				t.Fatalf("step %d: %s runs [%d, %d) of %d tokens", step, it.ID, it.Pos, it.Pos+len(it.Tokens), lens[string(it.ID)])
			}
			if len(rd.Batch) > 1 && len(it.Tokens) > 16 {
				t.Fatalf("step %d: %s (%d tokens, over the budget) shares its step", step, it.ID, len(it.Tokens))
			}
			done[string(it.ID)] = true
		}
		s.Advance(rd, nil)
	}
	if len(done) != len(lens) {
		t.Fatalf("ran %v of %v", done, lens)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}
