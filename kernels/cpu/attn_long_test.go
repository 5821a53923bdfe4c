package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/kernels/reference"
)

// TestAttentionLongContext: on every path, 150 positions with a head
// dimension of 64 and three query heads per kv head (attention crosses key
// blocks of 64 and query-row tasks of 8, the online softmax rescales, and
// avx512 runs its score and value tiles): a prefill of all 150 rows in one
// call and the same sequence in steps of 70, 1 and 79 rows give every row
// the same bits, and the rows match the float64 reference within the
// conformance tolerance (1e-4·max|v| + 1e-6).
func TestAttentionLongContext(t *testing.T) {
	const (
		n, kvHeads, qHeads, hd, pt = 150, 4, 12, 64, 16
		kw, qw                     = kvHeads * hd, qHeads * hd
	)
	r := rand.New(rand.NewPCG(16, 150))
	gen := func(m int, scale float64) []float32 {
		v := make([]float32, m)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	// Large query norms make the scores spread, so later blocks raise the
	// running maximum (the rescaling path).
	ks, vs, qs := gen(n*kw, 1), gen(n*kw, 1), gen(n*qw, 2)
	for _, p := range cpu.Paths() {
		t.Run(string(p), func(t *testing.T) {
			b, err := cpu.NewWithPath(kernels.Options{Threads: 2}, p)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			pages := 2 * ((n + pt - 1) / pt)
			a, err := b.NewArena(kernels.ArenaConfig{PageTokens: pt, Layers: 1, KVHeads: kvHeads, HeadDim: hd, Pages: pages})
			if err != nil {
				t.Fatal(err)
			}
			pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pt})
			if err != nil {
				t.Fatal(err)
			}
			if err := pool.AddTenant(isolation.TenantConfig{ID: "t"}); err != nil {
				t.Fatal(err)
			}
			tensor := func(rows, cols int, v []float32) kernels.Tensor {
				x, err := b.NewTensor(rows, cols)
				if err != nil {
					t.Fatal(err)
				}
				if v != nil {
					if err := b.Upload(x, v); err != nil {
						t.Fatal(err)
					}
				}
				return x
			}
			// run feeds the sequence in steps and returns every row's output.
			run := func(req string, steps []int) []float32 {
				l, err := pool.Allocate("t", cloison.RequestID(req), n)
				if err != nil {
					t.Fatal(err)
				}
				var out []float32
				pos := 0
				for _, m := range steps {
					if err := pool.Write(l, m); err != nil {
						t.Fatal(err)
					}
					bt, err := pool.BlockTable(l, pos+m)
					if err != nil {
						t.Fatal(err)
					}
					sp := []kernels.Span{{Table: bt, Pos: pos, N: m}}
					if err := a.WriteKV(0, tensor(m, kw, ks[pos*kw:(pos+m)*kw]), tensor(m, kw, vs[pos*kw:(pos+m)*kw]), sp); err != nil {
						t.Fatal(err)
					}
					o := tensor(m, qw, nil)
					if err := a.Attention(0, o, tensor(m, qw, qs[pos*qw:(pos+m)*qw]), sp); err != nil {
						t.Fatal(err)
					}
					got := make([]float32, m*qw)
					if err := b.Download(got, o); err != nil {
						t.Fatal(err)
					}
					out = append(out, got...)
					pos += m
				}
				return out
			}
			whole, stepped := run("whole", []int{n}), run("stepped", []int{70, 1, 79})
			for i := range whole {
				if math.Float32bits(whole[i]) != math.Float32bits(stepped[i]) {
					t.Fatalf("row %d col %d: %v in one prefill, %v in steps", i/qw, i%qw, whole[i], stepped[i])
				}
			}
			keys, vals := make([][]float64, n), make([][]float64, n)
			vmax := make([]float64, kvHeads)
			for p := range n {
				keys[p], vals[p] = make([]float64, kw), make([]float64, kw)
				for c := range kw {
					keys[p][c], vals[p][c] = float64(ks[p*kw+c]), float64(vs[p*kw+c])
					vmax[c/hd] = max(vmax[c/hd], math.Abs(vals[p][c]))
				}
			}
			for _, row := range []int{0, 7, 8, 63, 64, 65, 127, 128, 149} {
				q := make([]float64, qw)
				for c := range q {
					q[c] = float64(qs[row*qw+c])
				}
				want := reference.Attention(q, keys[:row+1], vals[:row+1], qHeads, kvHeads, hd)
				for c, w := range want {
					got := float64(whole[row*qw+c])
					if tol := 1e-4*vmax[c/hd/(qHeads/kvHeads)] + 1e-6; math.Abs(got-w) > tol {
						t.Fatalf("%s: row %d col %d: %v, reference %v ± %.2g", fmt.Sprint(p), row, c, got, w, tol)
					}
				}
			}
		})
	}
}
