package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/engine/grammar"
)

func newGrammarCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "grammar", Short: "Constrained decoding tools (engine/grammar)"}
	var top int
	var verbose bool
	var profile string
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
0: the grammar is sound) and the most frequent refusal reasons.`,
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
			rep, err := runGrammarBench(args[0])
			if err != nil {
				return err
			}
			rep.write(cmd.OutOrStdout(), top, verbose)
			return nil
		},
	}
	bench.Flags().IntVar(&top, "top", 25, "refusal reasons to list")
	bench.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	bench.Flags().BoolVarP(&verbose, "verbose", "v", false, "list the files whose valid instances were refused")
	cmd.AddCommand(bench)
	return cmd
}

type grammarBenchReport struct {
	schemas, passing, compileErrors, validationErrors, invalidationErrors int
	validRefused, invalidAccepted                                         int
	compile                                                               []time.Duration
	reasons                                                               map[string]int
	invalidated, refused                                                  []string
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

func runGrammarBench(dir string) (*grammarBenchReport, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.json files in %s", dir)
	}
	sort.Strings(files)
	rep := &grammarBenchReport{reasons: map[string]int{}}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var mb maskbenchFile
		if err := json.Unmarshal(raw, &mb); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rep.schemas++
		t0 := time.Now()
		g, err := grammar.FromSchema(mb.Schema)
		if err != nil {
			rep.compileErrors++
			rep.reasons[placeRE.ReplaceAllString(err.Error(), "")]++
			continue
		}
		rep.compile = append(rep.compile, time.Since(t0))
		valErr, invalErr := false, false
		for _, t := range mb.Tests {
			var b bytes.Buffer
			if err := json.Compact(&b, t.Data); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			ok := g.Match(b.Bytes())
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
	fmt.Fprintf(w, "cpu: %s\n", cpuModel())
	fmt.Fprintf(w, "schemas             %6d\n", r.schemas)
	fmt.Fprintf(w, "passing             %6d (%.1f%%)\n", r.passing, pct(r.passing))
	fmt.Fprintf(w, "compile error       %6d (%.1f%%)\n", r.compileErrors, pct(r.compileErrors))
	fmt.Fprintf(w, "validation error    %6d (%d valid instances refused)\n", r.validationErrors, r.validRefused)
	fmt.Fprintf(w, "invalidation error  %6d (%d invalid instances accepted)\n", r.invalidationErrors, r.invalidAccepted)
	if n := len(r.compile); n > 0 {
		sort.Slice(r.compile, func(i, j int) bool { return r.compile[i] < r.compile[j] })
		q := func(p float64) time.Duration { return r.compile[min(n-1, int(p*float64(n)))] }
		fmt.Fprintf(w, "compile time        p50 %v  p99 %v  max %v\n", q(0.5), q(0.99), r.compile[n-1])
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
