package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// embedConfig is what `cloisonctl bench embed` measures.
type embedConfig struct {
	inputs, tokens, reps int
	threads              []int
	text, path           string
	jsonOut              bool
	// inputsSet and tokensSet: --inputs and --tokens given explicitly
	// (with --text they are checks, not sizes).
	inputsSet, tokensSet bool
}

// embedResult is one thread count's best repetition.
type embedResult struct {
	Threads     int     `json:"threads"`
	Embeddings  int     `json:"embeddings"`
	Milli       float64 `json:"ms"`
	EmbeddingsS float64 `json:"embeddings_s"`
	// EmbeddingsCPU is embeddings per second of the process's CPU time in
	// the repetition with the least CPU time (0 where the platform does
	// not say).
	EmbeddingsCPU float64 `json:"embeddings_cpu_s,omitempty"`
}

type embedReport struct {
	Model   string        `json:"model"`
	Arch    string        `json:"arch"`
	CPU     string        `json:"cpu"`
	Path    cpu.Path      `json:"path"`
	GOARCH  string        `json:"goarch"`
	Inputs  int           `json:"inputs"`
	Tokens  int           `json:"tokens"` // every input's length, special tokens included
	Text    bool          `json:"text"`   // inputs tokenized from --text
	Reps    int           `json:"reps"`
	Results []embedResult `json:"results"`
}

func newBenchEmbedCmd() *cobra.Command {
	var c embedConfig
	cmd := &cobra.Command{
		Use:   "embed MODEL.gguf",
		Short: "Measure embeddings/s of an encoder (bert, nomic-bert, t5encoder) on the CPU backend",
		Long: `embed loads the encoder MODEL.gguf on the CPU backend and, for every thread
count, computes --inputs embeddings of --tokens tokens each in one forward step
(pooling and normalisation included), as the engine batches them; it reports
the best of --reps repetitions in embeddings per second.

The inputs are pseudo-random token ids unless --text names a file of one input
per line, each tokenized with the model's tokenizer and its special tokens
(bert: [CLS] … [SEP]); then --inputs and --tokens, where given, are checks:
the line count and every line's token count must equal them. make peer-embed
gives llama.cpp's llama-embedding the same file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.inputsSet = cmd.Flags().Changed("inputs")
			c.tokensSet = cmd.Flags().Changed("tokens")
			rep, err := runBenchEmbed(args[0], c)
			if err != nil {
				return err
			}
			return writeBenchEmbed(cmd.OutOrStdout(), rep, c.jsonOut)
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.inputs, "inputs", 64, "inputs per forward step (embeddings per repetition)")
	f.IntVar(&c.tokens, "tokens", 128, "tokens per input")
	f.IntSliceVar(&c.threads, "threads", []int{1}, "thread counts")
	f.IntVar(&c.reps, "reps", 3, "repetitions (the best is reported)")
	f.StringVar(&c.text, "text", "", "file of inputs, one per line, tokenized with the model's tokenizer")
	f.StringVar(&c.path, "path", "", "CPU kernel path: generic, avx2 or avx512 (default CLOISON_CPU, else the fastest)")
	f.BoolVar(&c.jsonOut, "json", false, "JSON output")
	return cmd
}

func (c embedConfig) check() error {
	if c.inputs <= 0 || c.inputs > 4096 {
		return fmt.Errorf("--inputs %d: want 1…4096", c.inputs)
	}
	if c.tokens <= 0 || c.tokens > 1<<16 {
		return fmt.Errorf("--tokens %d: want 1…%d", c.tokens, 1<<16)
	}
	if len(c.threads) == 0 {
		return fmt.Errorf("--threads: need at least one value")
	}
	for _, t := range c.threads {
		if t <= 0 || t > 4096 {
			return fmt.Errorf("--threads %d: want 1…4096", t)
		}
	}
	if c.reps <= 0 || c.reps > 1000 {
		return fmt.Errorf("--reps %d: want 1…1000", c.reps)
	}
	return nil
}

// embedInputs is the batch: --text's lines tokenized (checked against
// --inputs and --tokens where given), else --inputs pseudo-random inputs
// of --tokens ids.
func embedInputs(f *gguf.File, vocab int, c embedConfig) ([][]int32, error) {
	if c.text == "" {
		out := make([][]int32, c.inputs)
		for i := range out {
			out[i] = benchTokens(c.tokens, vocab, i)
		}
		return out, nil
	}
	data, err := os.ReadFile(c.text)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("--text: the model's tokenizer: %w", err)
	}
	var out [][]int32
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			continue
		}
		ids := tok.Encode(line, true, false)
		if c.tokensSet && len(ids) != c.tokens {
			return nil, fmt.Errorf("--text line %d is %d tokens, --tokens %d", len(out)+1, len(ids), c.tokens)
		}
		out = append(out, ids)
	}
	switch {
	case len(out) == 0:
		return nil, fmt.Errorf("--text %s: no inputs", c.text)
	case len(out) > 4096:
		return nil, fmt.Errorf("--text %s: %d inputs, at most 4096", c.text, len(out))
	case c.inputsSet && len(out) != c.inputs:
		return nil, fmt.Errorf("--text %s has %d inputs, --inputs %d", c.text, len(out), c.inputs)
	}
	return out, nil
}

func runBenchEmbed(path string, c embedConfig) (*embedReport, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep := &embedReport{Model: path, CPU: cpuModel(), GOARCH: runtime.GOARCH, Text: c.text != "", Reps: c.reps}
	var inputs [][]int32
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
		if inputs == nil {
			inputs, err = embedInputs(f, m.Vocab, c)
		}
		if err == nil && !m.Encoder {
			err = fmt.Errorf("%s is a %s model, not an encoder", path, m.Arch)
		}
		var r embedResult
		if err == nil {
			rep.Arch, rep.Inputs, rep.Tokens = m.Arch, len(inputs), maxLen(inputs)
			r, err = embedPoint(m, th, inputs, c.reps)
		}
		m.Close()
		b.Close()
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, r)
	}
	return rep, nil
}

func maxLen(inputs [][]int32) int {
	n := 0
	for _, in := range inputs {
		n = max(n, len(in))
	}
	return n
}

// embedPoint computes the batch's embeddings reps times, each in one
// Forward over a fresh lease per input (as the engine does), pooling
// included, and keeps the best.
func embedPoint(m *model.Model, threads int, inputs [][]int32, reps int) (embedResult, error) {
	const pageTokens = 16
	pages := 0
	for _, in := range inputs {
		if len(in) > m.Context {
			return embedResult{}, fmt.Errorf("an input of %d tokens exceeds the model's context of %d", len(in), m.Context)
		}
		pages += (len(in) + pageTokens - 1) / pageTokens
	}
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pageTokens})
	if err != nil {
		return embedResult{}, err
	}
	const tenant = cloison.TenantID("bench")
	if err := pool.AddTenant(isolation.TenantConfig{ID: tenant}); err != nil {
		return embedResult{}, err
	}
	arena, err := m.Backend().NewArena(m.ArenaConfig(pages, pageTokens, kernels.KVF32))
	if err != nil {
		return embedResult{}, err
	}
	res := embedResult{Threads: threads}
	for rep := range reps {
		t0, c0 := time.Now(), cpuTime()
		leases := make([]isolation.Lease, len(inputs))
		batch := make([]model.Seq, len(inputs))
		for i, in := range inputs {
			if leases[i], err = allocate(pool, arena, tenant, cloison.RequestID(fmt.Sprintf("e%d-%d", rep, i)), len(in)); err != nil {
				return res, err
			}
			if err := pool.Write(leases[i], len(in)); err != nil {
				return res, err
			}
			bt, err := pool.BlockTable(leases[i], len(in))
			if err != nil {
				return res, err
			}
			batch[i] = model.Seq{Table: bt, Tokens: in, Hidden: true}
		}
		hidden, err := m.Forward(arena, batch, false)
		if err != nil {
			return res, err
		}
		n := 0
		for i, h := range hidden {
			if _, err := m.PoolHidden(h, len(inputs[i])); err != nil {
				return res, err
			}
			n++
		}
		for _, l := range leases {
			if err := pool.Release(l); err != nil {
				return res, err
			}
		}
		d, cd := time.Since(t0), cpuTime()-c0
		res.Embeddings = n
		if ms := d.Seconds() * 1e3; rep == 0 || ms < res.Milli {
			res.Milli, res.EmbeddingsS = ms, float64(n)/d.Seconds()
		}
		if e := float64(n) / cd.Seconds(); cd > 0 && e > res.EmbeddingsCPU {
			res.EmbeddingsCPU = e
		}
	}
	return res, nil
}

func writeBenchEmbed(w io.Writer, rep *embedReport, asJSON bool) error {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(rep)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "model %s (%s)\ncpu %s, path %s\n%d inputs of %d tokens, best of %d\n", rep.Model, rep.Arch, rep.CPU, rep.Path, rep.Inputs, rep.Tokens, rep.Reps)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "threads\tembeddings\tms\tembeddings/s\tembeddings/cpu-s")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%.1f\n", r.Threads, r.Embeddings, r.Milli, r.EmbeddingsS, r.EmbeddingsCPU)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}
