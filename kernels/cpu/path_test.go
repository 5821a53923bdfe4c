package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/kernels"
)

// TestChoosePath: CLOISON_CPU picks a path the CPU has, "" and "auto" the
// fastest, and anything else is refused with ErrPath (code invalid).
func TestChoosePath(t *testing.T) {
	avx2Only := []Path{Generic, AVX2}
	tests := []struct {
		env  string
		have []Path
		want Path
		err  bool
	}{
		{"", avx2Only, AVX2, false},
		{"auto", avx2Only, AVX2, false},
		{"", []Path{Generic}, Generic, false},
		{"generic", avx2Only, Generic, false},
		{"avx2", avx2Only, AVX2, false},
		{"avx512", avx2Only, "", true},
		{"avx2", []Path{Generic}, "", true},
		{"AVX2", avx2Only, "", true},
		{"neon", avx2Only, "", true},
		{"", []Path{Generic, NEON}, NEON, false},
		{"neon", []Path{Generic, NEON}, NEON, false},
		{"generic", []Path{Generic, NEON}, Generic, false},
		{"avx2", []Path{Generic, NEON}, "", true},
		{"NEON", []Path{Generic, NEON}, "", true},
		{"generic ", avx2Only, "", true},
		{"amx", avx2Only, "", true},
		{"", []Path{Generic, AVX2, AVX512, AMX}, AMX, false},
		{"avx512", []Path{Generic, AVX2, AVX512, AMX}, AVX512, false},
		{"amx", []Path{Generic, AVX2, AVX512, AMX}, AMX, false},
		{"AMX", []Path{Generic, AVX2, AVX512, AMX}, "", true},
	}
	for _, tt := range tests {
		got, err := choosePath(tt.env, tt.have)
		if tt.err {
			if !errors.Is(err, ErrPath) || cloison.ErrorCode(err) != cloison.CodeInvalid {
				t.Errorf("choosePath(%q, %v): got %v, %v, want ErrPath with code invalid", tt.env, tt.have, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("choosePath(%q, %v): got %v, %v, want %v", tt.env, tt.have, got, err, tt.want)
		}
	}
}

// TestNewHonoursEnv: New opens on the path CLOISON_CPU forces and refuses,
// at open, a path that is unknown or that this CPU lacks.
func TestNewHonoursEnv(t *testing.T) {
	for _, p := range []Path{Generic, AVX2, AVX512, AMX, NEON, "bogus"} {
		t.Run(string(p), func(t *testing.T) {
			t.Setenv(EnvPath, string(p))
			b, err := New(kernels.Options{Threads: 1})
			if !slices.Contains(Paths(), p) {
				if !errors.Is(err, ErrPath) {
					t.Fatalf("got %v, want ErrPath", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := b.Path(); got != p {
				t.Fatalf("got path %v, want %v", got, p)
			}
		})
	}
	t.Setenv(EnvPath, "")
	b, err := New(kernels.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, want := b.Path(), Paths()[len(Paths())-1]; got != want {
		t.Fatalf("default: got path %v, want %v", got, want)
	}
	if _, err := NewWithPath(kernels.Options{}, ""); !errors.Is(err, ErrPath) {
		t.Fatalf("NewWithPath(\"\"): got %v, want ErrPath", err)
	}
}

// floatTol is the conformance bound (n+4)·ε·Σ|x·w| of any float32
// summation order.
func floatTol(x, w []float32) float64 {
	var s float64
	for i := range x {
		s += math.Abs(float64(x[i]) * float64(w[i]))
	}
	return float64(len(x)+4)*0x1p-24*s + 1e-30
}

func exact(x, w []float32) float64 {
	var s float64
	for i := range x {
		s += float64(x[i]) * float64(w[i])
	}
	return s
}

func same(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// TestVectorKernels checks every vector path's kernels on lengths around the
// lane counts (tails): within the float32 bound of the exact sum, and the
// same bits from every kernel shape of the path (dot1x1, dot1x4, dot2x3,
// F16/BF16 in registers versus decoded), which batch invariance rests on.
func TestVectorKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	for _, p := range Paths() {
		k := kernelSet(p)
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 768} {
			x0, x1 := rnd(n), rnd(n)
			w := [4][]float32{rnd(n), rnd(n), rnd(n), rnd(n)}
			s0, s1, s2, s3 := k.dot1x4(x0, w[0], w[1], w[2], w[3])
			for i, s := range []float32{s0, s1, s2, s3} {
				if want := exact(x0, w[i]); math.Abs(float64(s)-want) > floatTol(x0, w[i]) {
					t.Fatalf("%s n=%d dot1x4[%d]: got %v, want %v", p, n, i, s, want)
				}
			}
			if got := k.dot1x1(x0, w[1]); !same(got, s1) {
				t.Fatalf("%s n=%d: dot1x1 got %v, want dot1x4's %v", p, n, got, s1)
			}
			a0, a1, a2, b0, b1, b2 := k.dot2x3(x0, x1, w[0], w[1], w[2])
			c0, c1, c2, _ := k.dot1x4(x1, w[0], w[1], w[2], w[3])
			for i, pr := range [][2]float32{{a0, s0}, {a1, s1}, {a2, s2}, {b0, c0}, {b1, c1}, {b2, c2}} {
				if !same(pr[0], pr[1]) {
					t.Fatalf("%s n=%d dot2x3[%d]: got %v, want dot1x4's %v", p, n, i, pr[0], pr[1])
				}
			}
			// Half weights: in registers versus decoded to float32.
			for _, bf := range []bool{false, true} {
				var h [4][]uint16
				var dec [4][]float32
				for i := range h {
					h[i], dec[i] = make([]uint16, n), make([]float32, n)
					for j, v := range w[i] {
						if bf {
							h[i][j] = uint16(math.Float32bits(v) >> 16)
							dec[i][j] = bf16(h[i][j])
						} else {
							h[i][j] = kernels.F32ToF16(v)
							dec[i][j] = f16tab[h[i][j]]
						}
					}
				}
				d4, d1 := k.f16dot1x4, k.f16dot1x1
				if bf {
					d4, d1 = k.bf16dot1x4, k.bf16dot1x1
				}
				g0, g1, g2, g3 := d4(x0, h[0], h[1], h[2], h[3])
				f0, f1, f2, f3 := k.dot1x4(x0, dec[0], dec[1], dec[2], dec[3])
				if bf && k.bf16block != nil {
					// The path's BF16 order: its own oracle.
					ref := bf16Oracle(k)
					f0, f1, f2, f3 = ref(x0, h[0]), ref(x0, h[1]), ref(x0, h[2]), ref(x0, h[3])
				}
				for i, pr := range [][2]float32{{g0, f0}, {g1, f1}, {g2, f2}, {g3, f3}, {d1(x0, h[2]), f2}} {
					if !same(pr[0], pr[1]) {
						t.Fatalf("%s n=%d bf16=%v half[%d]: got %v, want decoded %v", p, n, bf, i, pr[0], pr[1])
					}
				}
			}
			// axpy: within one rounding per add of the float64 sum.
			o := rnd(n)
			want := make([]float64, n)
			var sc [4]float32
			for i := range sc {
				sc[i] = float32(r.NormFloat64())
			}
			for d := range o {
				want[d] = float64(o[d]) + float64(sc[0])*float64(w[0][d]) + float64(sc[1])*float64(w[1][d]) +
					float64(sc[2])*float64(w[2][d]) + float64(sc[3])*float64(w[3][d]) + float64(sc[1])*float64(x1[d])
			}
			k.axpy4(o, &sc, w[0], w[1], w[2], w[3])
			k.axpy1(o, sc[1], x1)
			for d := range o {
				bound := 10 * 0x1p-24 * (math.Abs(float64(o[d])) + math.Abs(float64(sc[0]*w[0][d])) + math.Abs(float64(sc[1]*w[1][d])) +
					math.Abs(float64(sc[2]*w[2][d])) + math.Abs(float64(sc[3]*w[3][d])) + math.Abs(float64(sc[1]*x1[d])))
				if math.Abs(float64(o[d])-want[d]) > bound {
					t.Fatalf("%s n=%d axpy[%d]: got %v, want %v", p, n, d, o[d], want[d])
				}
			}
		}
	}
}

// TestF16InRegister: the vector paths convert every half as f16tab does
// (VCVTPH2PS is exact, subnormals included).
func TestF16InRegister(t *testing.T) {
	x := make([]float32, 16)
	x[0] = 1
	w := make([]uint16, 16)
	for _, p := range Paths()[1:] {
		k := kernelSet(p)
		for h := range 1 << 16 {
			w[0] = uint16(h)
			got, want := k.f16dot1x1(x, w), f16tab[h]
			if want != want {
				if got == got {
					t.Fatalf("%s half %#04x: got %v, want NaN", p, h, got)
				}
				continue
			}
			if got != want { // -0 + 0 is +0: compare values
				t.Fatalf("%s half %#04x: got %v, want %v", p, h, got, want)
			}
		}
	}
}

// TestQ8Int checks the int8×int8 Q8_0 kernels against the float64 product
// of the dequantized weights and the quantized activations (the integer
// part is exact; only the block scalings and the final sum round), and that
// avx512 without VNNI gives avx2's integer kernel's bits (the lanes' order;
// with VNNI it runs the quad order, TestQ8AMX).
func TestQ8Int(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range Paths()[1:] {
		k := kernelSet(p)
		for _, nb := range []int{1, 2, 5, 24} {
			n := nb * 32
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			xq, xd := make([]int8, n), make([]float32, nb)
			quantizeRowQ8(xq, xd, x)
			var rows [4][]byte
			for i := range rows {
				wf := make([]float32, n)
				for j := range wf {
					wf[j] = float32(r.NormFloat64())
				}
				rows[i], _ = kernels.Quantize(kernels.Q8_0, wf)
			}
			s0, s1, s2, s3 := k.q8i1x4(xq, xd, rows[0], rows[1], rows[2], rows[3])
			for i, s := range []float32{s0, s1, s2, s3} {
				var want, abs float64
				for b := range nb {
					blk := rows[i][b*34 : b*34+34]
					dw := float64(q8Scale((*q8Block)(blk)))
					for j := range 32 {
						v := float64(int8(blk[2+j])) * dw * float64(xq[b*32+j]) * float64(xd[b])
						want += v
						abs += math.Abs(v)
					}
				}
				if tol := float64(n+4)*0x1p-24*abs*2 + 1e-30; math.Abs(float64(s)-want) > tol {
					t.Fatalf("%s nb=%d row %d: got %v, want %v ± %v", p, nb, i, s, want, tol)
				}
			}
			if got := k.q8i1x1(xq, xd, rows[3]); !same(got, s3) {
				t.Fatalf("%s nb=%d: q8i1x1 got %v, want q8i1x4's %v", p, nb, got, s3)
			}
			if p == AVX512 && k.q8amx == nil && slices.Contains(Paths(), AVX2) {
				a0, _, _, _ := kernelSet(AVX2).q8i1x4(xq, xd, rows[0], rows[1], rows[2], rows[3])
				if !same(a0, s0) {
					t.Fatalf("%s nb=%d: got %v, avx2 gives %v", p, nb, s0, a0)
				}
			}
		}
	}
}

// TestTile: the prefill register tile of every vector path gives, for each
// of its outputs, the bits dot1x4 gives (the batch-invariance rule), on
// lengths around the lane counts.
func TestTile(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	for _, p := range Paths()[1:] {
		k := kernelSet(p)
		if k.tile == nil || k.tileRows < 1 || k.tileRows > 4 {
			t.Fatalf("%s: no tile", p)
		}
		for _, n := range []int{1, 7, 8, 9, 16, 17, 31, 33, 64, 100, 768} {
			var xs, ws [4][]float32
			for i := range xs {
				xs[i], ws[i] = rnd(n), rnd(n)
			}
			var out [16]float32
			k.tile(&xs, &ws, &out)
			for i := range k.tileRows {
				s0, s1, s2, s3 := k.dot1x4(xs[i], ws[0], ws[1], ws[2], ws[3])
				for j, s := range []float32{s0, s1, s2, s3} {
					if !same(out[4*i+j], s) {
						t.Fatalf("%s n=%d tile[%d][%d]: got %v, want dot1x4's %v", p, n, i, j, out[4*i+j], s)
					}
				}
			}
			if k.tilePF != nil {
				// The prefetching tile (F16/BF16 decode batches) gives the
				// same bits, whatever it prefetches.
				pf := make([]byte, 2*n)
				var outPF [16]float32
				k.tilePF(&xs, &ws, &outPF, unsafe.Pointer(&pf[0]))
				for i := range k.tileRows * 4 {
					if !same(outPF[i], out[i]) {
						t.Fatalf("%s n=%d tilePF[%d]: got %v, want tile's %v", p, n, i, outPF[i], out[i])
					}
				}
			}
		}
	}
}

// TestWsum: the register-held value sum of attention gives the bits of the
// axpy4/axpy1 loop it replaces, for head sizes it takes, and declines the
// others.
func TestWsum(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	data := make([]float32, 4096)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	for _, p := range Paths()[1:] {
		k := kernelSet(p)
		if k.wsum == nil {
			if p == AVX2 || p == AVX512 {
				t.Fatalf("%s: no wsum", p)
			}
			continue // neon: attention sums with axpy
		}
		for _, hd := range []int{32, 64, 128, 48, 80} {
			for _, n := range []int{1, 3, 4, 7, 33} {
				s := make([]float32, n)
				offs := make([]int, n)
				vals := make([][]float32, n)
				for i := range s {
					s[i] = float32(r.Float64())
					offs[i] = r.IntN(len(data) - hd)
					vals[i] = data[offs[i] : offs[i]+hd]
				}
				want := make([]float32, hd)
				i := 0
				for ; i+4 <= n; i += 4 {
					k.axpy4(want, (*[4]float32)(s[i:]), vals[i], vals[i+1], vals[i+2], vals[i+3])
				}
				for ; i < n; i++ {
					k.axpy1(want, s[i], vals[i])
				}
				got := make([]float32, hd)
				if !k.wsum(got, s, data, offs) {
					if hd%32 == 0 && (!k.avx512() || hd%64 == 0) {
						t.Fatalf("%s hd=%d: declined", p, hd)
					}
					continue
				}
				for d := range got {
					if !same(got[d], want[d]) {
						t.Fatalf("%s hd=%d n=%d [%d]: got %v, want axpy's %v", p, hd, n, d, got[d], want[d])
					}
				}
			}
		}
	}
}

// TestExpSub: the vector exponential of the fastest path (8 lanes on avx2,
// 16 on avx512) gives expf's bits
// for every input tried: a sweep of the range, the clamps, ±Inf, NaN.
func TestExpSub(t *testing.T) {
	k := kernelSet(Paths()[len(Paths())-1])
	if k.expSub == nil {
		t.Skip("no vector exp on this path")
	}
	var xs []float32
	for v := float32(-100); v < 100; v += 0.0137 {
		xs = append(xs, v)
	}
	r := rand.New(rand.NewPCG(15, 16))
	for range 10000 {
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	xs = append(xs, 88.72283, 88.7229, -87.33654, -87.3366, 0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-45, -1e-45)
	for _, m := range []float32{0, 3.5, -2} {
		got := slices.Clone(xs)
		k.expSub(got, m)
		for i, x := range xs {
			want := expf(x - m)
			if want != want {
				if got[i] == got[i] {
					t.Fatalf("exp(%v − %v): got %v, want NaN", x, m, got[i])
				}
				continue
			}
			if !same(got[i], want) {
				t.Fatalf("exp(%v − %v): got %v (%#x), want expf's %v (%#x)", x, m, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
			}
		}
	}
}

// TestSiluRow: the vector SiLU and SwiGLU of the fastest path (expf(−g) by
// expSub, or the path's silu kernel: avx2's siluMulAVX2) give
// silu's bits, in place or not, on the inputs of TestExpSub and on row
// lengths around the chunk and lane sizes.
func TestSiluRow(t *testing.T) {
	p := Paths()[len(Paths())-1]
	k := kernelSet(p)
	if k.expSub == nil {
		t.Skip("no vector exp on this path")
	}
	if p == AVX2 && k.silu == nil {
		t.Fatal("avx2 has no silu kernel")
	}
	var gs []float32
	for v := float32(-100); v < 100; v += 0.0137 {
		gs = append(gs, v)
	}
	r := rand.New(rand.NewPCG(17, 18))
	for range 10000 {
		gs = append(gs, math.Float32frombits(r.Uint32()))
	}
	gs = append(gs, -88.72283, -88.7229, 87.33654, 87.3366, 0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-45, -1e-45)
	us := make([]float32, len(gs))
	for i := range us {
		us[i] = float32(r.NormFloat64())
	}
	check := func(what string, got []float32, g, u []float32) {
		t.Helper()
		for i := range got {
			want := silu(g[i])
			if u != nil {
				want *= u[i]
			}
			if want != want {
				if got[i] == got[i] {
					t.Fatalf("%s silu(%v): got %v, want NaN", what, g[i], got[i])
				}
				continue
			}
			if !same(got[i], want) {
				t.Fatalf("%s silu(%v)·%v: got %v (%#x), want %v (%#x)", what, g[i], us[i], got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
			}
		}
	}
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 255, 256, 257, 2048, len(gs)} {
		g, u := gs[:n], us[:n]
		out := make([]float32, n)
		k.siluRow(out, g, u)
		check(fmt.Sprintf("n=%d swiglu", n), out, g, u)
		k.siluRow(out, g, nil)
		check(fmt.Sprintf("n=%d silu", n), out, g, nil)
		in := slices.Clone(g)
		k.siluRow(in, in, u) // out aliases g
		check(fmt.Sprintf("n=%d swiglu in place", n), in, g, u)
		in = slices.Clone(u)
		k.siluRow(in, g, in) // out aliases u
		check(fmt.Sprintf("n=%d swiglu in place of up", n), in, g, u)
		in = slices.Clone(g)
		k.siluRow(in, in, nil)
		check(fmt.Sprintf("n=%d silu in place", n), in, g, nil)
	}
}
