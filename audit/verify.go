package audit

import (
	"crypto/ed25519"
	"fmt"
	"sort"
	"time"
)

// VerifyOptions says what to trust and where the external copies are when
// a ledger store verifies itself.
type VerifyOptions struct {
	// Keys are the trusted checkpoint public keys (KeySet).
	Keys map[string]ed25519.PublicKey
	// ExternalDir holds the checkpoint copies kept outside the database.
	ExternalDir string
	// Progress, if set, is called every 10,000 events with the seq reached.
	Progress func(seq uint64)
	// Trusted (optional) is a signed tree checkpoint note (C2SP) that the
	// verifier holds from an earlier verification: the ledger must extend
	// it (ErrSmallerTree when it is smaller, ErrFork when its tree at that
	// size has another root). Without it a tail deleted after the last
	// checkpoint stored or copied is not detectable.
	Trusted []byte
	// ChainOnly checks the hash chain and the checkpoints present, and
	// vouches for nothing more: an empty ledger, or one with no checkpoint
	// that matched, is then not an error. For tests of a writer's chain
	// only; the API and cloisonctl never set it.
	ChainOnly bool
	// StagedBound: an event staged longer than this (default the store's
	// integration bound, IntegrationBound unless configured) is a break
	// (ReasonStaged).
	StagedBound time.Duration
}

// Verifier checks a chain streamed to it in sequence order: it never holds
// more than the current head and the checkpoints still ahead of it, so a
// ledger of any length verifies in constant memory.
//
// Drive it as:
//
//	v := audit.NewVerifier(audit.Head{}, keys)
//	for _, c := range checkpoints { if err := v.AddCheckpoint(c, "db"); err != nil { ... } }
//	for each row in seq order { if err := v.Add(rec); err != nil { return err } }
//	res, err := v.Finish()
//
// The first error is a *BreakError naming the first broken seq; after it the
// Verifier refuses further input.
type Verifier struct {
	keys     map[string]ed25519.PublicKey
	start    Head
	head     Head
	events   uint64
	pending  map[uint64][]sourcedCheckpoint // checkpoints not yet reached, by size
	checked  int
	failed   error
	lastGood uint64 // size of the last checkpoint that matched (0: none)
}

type sourcedCheckpoint struct {
	c      Checkpoint
	source string
}

// Result summarises a successful verification.
type Result struct {
	Start       Head   // head before the first verified event
	Head        Head   // head after the last verified event
	Events      uint64 // events verified
	Checkpoints int    // checkpoints whose head matched the recomputed chain
	TreeNotes   int    // tree notes (latest stored, trusted) whose root matched the recomputed tree
}

// NewVerifier returns a Verifier for the chain that continues start (the zero
// Head for a whole ledger) trusting the given checkpoint keys.
func NewVerifier(start Head, keys map[string]ed25519.PublicKey) *Verifier {
	return &Verifier{keys: keys, start: start, head: start, pending: map[uint64][]sourcedCheckpoint{}}
}

// AddCheckpoint registers a checkpoint to hold the chain to. Its signature
// is checked now; a bad one is a *BreakError at its size (a forged
// statement is evidence of tampering). source names where it came from
// ("database", a file path) for the report.
func (v *Verifier) AddCheckpoint(c Checkpoint, source string) error {
	if v.failed != nil {
		return v.failed
	}
	if err := c.Verify(v.keys); err != nil {
		return v.fail(breakAt(c.Size, ReasonCheckpointSig, "%s: %v", source, err))
	}
	switch {
	case c.Size < v.head.Seq:
		return nil // before the verified range: nothing to hold it to
	case c.Size == v.head.Seq:
		if c.Size > 0 && c.Head != v.head.Hash {
			return v.fail(breakAt(c.Size, ReasonCheckpoint, "%s: checkpoint head %s, chain head %s", source, c.Head, v.head.Hash))
		}
		v.checked++
		return nil
	}
	v.pending[c.Size] = append(v.pending[c.Size], sourcedCheckpoint{c, source})
	return nil
}

func (v *Verifier) fail(err *BreakError) error {
	v.failed = err
	return err
}

// Add verifies the next record. Columns (Kind, Tenant, Actor, OccurredAt)
// are compared with the hashed payload when Kind is set; exported ranges
// carry only the payload and leave them empty.
func (v *Verifier) Add(r Record) error {
	if v.failed != nil {
		return v.failed
	}
	want := v.head.Seq + 1
	switch {
	case r.Seq > want:
		return v.fail(breakAt(want, ReasonGap, "seq %d missing (next row is %d)", want, r.Seq))
	case r.Seq < want:
		return v.fail(breakAt(r.Seq, ReasonOrder, "seq %d after %d", r.Seq, v.head.Seq))
	}
	if r.PrevHash != v.head.Hash {
		return v.fail(breakAt(r.Seq, ReasonPrevHash, "prev_hash %s, previous hash %s", r.PrevHash, v.head.Hash))
	}
	if h := HashEvent(r.Seq, r.PrevHash, r.Payload); h != r.Hash {
		return v.fail(breakAt(r.Seq, ReasonHash, "stored hash %s, recomputed %s", r.Hash, h))
	}
	env, err := DecodeEnvelope(r.Payload)
	if err != nil {
		return v.fail(breakAt(r.Seq, ReasonPayload, "%v", err))
	}
	if r.Kind != "" {
		switch {
		case r.Kind != env.Kind:
			return v.fail(breakAt(r.Seq, ReasonColumns, "kind column %q, payload %q", r.Kind, env.Kind))
		case r.Tenant != env.Tenant:
			return v.fail(breakAt(r.Seq, ReasonColumns, "tenant column %q, payload %q", r.Tenant, env.Tenant))
		case r.Actor != env.Actor:
			return v.fail(breakAt(r.Seq, ReasonColumns, "actor column %q, payload %q", r.Actor, env.Actor))
		case !r.OccurredAt.Equal(env.OccurredAt):
			return v.fail(breakAt(r.Seq, ReasonColumns, "occurred_at column %s, payload %s", r.OccurredAt, env.OccurredAt))
		}
	}
	v.head = r.Head()
	v.events++
	if cps, ok := v.pending[r.Seq]; ok {
		for _, sc := range cps {
			if sc.c.Head != r.Hash {
				return v.fail(breakAt(r.Seq, ReasonCheckpoint,
					"%s: signed checkpoint head %s, recomputed chain head %s (rewritten after seq %d)",
					sc.source, sc.c.Head, r.Hash, v.lastGood))
			}
			v.checked++
		}
		delete(v.pending, r.Seq)
		v.lastGood = r.Seq
	}
	return nil
}

// Head returns the head verified so far.
func (v *Verifier) Head() Head { return v.head }

// Finish ends the stream. A checkpoint beyond the last event means the tail
// was removed: the first missing seq is reported.
func (v *Verifier) Finish() (Result, error) {
	if v.failed != nil {
		return Result{}, v.failed
	}
	if len(v.pending) > 0 {
		sizes := make([]uint64, 0, len(v.pending))
		for s := range v.pending {
			sizes = append(sizes, s)
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
		return Result{}, v.fail(breakAt(v.head.Seq+1, ReasonTruncated,
			"chain ends at seq %d but %s signed a checkpoint of size %d", v.head.Seq, v.pending[sizes[0]][0].source, sizes[0]))
	}
	return Result{Start: v.start, Head: v.head, Events: v.events, Checkpoints: v.checked}, nil
}

// String formats a result for humans.
func (r Result) String() string {
	return fmt.Sprintf("%d events verified (seq %d..%d), head %s, %d checkpoints and %d tree notes matched",
		r.Events, r.Start.Seq+1, r.Head.Seq, r.Head.Hash, r.Checkpoints, r.TreeNotes)
}
