package witness

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// Log is what a Submitter needs of the ledger (audit/postgres Store).
type Log interface {
	// TreeCheckpoint returns the latest signed tree checkpoint.
	TreeCheckpoint(ctx context.Context) ([]byte, error)
	// ConsistencyProof proves that the tree of newSize extends oldSize.
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) (tlog.TreeProof, error)
	// StoreCosignature keeps a witness's verified cosignature line(s) on
	// the stored checkpoint of that size.
	StoreCosignature(ctx context.Context, size uint64, witness string, lines []byte) error
	// WitnessedSize returns the largest size the witness named witness
	// has a stored cosignature for (0: none).
	WitnessedSize(ctx context.Context, witness string) (uint64, error)
}

// Stat is one witness's submission counts.
type Stat struct {
	Witness   string
	Size      uint64 // the size it last cosigned, as this submitter knows
	Cosigned  uint64 // checkpoints it cosigned
	Refused   uint64 // refusals (*RefusedError): the log or the witness is wrong
	Failures  uint64 // no usable answer (ErrUnreachable) or a local error
	LastError string
}

// Submitter sends each new tree checkpoint of a log to its witnesses and
// stores their cosignatures. It runs beside the ledger and never holds up
// an append: it reads the stored checkpoint, and a witness that fails is
// logged and counted, then tried again with the next checkpoint.
type Submitter struct {
	log     Log
	logKey  string
	clients []*Client
	logger  *slog.Logger

	mu      sync.Mutex // guards stats, done, refused and lastErr
	lastErr string     // the last error reading the log's checkpoint, logged once
	stats   []Stat
	done    []uint64 // per client: the largest size submitted successfully
	refused []uint64 // per client: the size it last refused (not offered again)
}

// NewSubmitter returns a submitter of log's checkpoints (verified with the
// log's note verifier key logKey) to clients. Each client whose size is
// unknown (0) starts from the size log holds a cosignature for.
//
// Errors: those of log.WitnessedSize.
func NewSubmitter(ctx context.Context, log Log, logKey string, clients []*Client, logger *slog.Logger) (*Submitter, error) {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Submitter{log: log, logKey: logKey, clients: clients, logger: logger,
		stats: make([]Stat, len(clients)), done: make([]uint64, len(clients)), refused: make([]uint64, len(clients))}
	for i, c := range clients {
		if c.Size() == 0 {
			n, err := log.WitnessedSize(ctx, c.Name())
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			c.size = n
			c.mu.Unlock()
		}
		s.stats[i].Witness = c.Name()
	}
	return s, nil
}

// Run submits every interval until ctx ends.
func (s *Submitter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.SubmitLatest(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SubmitLatest submits the latest stored checkpoint to every witness that
// has not cosigned it yet, one after the other, and returns each one's
// error (nil: cosigned, or nothing new). A checkpoint that does not verify
// with the log key is submitted to none.
func (s *Submitter) SubmitLatest(ctx context.Context) []error {
	errs := make([]error, len(s.clients))
	cp, err := s.log.TreeCheckpoint(ctx)
	if errors.Is(err, audit.ErrNoCheckpoint) {
		return errs
	}
	var h audit.TreeHead
	if err == nil {
		h, err = audit.OpenTreeHead(cp, s.logKey)
	}
	if err != nil {
		// Logged once while it lasts (a ledger that refuses to sign
		// answers the same refusal every round); counted every round.
		s.mu.Lock()
		repeated := s.lastErr == err.Error()
		s.lastErr = err.Error()
		s.mu.Unlock()
		if !repeated {
			s.logger.Error("witness: latest checkpoint", "err", err)
		}
		for i := range errs {
			errs[i] = err
			s.count(i, 0, err)
		}
		return errs
	}
	s.mu.Lock()
	s.lastErr = ""
	s.mu.Unlock()
	for i, c := range s.clients {
		s.mu.Lock()
		// A refused size is not offered again (the refusal was logged
		// once); an unreachable witness is retried every round.
		fresh := h.Size > s.done[i] && h.Size != s.refused[i]
		s.mu.Unlock()
		if !fresh {
			continue
		}
		errs[i] = s.submit(ctx, i, c, cp, h)
	}
	return errs
}

func (s *Submitter) submit(ctx context.Context, i int, c *Client, cp []byte, h audit.TreeHead) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lines, err := c.Submit(ctx, cp, h, s.log.ConsistencyProof)
	if err == nil {
		err = s.log.StoreCosignature(ctx, h.Size, c.Name(), lines)
	}
	s.count(i, h.Size, err)
	var re *RefusedError
	switch {
	case errors.As(err, &re):
		s.logger.Error("witness refused the log's checkpoint", "witness", c.Name(), "reason", string(re.Reason),
			"size", h.Size, "witness_size", re.WitnessSize, "err", err)
	case err != nil:
		s.logger.Warn("witness submission failed", "witness", c.Name(), "size", h.Size, "err", err)
	}
	return err
}

func (s *Submitter) count(i int, size uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.stats[i]
	var re *RefusedError
	switch {
	case err == nil:
		st.Cosigned++
		st.Size = size
		if size > s.done[i] {
			s.done[i] = size
		}
		return
	case errors.As(err, &re):
		st.Refused++
		s.refused[i] = size
	default:
		st.Failures++
	}
	st.LastError = err.Error()
}

// Stats returns each witness's counts.
func (s *Submitter) Stats() []Stat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Stat(nil), s.stats...)
}
