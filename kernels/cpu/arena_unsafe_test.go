//go:build faults

package cpu

import (
	"errors"
	"testing"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// The test-only switch turns the arena's ownership checks off, and only
// them: without it a foreign page is refused, with it the read goes through
// (which is what lets the engine's tests prove the other layers suffice).
func TestUnsafeSkipOwnershipChecks(t *testing.T) {
	for _, skip := range []bool{false, true} {
		b, err := New(kernels.Options{Threads: 1, Unsafe: kernels.Unsafe{SkipOwnershipChecks: skip}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		cfg := kernels.ArenaConfig{Pages: 2, PageTokens: 4, Layers: 1, KVHeads: 1, HeadDim: 4}
		a, _ := b.NewArena(cfg)
		pool, _ := isolation.NewPool(isolation.Config{Pages: 2, PageTokens: 4, DefaultZeroing: isolation.ZeroNever, Unsafe: isolation.Unsafe{SkipFillCheck: true}})
		pool.AddTenant(isolation.TenantConfig{ID: "a"})
		pool.AddTenant(isolation.TenantConfig{ID: "b"})
		// a writes a page, leaves; b gets it and reads it unwritten.
		la, _ := pool.Allocate("a", "r", 4)
		pool.Write(la, 4)
		bt, _ := pool.BlockTable(la, 4)
		k, _ := b.NewTensor(4, 4)
		v, _ := b.NewTensor(4, 4)
		b.Upload(k, []float32{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4})
		b.Upload(v, []float32{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4})
		if err := a.WriteKV(0, k, v, []kernels.Span{{Table: bt, N: 4}}); err != nil {
			t.Fatal(err)
		}
		pool.Release(la)
		lb, _ := pool.Allocate("b", "r", 4)
		pool.Write(lb, 1)
		btb, err := pool.BlockTable(lb, 4) // fill check off in the pool
		if err != nil {
			t.Fatal(err)
		}
		q, _ := b.NewTensor(1, 4)
		out, _ := b.NewTensor(1, 4)
		err = a.Attention(0, out, q, []kernels.Span{{Table: btb, Pos: 3, N: 1}})
		if skip != (err == nil) {
			t.Fatalf("skip=%v: got %v", skip, err)
		}
		if !skip && !errors.Is(err, kernels.ErrTagMismatch) {
			t.Fatalf("got %v, want a tag mismatch", err)
		}
	}
}

// A table kept from a released lease cannot write into its old page once a
// later lease owns it: the write would wipe the new owner's KV.
func TestStaleTableCannotWrite(t *testing.T) {
	b, _ := New(kernels.Options{Threads: 1})
	defer b.Close()
	a, _ := b.NewArena(kernels.ArenaConfig{Pages: 1, PageTokens: 4, Layers: 1, KVHeads: 1, HeadDim: 4})
	pool, _ := isolation.NewPool(isolation.Config{Pages: 1, PageTokens: 4, DefaultZeroing: isolation.ZeroNever})
	pool.AddTenant(isolation.TenantConfig{ID: "a"})
	pool.AddTenant(isolation.TenantConfig{ID: "b"})
	k, _ := b.NewTensor(1, 4)
	b.Upload(k, []float32{1, 2, 3, 4})
	la, _ := pool.Allocate("a", "r", 4)
	pool.Write(la, 1)
	old, _ := pool.BlockTable(la, 1)
	if err := a.WriteKV(0, k, k, []kernels.Span{{Table: old, N: 1}}); err != nil {
		t.Fatal(err)
	}
	pool.Release(la)
	lb, _ := pool.Allocate("b", "r", 4)
	pool.Write(lb, 1)
	bt, _ := pool.BlockTable(lb, 1)
	if err := a.WriteKV(0, k, k, []kernels.Span{{Table: bt, N: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteKV(0, k, k, []kernels.Span{{Table: old, N: 1}}); !errors.Is(err, kernels.ErrTagMismatch) {
		t.Fatalf("stale WriteKV: got %v, want a tag mismatch", err)
	}
	if err := a.CopyIn(old, 0, make([]byte, a.PageBytes())); !errors.Is(err, kernels.ErrTagMismatch) {
		t.Fatalf("stale CopyIn: got %v, want a tag mismatch", err)
	}
	if got := a.Tag(bt.Page(0)); got != bt.Tag(0) {
		t.Fatalf("the new owner's page was re-tagged %+v", got)
	}
}

// A staging table (a transfer's unverified pages) serves CopyIn only:
// Attention, CopyOut and WriteKV through it are refused.
func TestStagingTableServesOnlyCopyIn(t *testing.T) {
	b, _ := New(kernels.Options{Threads: 1})
	defer b.Close()
	a, _ := b.NewArena(kernels.ArenaConfig{Pages: 2, PageTokens: 4, Layers: 1, KVHeads: 1, HeadDim: 4})
	pool, _ := isolation.NewPool(isolation.Config{Pages: 2, PageTokens: 4})
	pool.AddTenant(isolation.TenantConfig{ID: "a"})
	l, _ := pool.Allocate("a", "r", 8)
	st, err := pool.StagingTable(l, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CopyIn(st, 0, make([]byte, a.PageBytes())); err != nil {
		t.Fatalf("CopyIn through the staging table: %v", err)
	}
	q, _ := b.NewTensor(1, 4)
	out, _ := b.NewTensor(1, 4)
	if err := a.Attention(0, out, q, []kernels.Span{{Table: st, Pos: 3, N: 1}}); !errors.Is(err, kernels.ErrStaged) {
		t.Fatalf("Attention: got %v, want ErrStaged", err)
	}
	if err := a.CopyOut(make([]byte, a.PageBytes()), st, 0); !errors.Is(err, kernels.ErrStaged) {
		t.Fatalf("CopyOut: got %v, want ErrStaged", err)
	}
	if err := a.WriteKV(0, q, q, []kernels.Span{{Table: st, Pos: 0, N: 1}}); !errors.Is(err, kernels.ErrStaged) {
		t.Fatalf("WriteKV: got %v, want ErrStaged", err)
	}
}
