package engine

import "fmt"

// State is a request's place in the scheduler's state machine.
//
//	Queued ──▶ Admitted ──▶ Prefilling ──▶ Decoding ──▶ Finished
//	   ▲          │              │             │
//	   └──────────┴── preempted ─┴─────────────┘      (recompute)
//	any live state ──▶ Aborted (cancel, deadline) | Failed (isolation violation, kernel error)
//	Rejected: terminal, with no edge at all
//
// Queued means admitted by admission but holding no pages yet; Admitted means
// holding a lease. Rejected is never a scheduler state: a rejected request
// has no Ticket and never enters the scheduler; the state exists only to
// report it.
type State uint8

const (
	Queued State = iota
	Admitted
	Prefilling
	Decoding
	Finished
	Rejected
	Aborted
	Failed
)

var stateNames = [...]string{"queued", "admitted", "prefilling", "decoding", "finished", "rejected", "aborted", "failed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// transitions lists every legal edge. Terminal states have none.
var transitions = map[State][]State{
	Queued:     {Admitted, Aborted, Failed},
	Admitted:   {Prefilling, Queued, Aborted, Failed},
	Prefilling: {Prefilling, Decoding, Finished, Queued, Aborted, Failed},
	Decoding:   {Decoding, Finished, Queued, Aborted, Failed},
	Finished:   nil,
	Rejected:   nil,
	Aborted:    nil,
	Failed:     nil,
}

// CanBecome reports whether s → t is a legal transition.
func (s State) CanBecome(t State) bool {
	for _, u := range transitions[s] {
		if u == t {
			return true
		}
	}
	return false
}

// Terminal reports whether s has no way out.
func (s State) Terminal() bool { return len(transitions[s]) == 0 }

// FinishReason says why a request stopped, OpenAI-style.
type FinishReason string

const (
	FinishStop   FinishReason = "stop"   // end-of-sequence token, stop token or stop string
	FinishLength FinishReason = "length" // max tokens reached
)
