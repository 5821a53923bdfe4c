package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// Observation is one witness's answer to Client.Latest: the latest
// checkpoint of the log it cosigned, and when it cosigned it (now, for a
// witness of this package).
type Observation struct {
	Witness string
	Head    audit.TreeHead
	Time    time.Time
	Note    []byte // the checkpoint with the log's signature and the witness's cosignature
}

// ContradictedError is a witness's cosigned checkpoint that the log's tree
// does not extend: the log was rolled back or truncated (audit.ErrSmallerTree)
// or rewritten (audit.ErrFork) after the witness cosigned.
type ContradictedError struct {
	Witness     string
	WitnessSize uint64
	Size        uint64 // the verified tree's size
	Err         error  // audit.ErrSmallerTree or audit.ErrFork, with detail
}

func (e *ContradictedError) Error() string {
	return fmt.Sprintf("witness %s cosigned size %d, which the log's tree of size %d contradicts: %v", e.Witness, e.WitnessSize, e.Size, e.Err)
}

func (e *ContradictedError) Unwrap() error { return e.Err }

// VerifyWitnessed asks every client for the latest checkpoint of the log
// (logKey) it cosigned, and checks that the tree head h (a checkpoint the
// verifier already checked with logKey) and each witness's tree are one
// log: a witness behind h gets a consistency proof from its size to h, a
// witness ahead of h (it cosigned a checkpoint signed after h was read)
// one from h to its size. proof comes from the log (audit/postgres
// Store.ConsistencyProof, or the server's consistency route). At least k
// witnesses must answer; every answer must agree, whatever k is: one
// witness that contradicts the log is a fork.
//
// It asks the witnesses, not the log's database: cosignatures remembered
// there survive a rollback of that database; the witnesses' memory does
// not roll back with it.
//
// Errors: *ContradictedError (errors.Is audit.ErrFork or
// audit.ErrSmallerTree) for the first witness the log contradicts;
// audit.ErrTooFewCosignatures (wrapping each unanswered witness's error)
// when fewer than k answered.
func VerifyWitnessed(ctx context.Context, clients []*Client, logKey string, h audit.TreeHead, proof ProofFunc, k int) ([]Observation, error) {
	var got []Observation
	var missing []error
	for _, c := range clients {
		wh, msg, err := c.Latest(ctx, logKey)
		if err != nil {
			missing = append(missing, err)
			continue
		}
		cs, err := audit.CheckCosignatures(msg, []string{c.VerifierKey()}, 1)
		if err != nil {
			missing = append(missing, err)
			continue
		}
		if err := extends(ctx, h, wh, proof); err != nil {
			return got, &ContradictedError{Witness: c.Name(), WitnessSize: wh.Size, Size: h.Size, Err: err}
		}
		got = append(got, Observation{Witness: c.Name(), Head: wh, Time: cs[0].Time, Note: msg})
	}
	if len(got) < k {
		return got, fmt.Errorf("%w: %d of %d witnesses answered with a cosigned checkpoint: %w",
			audit.ErrTooFewCosignatures, len(got), k, errors.Join(missing...))
	}
	return got, nil
}

// extends checks that h and the witness's w are trees of one log.
func extends(ctx context.Context, h, w audit.TreeHead, proof ProofFunc) error {
	switch {
	case w.Size == h.Size:
		if w.Root != h.Root {
			return fmt.Errorf("%w: two roots at size %d", audit.ErrFork, h.Size)
		}
		return nil
	case w.Size < h.Size:
		p, err := proof(ctx, w.Size, h.Size)
		if err != nil {
			return fmt.Errorf("%w: no consistency proof from size %d to %d: %v", audit.ErrFork, w.Size, h.Size, err)
		}
		if err := tlog.CheckTree(p, int64(h.Size), h.Root, int64(w.Size), w.Root); err != nil {
			return fmt.Errorf("%w: size %d does not extend size %d: %v", audit.ErrFork, h.Size, w.Size, err)
		}
		return nil
	default:
		// The witness is ahead: only a log that has its tree proves it.
		p, err := proof(ctx, h.Size, w.Size)
		if err != nil {
			return fmt.Errorf("%w: the log cannot prove size %d extends to the witnessed size %d: %v", audit.ErrSmallerTree, h.Size, w.Size, err)
		}
		if err := tlog.CheckTree(p, int64(w.Size), w.Root, int64(h.Size), h.Root); err != nil {
			return fmt.Errorf("%w: the witnessed size %d does not extend size %d: %v", audit.ErrFork, w.Size, h.Size, err)
		}
		return nil
	}
}

// Combine returns one checkpoint carrying the cosignatures of every
// observation at the largest size at least k witnesses answered with: what
// a verifier requiring k cosignatures (audit.VerifyCosigned) checks, each
// cosignature as fresh as the witness's answer.
//
// Errors: audit.ErrTooFewCosignatures when no size has k answers (the
// witnesses are at different sizes, or fewer than k answered);
// audit.ErrMalformed for a note that is not a signed note.
func Combine(obs []Observation, k int) ([]byte, error) {
	count := map[uint64]int{}
	var best uint64
	for _, o := range obs {
		count[o.Head.Size]++
		if count[o.Head.Size] >= k && o.Head.Size > best {
			best = o.Head.Size
		}
	}
	if k < 1 || best == 0 {
		return nil, fmt.Errorf("%w: no tree size cosigned by %d of the %d witnesses that answered", audit.ErrTooFewCosignatures, k, len(obs))
	}
	var out []byte
	for _, o := range obs {
		if o.Head.Size != best {
			continue
		}
		if out == nil {
			out = append([]byte(nil), o.Note...)
			continue
		}
		i := bytes.LastIndex(o.Note, []byte("\n\n"))
		if i < 0 {
			return nil, fmt.Errorf("%w: witness %s answered no signed note", audit.ErrMalformed, o.Witness)
		}
		var err error
		if out, err = audit.AddCosignatures(out, o.Note[i+2:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
