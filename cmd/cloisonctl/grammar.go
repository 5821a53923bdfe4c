package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/tokenizer"
)

func newGrammarCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "grammar", Short: "Constrained decoding tools (engine/grammar)"}
	var top int
	var verbose bool
	var profile string
	var opt grammarBenchOptions
	bench := &cobra.Command{
		Use:   "bench DIR",
		Short: "Run MaskBench's correctness methodology over a directory of its test files",
		Long: `bench reads every *.json file of DIR (MaskBench's data/ layout: "schema" and
"tests", each test a "data" instance and whether it is "valid"), compiles each
schema with engine/grammar and checks, without a tokenizer, that the grammar
accepts every valid instance (compact JSON, keys in the instance's order) and
rejects every invalid one. A schema passes when it compiles and every check
agrees. It prints passing schemas, compile errors, validation errors (a valid
instance refused), invalidation errors (an invalid instance accepted; must be
0: the grammar is sound) and the most frequent refusal reasons.

Compile time (TTFM without a vocabulary) is FromSchema's wall time on one
goroutine. With --vocab (a GGUF file, e.g. llama.cpp's
models/ggml-vocab-llama-bpe.gguf: make llama-vocab) it also runs
MaskBench's mask methodology: each valid instance tokenized, the mask
computed before every token (TBM: Matcher.Allowed's time) and the token
checked against it, and TTFM is the compile plus the first mask. --every N
takes every Nth file (a deterministic sample).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if profile != "" {
				pf, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			rep, err := runGrammarBench(args[0], opt)
			if err != nil {
				return err
			}
			rep.write(cmd.OutOrStdout(), top, verbose)
			rep.writeSlowest(cmd.OutOrStdout(), opt.slowest)
			return nil
		},
	}
	bench.Flags().IntVar(&top, "top", 25, "refusal reasons to list")
	bench.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	bench.Flags().BoolVarP(&verbose, "verbose", "v", false, "list the files whose valid instances were refused")
	bench.Flags().StringVar(&opt.vocab, "vocab", "", "GGUF file whose tokenizer the mask methodology (TBM, TTFM) runs with")
	bench.Flags().IntVar(&opt.every, "every", 1, "take every Nth file only")
	bench.Flags().IntVar(&opt.slowest, "slowest", 0, "list the N slowest compiles")
	cmd.AddCommand(bench)
	return cmd
}

type grammarBenchOptions struct {
	vocab   string
	every   int
	slowest int
}

type grammarBenchReport struct {
	schemas, passing, compileErrors, validationErrors, invalidationErrors int
	validRefused, invalidAccepted                                         int
	compile                                                               []time.Duration
	reasons                                                               map[string]int
	invalidated, refused                                                  []string
	// with a vocabulary: first masks (compile + first Allowed), every
	// mask, and tokens the mask refused although the instance is valid
	ttfm, tbm    []time.Duration
	tokens       int
	tokenRefused int
	vocab        string
	slow         []slowCompile
}

type slowCompile struct {
	file string
	d    time.Duration
}

type maskbenchFile struct {
	Schema json.RawMessage `json:"schema"`
	Tests  []struct {
		Valid bool            `json:"valid"`
		Data  json.RawMessage `json:"data"`
	} `json:"tests"`
}

// placeRE strips the place from a refusal so that reasons group by keyword.
var placeRE = regexp.MustCompile(` at #[^ ]*`)

func runGrammarBench(dir string, opt grammarBenchOptions) (*grammarBenchReport, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.json files in %s", dir)
	}
	sort.Strings(files)
	rep := &grammarBenchReport{reasons: map[string]int{}}
	// One thread: timings are that thread's CPU time (threadCPU).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var tok *tokenizer.Tokenizer
	var vocab *grammar.Vocab
	if opt.vocab != "" {
		gf, err := gguf.Open(opt.vocab)
		if err != nil {
			return nil, err
		}
		if tok, err = tokenizer.FromGGUF(gf); err != nil {
			return nil, err
		}
		vocab = grammar.VocabFrom(tok)
		rep.vocab = fmt.Sprintf("%s (%d tokens)", filepath.Base(opt.vocab), vocab.Len())
	}
	for i, f := range files {
		if opt.every > 1 && i%opt.every != 0 {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var mb maskbenchFile
		if err := json.Unmarshal(raw, &mb); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rep.schemas++
		t0 := threadCPU()
		g, err := grammar.FromSchema(mb.Schema)
		if err != nil {
			rep.compileErrors++
			rep.reasons[placeRE.ReplaceAllString(err.Error(), "")]++
			continue
		}
		d := threadCPU() - t0
		rep.compile = append(rep.compile, d)
		rep.slow = append(rep.slow, slowCompile{filepath.Base(f), d})
		if vocab != nil {
			// TTFM: the compile and the first mask of a fresh matcher.
			t1 := threadCPU()
			if _, err := grammar.NewMatcher(g, vocab).Allowed(); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			rep.ttfm = append(rep.ttfm, d+threadCPU()-t1)
		}
		valErr, invalErr := false, false
		for _, t := range mb.Tests {
			var b bytes.Buffer
			if err := json.Compact(&b, t.Data); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			ok := g.Match(b.Bytes())
			if vocab != nil && t.Valid && ok {
				if !rep.maskRun(g, vocab, tok, b.String()) {
					rep.validRefused++
					valErr = true
				}
			}
			switch {
			case t.Valid && !ok:
				rep.validRefused++
				valErr = true
			case !t.Valid && ok:
				rep.invalidAccepted++
				invalErr = true
			}
		}
		switch {
		case invalErr:
			rep.invalidationErrors++
			rep.invalidated = append(rep.invalidated, filepath.Base(f))
		case valErr:
			rep.validationErrors++
			rep.refused = append(rep.refused, filepath.Base(f))
		default:
			rep.passing++
		}
	}
	return rep, nil
}

func (r *grammarBenchReport) write(w io.Writer, top int, verbose bool) {
	pct := func(n int) float64 { return 100 * float64(n) / float64(max(r.schemas, 1)) }
	fmt.Fprintf(w, "cpu: %s (times: one goroutine locked to one thread, its %s)\n", cpuModel(), threadCPUClock)
	fmt.Fprintf(w, "schemas             %6d\n", r.schemas)
	fmt.Fprintf(w, "passing             %6d (%.1f%%)\n", r.passing, pct(r.passing))
	fmt.Fprintf(w, "compile error       %6d (%.1f%%)\n", r.compileErrors, pct(r.compileErrors))
	fmt.Fprintf(w, "validation error    %6d (%d valid instances refused)\n", r.validationErrors, r.validRefused)
	fmt.Fprintf(w, "invalidation error  %6d (%d invalid instances accepted)\n", r.invalidationErrors, r.invalidAccepted)
	if n := len(r.compile); n > 0 {
		sort.Slice(r.compile, func(i, j int) bool { return r.compile[i] < r.compile[j] })
		q := func(p float64) time.Duration { return r.compile[min(n-1, int(p*float64(n)))] }
		fmt.Fprintf(w, "compile time        p50 %v  p75 %v  p90 %v  p95 %v  p99 %v  max %v\n", q(0.5), q(0.75), q(0.9), q(0.95), q(0.99), r.compile[n-1])
	}
	if r.vocab != "" {
		fmt.Fprintf(w, "vocabulary          %s\n", r.vocab)
		fmt.Fprintf(w, "TTFM                %s\n", percentiles(r.ttfm))
		fmt.Fprintf(w, "TBM                 %s (%d masks, %d valid tokens refused)\n", percentiles(r.tbm), r.tokens, r.tokenRefused)
	}
	for _, f := range r.invalidated {
		fmt.Fprintf(w, "  invalid instance accepted: %s\n", f)
	}
	if verbose {
		for _, f := range r.refused {
			fmt.Fprintf(w, "  valid instance refused: %s\n", f)
		}
	}
	type kv struct {
		k string
		n int
	}
	var list []kv
	for k, n := range r.reasons {
		list = append(list, kv{k, n})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].k < list[j].k
	})
	fmt.Fprintln(w, "top refusal reasons:")
	for i, e := range list {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%6d  %s\n", e.n, strings.TrimSpace(e.k))
	}
}

// maskRun follows the tokens of a valid instance through a matcher, timing
// each mask; false when a mask refuses the next token or the end.
func (r *grammarBenchReport) maskRun(g *grammar.Grammar, v *grammar.Vocab, tok *tokenizer.Tokenizer, text string) bool {
	m := grammar.NewMatcher(g, v)
	for _, id := range tok.Encode(text, false, false) {
		t0 := threadCPU()
		mask, err := m.Allowed()
		r.tbm = append(r.tbm, threadCPU()-t0)
		r.tokens++
		if err != nil || mask[id>>6]&(1<<(id&63)) == 0 || m.Accept(id) != nil {
			r.tokenRefused++
			return false
		}
	}
	return m.Complete()
}

func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return fmt.Sprintf("p50 %v  p75 %v  p90 %v  p95 %v  p99 %v  max %v  mean %v", q(0.5), q(0.75), q(0.9), q(0.95), q(0.99), d[len(d)-1], sum/time.Duration(len(d)))
}

func (r *grammarBenchReport) writeSlowest(w io.Writer, n int) {
	if n <= 0 {
		return
	}
	sort.Slice(r.slow, func(i, j int) bool { return r.slow[i].d > r.slow[j].d })
	fmt.Fprintln(w, "slowest compiles:")
	for i, s := range r.slow {
		if i == n {
			break
		}
		fmt.Fprintf(w, "%12v  %s\n", s.d, s.file)
	}
}
