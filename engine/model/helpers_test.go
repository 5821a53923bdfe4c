package model

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

func parse(t testing.TB, w *gguf.Writer) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func randomFile(t testing.TB, c synth.Config) *gguf.File {
	t.Helper()
	w, err := synth.Random(c)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, w)
}

func backend(t testing.TB) kernels.Backend {
	t.Helper()
	b, err := cpu.New(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func load(t testing.TB, b kernels.Backend, f *gguf.File) *Model {
	t.Helper()
	m, err := Load(b, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// kv is a pool plus arena: the KV memory of one test.
type kv struct {
	pool  *isolation.Pool
	arena kernels.Arena
	m     *Model
}

func newKV(t testing.TB, m *Model, pages, pageTokens int, tenants ...cloison.TenantID) *kv {
	t.Helper()
	p, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pageTokens})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tenants {
		if err := p.AddTenant(isolation.TenantConfig{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := m.Backend().NewArena(m.ArenaConfig(pages, pageTokens, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	return &kv{pool: p, arena: a, m: m}
}

// seq is one request's decoding state.
type seq struct {
	lease isolation.Lease
	pos   int
}

func (k *kv) start(t testing.TB, tenant cloison.TenantID, req string, tokens int) *seq {
	t.Helper()
	l, err := k.pool.Allocate(tenant, cloison.RequestID(req), tokens)
	if errors.Is(err, isolation.ErrScrubPending) {
		// Scrub BEFORE the pages return: zero them in the arena, then confirm.
		pages := k.pool.ScrubWork()
		if err := k.arena.ZeroPages(pages); err != nil {
			t.Fatal(err)
		}
		if err := k.pool.ConfirmScrub(pages); err != nil {
			t.Fatal(err)
		}
		l, err = k.pool.Allocate(tenant, cloison.RequestID(req), tokens)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &seq{lease: l}
}

// step records the writes, builds fresh tables and runs one Forward over the
// given sequences (each with its new tokens).
func (k *kv) step(t testing.TB, seqs []*seq, toks [][]int32, all bool) [][]float32 {
	t.Helper()
	batch := make([]Seq, len(seqs))
	for i, s := range seqs {
		if err := k.pool.Write(s.lease, len(toks[i])); err != nil {
			t.Fatal(err)
		}
		bt, err := k.pool.BlockTable(s.lease, s.pos+len(toks[i]))
		if err != nil {
			t.Fatal(err)
		}
		batch[i] = Seq{Table: bt, Pos: s.pos, Tokens: toks[i]}
	}
	out, err := k.m.Forward(k.arena, batch, all)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		s.pos += len(toks[i])
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

func tokens(n, vocab int, seed int) []int32 {
	out := make([]int32, n)
	x := uint32(seed*2654435761 + 1)
	for i := range out {
		x = x*1664525 + 1013904223
		out[i] = int32(x>>8) % int32(vocab)
	}
	return out
}

func name(c synth.Config) string {
	mix := ""
	if c.KQuantMix {
		mix = "_M"
	}
	w := ""
	if c.Window > 0 {
		w = fmt.Sprintf("-w%d", c.Window)
	}
	return fmt.Sprintf("%v%s-L%d-d%d-h%d-kv%d-tied%v%s", c.DType, mix, c.Layers, c.DModel, c.Heads, c.KVHeads, c.Tied, w)
}
