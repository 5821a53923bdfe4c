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
// more than the current head, the checkpoints still ahead of it and the
// breaks found (at most MaxBreaks), so a ledger of any length verifies in
// constant memory.
//
// Drive it as:
//
//	v := audit.NewVerifier(audit.Head{}, keys)
//	for _, c := range checkpoints { v.AddCheckpoint(c, "db") }
//	for each row in seq order { v.Add(rec) }
//	res, err := v.Finish() // err: *Breaks, every break found
//
// A break never stops it: each row is checked against the stored row
// before it (its prev_hash, its seq) and on its own (hash, payload,
// columns, signature, time), and the chain goes on from the stored hash,
// so a poisoned entry at seq k cannot hide a tampered one at k+m. Add and
// AddCheckpoint return the break the input itself showed, for callers that
// report as they go; Finish returns them all.
//
// Event signatures (eventsig.go): signing begins at the first
// ledger.signing_began event or the first event with a valid signature,
// whichever comes first. From there on an event of the SignedKinds without
// a valid signature by one of keys is a break (ReasonSignature), and so is
// an event whose occurred_at is more than ClockTolerance from its
// RecordedAt (ReasonBackdated; StatedTimeKinds and exports, which carry
// no RecordedAt, skip this check). A bad signature, or a signing_began that is unsigned or
// states another seq than its own, is a break wherever it is.
type Verifier struct {
	keys     map[string]ed25519.PublicKey
	start    Head
	head     Head
	events   uint64
	pending  map[uint64][]sourcedCheckpoint // checkpoints not yet reached, by size
	checked  int
	breaks   Breaks
	lastGood uint64 // size of the last checkpoint that matched (0: none)
	signFrom uint64 // seq where signing began (0: not yet)
	signed   uint64 // events with a valid signature
}

type sourcedCheckpoint struct {
	c      Checkpoint
	source string
}

// Result summarises a verification.
type Result struct {
	Start       Head   // head before the first verified event
	Head        Head   // head after the last verified event
	Events      uint64 // events verified
	Checkpoints int    // checkpoints whose head matched the recomputed chain
	TreeNotes   int    // tree notes (latest stored, trusted) whose root matched the recomputed tree
	SignedFrom  uint64 // seq where event signatures became required (0: never)
	Signed      uint64 // events whose signature verified
}

// NewVerifier returns a Verifier for the chain that continues start (the zero
// Head for a whole ledger) trusting the given checkpoint keys, which also
// verify event signatures.
func NewVerifier(start Head, keys map[string]ed25519.PublicKey) *Verifier {
	return &Verifier{keys: keys, start: start, head: start, pending: map[uint64][]sourcedCheckpoint{}}
}

// AddCheckpoint registers a checkpoint to hold the chain to. Its signature
// is checked now; a bad one is a *BreakError at its size (a forged
// statement is evidence of tampering). source names where it came from
// ("database", a file path) for the report.
func (v *Verifier) AddCheckpoint(c Checkpoint, source string) error {
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

// fail keeps err and returns it (as an error; nil stays nil).
func (v *Verifier) fail(err *BreakError) error {
	if err == nil {
		return nil
	}
	v.breaks.add(err)
	return err
}

// Add verifies the next record and returns the first break it shows (nil
// if none); every break is kept for Finish. Columns (Kind, Tenant, Actor,
// OccurredAt) are compared with the hashed payload when Kind is set;
// exported ranges carry only the payload and leave them empty.
func (v *Verifier) Add(r Record) error {
	var first error
	fail := func(b *BreakError) {
		if err := v.fail(b); first == nil {
			first = err
		}
	}
	want := v.head.Seq + 1
	switch {
	case r.Seq > want:
		// The missing rows are one break; this row is checked on its own.
		fail(breakAt(want, ReasonGap, "seq %d missing (next row is %d)", want, r.Seq))
	case r.Seq < want:
		// A duplicate or out-of-order row: reported, and the chain goes on
		// from the head it had.
		fail(breakAt(r.Seq, ReasonOrder, "seq %d after %d", r.Seq, v.head.Seq))
		return first
	case r.PrevHash != v.head.Hash:
		fail(breakAt(r.Seq, ReasonPrevHash, "prev_hash %s, previous hash %s", r.PrevHash, v.head.Hash))
	}
	if h := HashEvent(r.Seq, r.PrevHash, r.Payload); h != r.Hash {
		fail(breakAt(r.Seq, ReasonHash, "stored hash %s, recomputed %s", r.Hash, h))
	}
	if env, err := DecodeEnvelope(r.Payload); err != nil {
		fail(breakAt(r.Seq, ReasonPayload, "%v", err))
	} else {
		if r.Kind != "" {
			switch {
			case r.Kind != env.Kind:
				fail(breakAt(r.Seq, ReasonColumns, "kind column %q, payload %q", r.Kind, env.Kind))
			case r.Tenant != env.Tenant:
				fail(breakAt(r.Seq, ReasonColumns, "tenant column %q, payload %q", r.Tenant, env.Tenant))
			case r.Actor != env.Actor:
				fail(breakAt(r.Seq, ReasonColumns, "actor column %q, payload %q", r.Actor, env.Actor))
			case !r.OccurredAt.Equal(env.OccurredAt):
				fail(breakAt(r.Seq, ReasonColumns, "occurred_at column %s, payload %s", r.OccurredAt, env.OccurredAt))
			}
		}
		fail(v.checkSigned(r, env))
	}
	v.head = r.Head()
	v.events++
	if cps, ok := v.pending[r.Seq]; ok {
		good := true
		for _, sc := range cps {
			if sc.c.Head != r.Hash {
				good = false
				fail(breakAt(r.Seq, ReasonCheckpoint,
					"%s: signed checkpoint head %s, recomputed chain head %s (rewritten after seq %d)",
					sc.source, sc.c.Head, r.Hash, v.lastGood))
				continue
			}
			v.checked++
		}
		delete(v.pending, r.Seq)
		if good {
			v.lastGood = r.Seq
		}
	}
	return first
}

// checkSigned applies the signature and time rules (see Verifier) to one
// decoded entry.
func (v *Verifier) checkSigned(r Record, env Envelope) *BreakError {
	valid := false
	if env.Sig != "" {
		if _, err := VerifyEventSignature(r.Payload, v.keys); err != nil {
			return breakAt(r.Seq, ReasonSignature, "%s: %v", env.Kind, err)
		}
		valid = true
		v.signed++
	}
	if env.Kind == KindSigningBegan {
		if !valid {
			return breakAt(r.Seq, ReasonSignature, "an unsigned %s", env.Kind)
		}
		p, err := env.DecodePayload()
		if err != nil {
			return breakAt(r.Seq, ReasonPayload, "%v", err)
		}
		if at := p.(*SigningBegan).Seq; at != int64(r.Seq) {
			return breakAt(r.Seq, ReasonSignature, "%s states seq %d: moved", env.Kind, at)
		}
	}
	if valid && v.signFrom == 0 {
		v.signFrom = r.Seq
	}
	if v.signFrom == 0 {
		return nil // before signing began: an older ledger's entries
	}
	if !valid && RequiresSignature(env.Kind) {
		return breakAt(r.Seq, ReasonSignature, "%s by %s is not signed (signing began at seq %d)", env.Kind, env.Actor, v.signFrom)
	}
	if !r.RecordedAt.IsZero() && !StatedTimeKinds[env.Kind] {
		if d := env.OccurredAt.Sub(r.RecordedAt); d > ClockTolerance || d < -ClockTolerance {
			return breakAt(r.Seq, ReasonBackdated, "%s occurred_at %s, sequenced at %s by the database's clock (%s apart, tolerance %s)",
				env.Kind, env.OccurredAt.Format(time.RFC3339Nano), r.RecordedAt.UTC().Format(time.RFC3339Nano), d.Abs().Round(time.Second), ClockTolerance)
		}
	}
	return nil
}

// Head returns the head verified so far.
func (v *Verifier) Head() Head { return v.head }

// Finish ends the stream and returns the result with every break found
// (*Breaks), or nil. A checkpoint beyond the last event means the tail was
// removed: the first missing seq is reported.
func (v *Verifier) Finish() (Result, error) {
	if len(v.pending) > 0 {
		sizes := make([]uint64, 0, len(v.pending))
		for s := range v.pending {
			sizes = append(sizes, s)
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
		v.fail(breakAt(v.head.Seq+1, ReasonTruncated,
			"chain ends at seq %d but %s signed a checkpoint of size %d", v.head.Seq, v.pending[sizes[0]][0].source, sizes[0]))
		v.pending = map[uint64][]sourcedCheckpoint{}
	}
	res := Result{Start: v.start, Head: v.head, Events: v.events, Checkpoints: v.checked, SignedFrom: v.signFrom, Signed: v.signed}
	if len(v.breaks.All) > 0 {
		b := v.breaks
		return res, &b
	}
	return res, nil
}

// String formats a result for humans.
func (r Result) String() string {
	s := fmt.Sprintf("%d events verified (seq %d..%d), head %s, %d checkpoints and %d tree notes matched",
		r.Events, r.Start.Seq+1, r.Head.Seq, r.Head.Hash, r.Checkpoints, r.TreeNotes)
	if r.SignedFrom == 0 {
		return s + ", no event signature yet"
	}
	return s + fmt.Sprintf(", %d signed events (signatures required from seq %d)", r.Signed, r.SignedFrom)
}
