package service

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
)

// Choices (n > 1): one request, n sequences of the engine, each its own
// stream, sampled with its own seed (choiceSeed), and ledgered together in
// one request.completed (servedN: every choice's seed and keyed digests).
// Each transport decodes each choice with its own grammar matcher and
// tool-call parser.

// choiceSeed is the seed of choice i of a request whose seed is seed:
// choice 0 runs with the request's seed itself (so n = 1 is unchanged),
// choice i > 0 with SplitMix64's mix of seed + i·0x9e3779b97f4a7c15. It is
// a pure function: the same request with a seed gives the same n choices.
func choiceSeed(seed uint64, i int) uint64 {
	if i == 0 {
		return seed
	}
	z := seed + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// choiceID is the engine's id of choice i's sequence: the request's id for
// choice 0, the id and ".c<i>" for the others.
func choiceID(id cloison.RequestID, i int) cloison.RequestID {
	if i == 0 {
		return id
	}
	return cloison.RequestID(id + ".c" + cloison.RequestID(strconv.Itoa(i)))
}

// choiceRun is one choice's stream and what it generated (for its keyed
// digests, never stored).
type choiceRun struct {
	st   *engine.Stream
	n    int
	ids  []int32
	text strings.Builder
}

type choiceEvent struct {
	choice int
	tok    engine.Token
	done   bool
	err    error
}

// read forwards st's tokens to events until it ends; when the client went
// away it cancels the sequence and waits for its summary (the ledger needs
// it).
func read(ctx context.Context, choice int, st *engine.Stream, events chan<- choiceEvent) {
	for {
		tok, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			events <- choiceEvent{choice: choice, done: true}
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				st.Cancel()
				err = drainErr(st, err)
			}
			events <- choiceEvent{choice: choice, done: true, err: err}
			return
		}
		events <- choiceEvent{choice: choice, tok: tok}
	}
}

// runChoices submits the request's sequences and hands their tokens to
// sink, one goroutine calling it. Choice 0 is submitted first; with the
// prefix cache on, the others only once it has computed the prompt (its
// first token), so that they find the prompt's full pages in the tenant's
// prefix-cache namespace and share them instead of computing them again —
// pages of the same tenant only (isolation: the namespace is salted per
// tenant). submitErr is choice 0's Submit error (nothing started); endErr
// the first failure after sink.Started (a later choice refused, a stream
// failed), which ends the response with an error: every started stream is
// then cancelled and drained before runChoices returns.
func (s *Requests) runChoices(ctx context.Context, greqs []engine.GenerateRequest, sink Sink) (runs []*choiceRun, endErr, submitErr error) {
	st, err := s.cfg.Engine.Submit(ctx, greqs[0])
	if err != nil {
		return nil, nil, err
	}
	if sink.Started != nil {
		sink.Started()
	}
	events := make(chan choiceEvent, 64)
	runs = []*choiceRun{{st: st}}
	go read(ctx, 0, st, events)
	open := 1
	fail := func(err error) {
		if endErr == nil {
			endErr = err
			for _, run := range runs {
				run.st.Cancel()
			}
		}
	}
	handle := func(ev choiceEvent) {
		run := runs[ev.choice]
		if ev.done {
			open--
			if ev.err != nil {
				fail(ev.err)
			}
			return
		}
		if ev.tok.ID >= 0 {
			run.n++
			if ev.tok.Gap > 0 {
				s.obs.OnTokenGap(ev.tok.Gap)
			}
			run.ids = append(run.ids, ev.tok.ID)
		}
		run.text.WriteString(ev.tok.Text)
		if sink.Token != nil && endErr == nil {
			sink.Token(ev.choice, ev.tok)
		}
	}
	if len(greqs) > 1 && s.cfg.Engine.PrefixCache() {
		// Wait for choice 0's first token (its prompt computed and
		// published) or its end.
		for open > 0 && runs[0].n == 0 {
			handle(<-events)
		}
	}
	for i := 1; i < len(greqs) && endErr == nil; i++ {
		st, err := s.cfg.Engine.Submit(ctx, greqs[i])
		if err != nil {
			fail(err)
			break
		}
		runs = append(runs, &choiceRun{st: st})
		open++
		go read(ctx, i, st, events)
	}
	for open > 0 {
		handle(<-events)
	}
	return runs, endErr, nil
}

// completedN ledgers request.completed for all the request's choices:
// the prompt counted once, generated and cached tokens and pages summed,
// the duration the longest (completed, for n choices).
func (s *Requests) completedN(ctx context.Context, part isolation.Partition, id cloison.RequestID, runs []*choiceRun, endErr error, sv *audit.Served, pl *audit.Placement) (string, error) {
	var agg engine.Summary
	var dur time.Duration
	for i, run := range runs {
		sum, _ := run.st.Summary()
		s.obs.OnSequenceEnd(sum, s.cfg.Engine.PrefixCache())
		if i == 0 {
			agg = sum
		} else {
			agg.Generated += sum.Generated
			agg.Cached += sum.Cached
			agg.Pages += sum.Pages
		}
		dur = max(dur, sum.Duration)
	}
	var adapter *audit.Digest
	if agg.Adapter != ([32]byte{}) {
		d := audit.Digest(agg.Adapter)
		adapter = &d
	}
	return s.stageReceipted(ctx, agg.Tenant, id, audit.RequestCompleted{Request: id, Model: audit.Name(s.cfg.ModelName), ModelDigest: s.modelDigest(), AdapterDigest: adapter, Status: cloison.ErrorCode(endErr),
		PromptTokens: int64(agg.Prompt), CompletionTokens: int64(agg.Generated), CachedTokens: int64(agg.Cached), Pages: int64(agg.Pages),
		Tier: audit.Name(part.Zeroing.String()), DurationMicros: dur.Microseconds(), Served: sv, Placement: pl})
}

// servedN is Config.Served for the request's choices: choice 0's digests
// in the entry's own fields, and for n > 1 every choice's seed and digests
// in Choices. A choice that never started (a later one refused) has none:
// the entry's status says the request was not served.
func (s *Requests) servedN(t cloison.TenantID, greqs []engine.GenerateRequest, runs []*choiceRun, clientSeed bool) *audit.Served {
	if s.cfg.Served == nil {
		return nil
	}
	sv := s.cfg.Served(t, greqs[0], runs[0].ids, runs[0].text.String(), clientSeed)
	if sv == nil || len(greqs) == 1 {
		return sv
	}
	for i, run := range runs {
		// Every choice's digests under the same tenant key as choice 0's.
		c := s.cfg.Served(t, greqs[i], run.ids, run.text.String(), clientSeed)
		if c == nil {
			return nil
		}
		sv.Choices = append(sv.Choices, audit.ServedChoice{Index: int64(i), Seed: audit.Name(strconv.FormatUint(greqs[i].Sampling.Seed, 10)),
			Completion: c.Completion, CompletionText: c.CompletionText})
	}
	return sv
}

// drainErr waits for st to end after the client went away, so that its
// summary exists for the ledger, and returns the stream's own error or
// fallback.
func drainErr(st *engine.Stream, fallback error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, err := st.Next(ctx); err != nil {
			if errors.Is(err, io.EOF) {
				return fallback
			}
			return err
		}
	}
}
