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
// conformance tolerance (1e-4·max|v| + 1e-6). The same with sliding
// windows (AttentionWith) of 40, 64 and 100 positions, whose starts fall
// inside key blocks and query-row tasks, one with a score scale; a window
// of 1000 gives the bits of no window. Decode steps of one row (the avx512
// decode kernels) give the bits of the prefill too. All of it with f32 and
// with f16 KV (the reference then attends over the K and V rounded to
// halves).
func TestAttentionLongContext(t *testing.T) {
	for _, kv := range []kernels.KVType{kernels.KVF32, kernels.KVF16} {
		// Groups of 3 and 8 query heads per kv head (decode value tiles of
		// four heads: padded, and two full), head dimensions 64 and 128.
		for _, g := range [][3]int{{4, 12, 64}, {2, 16, 128}} {
			t.Run(fmt.Sprintf("%v/kv=%d/q=%d/hd=%d", kv, g[0], g[1], g[2]), func(t *testing.T) {
				testAttentionLongContext(t, kv, g[0], g[1], g[2])
			})
		}
	}
}

func testAttentionLongContext(t *testing.T, kv kernels.KVType, kvHeads, qHeads, hd int) {
	const n, pt = 150, 16
	kw, qw := kvHeads*hd, qHeads*hd
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
	keys, vals := make([][]float64, n), make([][]float64, n)
	vmax := make([]float64, kvHeads)
	for p := range n {
		keys[p], vals[p] = make([]float64, kw), make([]float64, kw)
		for c := range kw {
			keys[p][c], vals[p][c] = float64(ks[p*kw+c]), float64(vs[p*kw+c])
			if kv == kernels.KVF16 {
				keys[p][c] = float64(kernels.F16ToF32(kernels.F32ToF16(ks[p*kw+c])))
				vals[p][c] = float64(kernels.F16ToF32(kernels.F32ToF16(vs[p*kw+c])))
			}
			vmax[c/hd] = max(vmax[c/hd], math.Abs(vals[p][c]))
		}
	}
	check := func(t *testing.T, opt kernels.AttentionOptions, whole []float32) {
		for _, row := range []int{0, 7, 8, 39, 40, 63, 64, 65, 100, 127, 128, 149} {
			// The reference's scale is 1/√hd: a scale σ is σ·√hd on q.
			qf := 1.0
			if opt.Scale > 0 {
				qf = float64(opt.Scale) * math.Sqrt(float64(hd))
			}
			q := make([]float64, qw)
			for c := range q {
				q[c] = float64(qs[row*qw+c]) * qf
			}
			lo := 0
			if opt.Window > 0 {
				lo = max(0, row+1-opt.Window)
			}
			want := reference.Attention(q, keys[lo:row+1], vals[lo:row+1], qHeads, kvHeads, hd)
			for c, w := range want {
				got := float64(whole[row*qw+c])
				if tol := 1e-4*vmax[c/hd/(qHeads/kvHeads)] + 1e-6; math.Abs(got-w) > tol {
					t.Fatalf("%+v: row %d col %d: %v, reference %v ± %.2g", opt, row, c, got, w, tol)
				}
			}
		}
	}
	for _, p := range cpu.Paths() {
		t.Run(string(p), func(t *testing.T) {
			b, err := cpu.NewWithPath(kernels.Options{Threads: 2}, p)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			pages := 2 * ((n + pt - 1) / pt)
			a, err := b.NewArena(kernels.ArenaConfig{PageTokens: pt, Layers: 1, KVHeads: kvHeads, HeadDim: hd, Pages: pages, KV: kv})
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
			run := func(req string, steps []int, opt kernels.AttentionOptions) []float32 {
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
					att := func() error { return a.Attention(0, o, tensor(m, qw, qs[pos*qw:(pos+m)*qw]), sp) }
					if opt != (kernels.AttentionOptions{}) {
						att = func() error {
							return a.(kernels.WindowAttender).AttentionWith(0, o, tensor(m, qw, qs[pos*qw:(pos+m)*qw]), sp, opt)
						}
					}
					if err := att(); err != nil {
						t.Fatal(err)
					}
					got := make([]float32, m*qw)
					if err := b.Download(got, o); err != nil {
						t.Fatal(err)
					}
					out = append(out, got...)
					pos += m
				}
				if err := pool.Release(l); err != nil {
					t.Fatal(err)
				}
				return out
			}
			var plain []float32
			for _, opt := range []kernels.AttentionOptions{{}, {Window: 40}, {Window: 64}, {Window: 100, Scale: 0.08}, {Window: 1000}} {
				whole, stepped := run("whole", []int{n}, opt), run("stepped", []int{70, 1, 1, 1, 1, 64, 12}, opt)
				for i := range whole {
					if math.Float32bits(whole[i]) != math.Float32bits(stepped[i]) {
						t.Fatalf("%+v: row %d col %d: %v in one prefill, %v in steps", opt, i/qw, i%qw, whole[i], stepped[i])
					}
				}
				if plain == nil {
					plain = whole
				}
				if opt.Window >= n {
					for i := range whole {
						if math.Float32bits(whole[i]) != math.Float32bits(plain[i]) {
							t.Fatalf("%+v: row %d col %d: %v, %v without a window", opt, i/qw, i%qw, whole[i], plain[i])
						}
					}
				}
				check(t, opt, whole)
			}
		})
	}
}
