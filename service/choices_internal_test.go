package service

import (
	"testing"

	"pgregory.net/rapid"
)

// choiceSeed: choice 0 keeps the request's seed (n = 1 unchanged), the
// choices of one request get distinct seeds, and the mapping is a pure
// function of (seed, index).
func TestChoiceSeed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		if choiceSeed(seed, 0) != seed {
			t.Fatalf("choice 0's seed %d, want the request's %d", choiceSeed(seed, 0), seed)
		}
		seen := map[uint64]int{}
		for i := range 128 {
			s := choiceSeed(seed, i)
			if j, dup := seen[s]; dup {
				t.Fatalf("choices %d and %d share seed %d", j, i, s)
			}
			seen[s] = i
			if choiceSeed(seed, i) != s {
				t.Fatal("not deterministic")
			}
		}
	})
	if choiceID("req-1", 0) != "req-1" || choiceID("req-1", 3) != "req-1.c3" {
		t.Fatal("choice ids")
	}
}
