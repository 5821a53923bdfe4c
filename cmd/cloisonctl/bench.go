package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// benchConfig is what `cloisonctl bench` measures.
type benchConfig struct {
	prompts, batches, threads []int
	decode, reps              int
	path, cpuProfile          string
	jsonOut, logits           bool
	kv                        string
}

// benchResult is one measured (threads, prompt, batch) point: the best of
// the repetitions for prefill and for decode.
type benchResult struct {
	Threads     int     `json:"threads"`
	Prompt      int     `json:"prompt_tokens"`
	Batch       int     `json:"batch"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeSteps int     `json:"decode_steps"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	// DecodeTokCPU is batch·steps per second of the process's CPU time
	// over the decode steps of the best repetition by CPU time (0 where the
	// platform does not say): on a shared machine it varies far less than
	// wall time, and with --threads 1 it is one core's rate.
	DecodeTokCPU float64 `json:"decode_tok_cpu_s,omitempty"`
	PrefillMilli float64 `json:"prefill_ms"`
	DecodeMilli  float64 `json:"decode_ms"`
	// Logits (--logits) are sequence 0's logits at its last prompt token
	// after the prefill of the first repetition.
	Logits []float32 `json:"logits,omitempty"`
}

type benchReport struct {
	Model   string        `json:"model"`
	CPU     string        `json:"cpu"`
	Paths   []cpu.Path    `json:"cpu_paths"`
	Path    cpu.Path      `json:"path"`
	GOARCH  string        `json:"goarch"`
	KVType  string        `json:"kv_type"`
	Results []benchResult `json:"results"`
}

func newBenchCmd() *cobra.Command {
	var c benchConfig
	cmd := &cobra.Command{
		Use:   "bench MODEL.gguf",
		Short: "Measure prefill and decode tokens/s on the CPU backend (like llama-bench)",
		Long: `bench loads MODEL.gguf on the CPU backend and, for every thread count,
prompt length and batch size, prefills batch prompts of that many token ids in
one forward step, then decodes --decode greedy steps for the whole batch. After
an untimed warm-up (one sequence's prefill of up to 32 tokens and one decode
step, as llama-bench's) it reports the best of --reps repetitions: prefill
tok/s (batch·prompt / time of
the step) and decode tok/s (batch·steps / time), and the CPU kernel path
(--path, else CLOISON_CPU, else the fastest the CPU runs).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.cpuProfile != "" {
				pf, err := os.Create(c.cpuProfile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			rep, err := runBench(args[0], c)
			if err != nil {
				return err
			}
			return writeBench(cmd.OutOrStdout(), rep, c.jsonOut)
		},
	}
	cmd.AddCommand(newBenchServeCmd(), newBenchEmbedCmd())
	f := cmd.Flags()
	f.IntSliceVar(&c.prompts, "prompt", []int{128}, "prompt lengths in tokens")
	f.IntSliceVar(&c.batches, "batch", []int{1}, "batch sizes (sequences per step)")
	f.IntSliceVar(&c.threads, "threads", []int{1}, "thread counts")
	f.IntVar(&c.decode, "decode", 63, "greedy decode steps after the prompt (0: prefill only)")
	f.IntVar(&c.reps, "reps", 3, "repetitions (the best is reported)")
	f.StringVar(&c.path, "path", "", "CPU kernel path: generic, avx2, avx512 or amx (default CLOISON_CPU, else the fastest)")
	f.BoolVar(&c.jsonOut, "json", false, "JSON output")
	f.StringVar(&c.kv, "kv-type", "f32", "element type of the KV arena: f32 or f16 (llama.cpp's default)")
	f.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	f.BoolVar(&c.logits, "logits", false, "report sequence 0's logits after the first prefill (JSON output; make peer-bench compares them with llama.cpp's)")
	return cmd
}

func (c benchConfig) check() error {
	for _, l := range []struct {
		name string
		v    []int
		max  int
	}{{"prompt", c.prompts, 1 << 20}, {"batch", c.batches, 4096}, {"threads", c.threads, 4096}} {
		if len(l.v) == 0 {
			return fmt.Errorf("--%s: need at least one value", l.name)
		}
		for _, v := range l.v {
			if v <= 0 || v > l.max {
				return fmt.Errorf("--%s %d: want 1…%d", l.name, v, l.max)
			}
		}
	}
	if c.decode < 0 || c.decode > 1<<20 {
		return fmt.Errorf("--decode %d: want 0…%d", c.decode, 1<<20)
	}
	if _, err := kernels.ParseKVType(c.kv); err != nil {
		return fmt.Errorf("--kv-type %q: want f32 or f16", c.kv)
	}
	if c.reps <= 0 || c.reps > 1000 {
		return fmt.Errorf("--reps %d: want 1…1000", c.reps)
	}
	return nil
}

func runBench(path string, c benchConfig) (*benchReport, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv, _ := kernels.ParseKVType(c.kv) // checked
	rep := &benchReport{Model: path, CPU: cpuModel(), Paths: cpu.Paths(), GOARCH: runtime.GOARCH, KVType: kv.String()}
	for _, th := range c.threads {
		b, err := openBenchBackend(th, c.path)
		if err != nil {
			return nil, err
		}
		rep.Path = b.Path()
		m, err := model.Load(b, f)
		if err != nil {
			b.Close()
			return nil, err
		}
		for _, p := range c.prompts {
			for _, bs := range c.batches {
				if p+c.decode > m.Context {
					m.Close()
					b.Close()
					return nil, fmt.Errorf("prompt %d + decode %d exceeds the model's context of %d", p, c.decode, m.Context)
				}
				r, err := benchPoint(m, kv, th, p, bs, c.decode, c.reps, c.logits)
				if err != nil {
					m.Close()
					b.Close()
					return nil, err
				}
				rep.Results = append(rep.Results, r)
			}
		}
		m.Close()
		b.Close()
	}
	return rep, nil
}

func openBenchBackend(threads int, path string) (*cpu.Backend, error) {
	if path == "" {
		return cpu.New(kernels.Options{Threads: threads})
	}
	return cpu.NewWithPath(kernels.Options{Threads: threads}, cpu.Path(path))
}

// benchPoint measures one (threads, prompt, batch) point over a fresh pool
// and arena holding exactly the batch's pages.
func benchPoint(m *model.Model, kv kernels.KVType, threads, prompt, batch, decode, reps int, keepLogits bool) (benchResult, error) {
	const pageTokens = 16
	perSeq := (prompt + decode + pageTokens - 1) / pageTokens
	pages := batch * perSeq
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pageTokens})
	if err != nil {
		return benchResult{}, err
	}
	const tenant = cloison.TenantID("bench")
	if err := pool.AddTenant(isolation.TenantConfig{ID: tenant}); err != nil {
		return benchResult{}, err
	}
	arena, err := m.Backend().NewArena(m.ArenaConfig(pages, pageTokens, kv))
	if err != nil {
		return benchResult{}, err
	}
	res := benchResult{Threads: threads, Prompt: prompt, Batch: batch, DecodeSteps: decode}
	prompts := make([][]int32, batch)
	for i := range prompts {
		prompts[i] = benchTokens(prompt, m.Vocab, i)
	}
	if err := benchWarmup(m, pool, arena, tenant, prompts[0][:min(prompt, 32)], decode > 0); err != nil {
		return res, err
	}
	for rep := range reps {
		leases := make([]isolation.Lease, batch)
		for i := range leases {
			if leases[i], err = allocate(pool, arena, tenant, cloison.RequestID(fmt.Sprintf("r%d-%d", rep, i)), prompt+decode); err != nil {
				return res, err
			}
		}
		pos := make([]int, batch)
		step := func(toks [][]int32) ([][]float32, error) {
			seqs := make([]model.Seq, batch)
			for i, l := range leases {
				if err := pool.Write(l, len(toks[i])); err != nil {
					return nil, err
				}
				bt, err := pool.BlockTable(l, pos[i]+len(toks[i]))
				if err != nil {
					return nil, err
				}
				seqs[i] = model.Seq{Table: bt, Pos: pos[i], Tokens: toks[i]}
			}
			out, err := m.Forward(arena, seqs, false)
			for i := range pos {
				pos[i] += len(toks[i])
			}
			return out, err
		}
		t0 := time.Now()
		logits, err := step(prompts)
		if err != nil {
			return res, err
		}
		pre := time.Since(t0)
		if keepLogits && rep == 0 {
			res.Logits = slices.Clone(logits[0])
		}
		next := make([][]int32, batch)
		t0, c0 := time.Now(), cpuTime()
		for range decode {
			for i := range next {
				next[i] = []int32{argmax(logits[i])}
			}
			if logits, err = step(next); err != nil {
				return res, err
			}
		}
		dec, cdec := time.Since(t0), cpuTime()-c0
		for _, l := range leases {
			if err := pool.Release(l); err != nil {
				return res, err
			}
		}
		res.keepBest(rep == 0, pre, dec, cdec)
	}
	return res, nil
}

// benchWarmup runs an untimed warm-up as llama-bench does before it
// measures: one sequence's prefill of toks (at most 32 tokens) and, with
// step, one decode step, so that the first repetition does not pay for
// faulting the weights in from the file or growing the buffers.
func benchWarmup(m *model.Model, pool *isolation.Pool, arena kernels.Arena, tenant cloison.TenantID, toks []int32, step bool) error {
	steps := [][]int32{toks}
	if step {
		steps = append(steps, []int32{0})
	}
	l, err := allocate(pool, arena, tenant, "warmup", len(toks)+len(steps)-1)
	if err != nil {
		return err
	}
	pos := 0
	for _, in := range steps {
		if err := pool.Write(l, len(in)); err != nil {
			return err
		}
		bt, err := pool.BlockTable(l, pos+len(in))
		if err != nil {
			return err
		}
		if _, err := m.Forward(arena, []model.Seq{{Table: bt, Pos: pos, Tokens: in}}, false); err != nil {
			return err
		}
		pos += len(in)
	}
	return pool.Release(l)
}

// keepBest records a repetition's prefill and decode times (wall, and CPU
// for decode) where they beat the best so far (first: the first one).
func (res *benchResult) keepBest(first bool, pre, dec, cdec time.Duration) {
	batch, prompt, decode := res.Batch, res.Prompt, res.DecodeSteps
	if ms := pre.Seconds() * 1e3; first || ms < res.PrefillMilli {
		res.PrefillMilli = ms
		res.PrefillTokS = float64(batch*prompt) / pre.Seconds()
	}
	if decode > 0 {
		if ms := dec.Seconds() * 1e3; first || ms < res.DecodeMilli {
			res.DecodeMilli = ms
			res.DecodeTokS = float64(batch*decode) / dec.Seconds()
		}
		if c := float64(batch*decode) / cdec.Seconds(); cdec > 0 && c > res.DecodeTokCPU {
			res.DecodeTokCPU = c
		}
	}
}

// allocate leases pages, zeroing scrubbed pages in the arena first when the
// pool asks for it.
func allocate(pool *isolation.Pool, arena kernels.Arena, tenant cloison.TenantID, req cloison.RequestID, tokens int) (isolation.Lease, error) {
	l, err := pool.Allocate(tenant, req, tokens)
	if errors.Is(err, isolation.ErrScrubPending) {
		pages := pool.ScrubWork()
		if err := arena.ZeroPages(pages); err != nil {
			return l, err
		}
		if err := pool.ConfirmScrub(pages); err != nil {
			return l, err
		}
		l, err = pool.Allocate(tenant, req, tokens)
	}
	return l, err
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// benchTokens is a fixed pseudo-random prompt of n token ids (the same ids
// every run, so that runs compare).
func benchTokens(n, vocab, seed int) []int32 {
	out := make([]int32, n)
	x := uint32(seed*2654435761 + 1)
	for i := range out {
		x = x*1664525 + 1013904223
		out[i] = int32(x>>8) % int32(vocab)
	}
	return out
}

// cpuModel is the "model name" line of /proc/cpuinfo, else GOARCH.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func writeBench(w io.Writer, rep *benchReport, asJSON bool) error {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(rep)
	}
	fmt.Fprintf(w, "model %s\ncpu %s (paths %v), path %s, kv %s\n", rep.Model, rep.CPU, rep.Paths, rep.Path, rep.KVType)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "threads\tprompt\tbatch\tprefill tok/s\tdecode steps\tdecode tok/s\tdecode tok/cpu-s")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%d\t%.1f\t%.1f\n", r.Threads, r.Prompt, r.Batch, r.PrefillTokS, r.DecodeSteps, r.DecodeTokS, r.DecodeTokCPU)
	}
	return tw.Flush()
}
