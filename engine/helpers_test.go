package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// loaded is a model with its tokenizer, shared by the runs of a test.
type loaded struct {
	m   *model.Model
	tok *tokenizer.Tokenizer
	b   kernels.Backend
}

func loadWriter(t testing.TB, w *gguf.Writer, err error) *loaded {
	t.Helper()
	return loadWriterOpts(t, w, err, kernels.Options{})
}

func loadWriterOpts(t testing.TB, w *gguf.Writer, err error, opts kernels.Options) *loaded {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	return &loaded{m: m, tok: tok, b: b}
}

// randomModel is a small random llama (2 layers, d=64, GQA 4/2).
func randomModel(t testing.TB) *loaded {
	w, err := synth.Random(synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 320, Context: 2048, DType: gguf.F32, Seed: 7})
	return loadWriter(t, w, err)
}

// bagModel is the context-bag model (see engine/synth).
func bagModel(t testing.TB, context int) *loaded {
	w, err := synth.ContextBag(synth.BagConfig{Vocab: 320, Context: context})
	return loadWriter(t, w, err)
}

// rig is one engine over a fresh pool and arena.
type rig struct {
	e       *Engine
	pool    *isolation.Pool
	arena   kernels.Arena
	stop    context.CancelFunc
	done    chan error
	mu      sync.Mutex
	summary []Summary
	inc     []Incident
}

type rigConfig struct {
	pool    isolation.Config
	tenants []isolation.TenantConfig
	served  int // 0: attest with the model's context capped by the pool
	sched   SchedulerConfig
	unsafe  Unsafe // faults builds only: admission's length checks off
	arena   func(kernels.Arena) kernels.Arena
	remote  func(pool *isolation.Pool, arena any) *Remote
	now     func() time.Time // the engine's clock (nil: time.Now)
}

func newRig(t testing.TB, l *loaded, rc rigConfig) *rig {
	t.Helper()
	if rc.pool.PageTokens == 0 {
		rc.pool.PageTokens = 16
	}
	pool, err := isolation.NewPool(rc.pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range rc.tenants {
		if err := pool.AddTenant(tc); err != nil {
			t.Fatal(err)
		}
	}
	arena, err := l.b.NewArena(l.m.ArenaConfig(rc.pool.Pages, rc.pool.PageTokens, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	if rc.arena != nil {
		arena = rc.arena(arena)
	}
	served := rc.served
	if served == 0 {
		served = min(l.m.Context, rc.pool.Pages*rc.pool.PageTokens)
	}
	att, err := attest.Capacity(attest.Config{ModelContext: l.m.Context, ServedContext: served, PoolPages: rc.pool.Pages, PageTokens: rc.pool.PageTokens})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{pool: pool, arena: arena, done: make(chan error, 1)}
	var remote *Remote
	if rc.remote != nil {
		remote = rc.remote(pool, arena)
	}
	r.e, err = New(Config{Model: l.m, Tokenizer: l.tok, Pool: pool, Arena: arena, Attestation: att, Scheduler: rc.sched, Remote: remote,
		Unsafe: rc.unsafe, Now: rc.now,
		OnFinish:   func(s Summary) { r.mu.Lock(); r.summary = append(r.summary, s); r.mu.Unlock() },
		OnIncident: func(in Incident) { r.mu.Lock(); r.inc = append(r.inc, in); r.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- r.e.Run(ctx) }()
	t.Cleanup(r.close)
	return r
}

func (r *rig) close() {
	if r.stop != nil {
		r.stop()
		<-r.done
		r.stop = nil
	}
}

func (r *rig) incidents() []Incident {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Incident(nil), r.inc...)
}

func (r *rig) summaries() []Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Summary(nil), r.summary...)
}

// collect reads a stream to its end.
func collect(t testing.TB, s *Stream) ([]int32, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []int32
	var text string
	for {
		tok, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return ids, text, nil
		}
		if err != nil {
			return ids, text, err
		}
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
		text += tok.Text
	}
}

// greedyDirect decodes greedily with the model alone, one sequence, to
// compare the engine with.
func greedyDirect(t testing.TB, l *loaded, prompt []int32, n int) []int32 {
	t.Helper()
	pool, _ := isolation.NewPool(isolation.Config{Pages: 64, PageTokens: 16})
	pool.AddTenant(isolation.TenantConfig{ID: "solo"})
	arena, err := l.b.NewArena(l.m.ArenaConfig(64, 16, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := pool.Allocate("solo", "r", len(prompt)+n)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	toks, pos := prompt, 0
	for range n {
		pool.Write(lease, len(toks))
		bt, err := pool.BlockTable(lease, pos+len(toks))
		if err != nil {
			t.Fatal(err)
		}
		logits, err := l.m.Forward(arena, []model.Seq{{Table: bt, Pos: pos, Tokens: toks}}, false)
		if err != nil {
			t.Fatal(err)
		}
		next := argmax(logits[0])
		out = append(out, next)
		pos += len(toks)
		toks = []int32{next}
	}
	return out
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

func prompt(n int, seed int) []int32 {
	p := make([]int32, n)
	x := uint32(seed*2654435761 + 1)
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = int32(x % 256) // byte tokens: never end-of-generation
	}
	return p
}

var _ = cloison.TenantID("")
