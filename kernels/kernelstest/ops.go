package kernelstest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/reference"
)

// testDequantize checks kernels.Dequantize and Quantize against the
// reference's per-element decoder, and a few known encodings.
func testDequantize(t *testing.T) {
	r := newRand(1)
	for _, dt := range kernels.DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			cols := 2 * max(dt.BlockSize(), 32)
			w := randWeights(t, r, dt, 3, cols)
			got := make([]float32, 3*cols)
			if err := kernels.Dequantize(got, dt, w.data); err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				if want := w.ref[i/cols][i%cols]; float64(g) != want {
					t.Fatalf("element %d: got %v, want %v", i, g, want)
				}
			}
			// Round trip error of the quantizers: small relative to the
			// values (Q4 types have 4-bit resolution).
			src := randFloats(r, cols, 1)
			q, _ := kernels.Quantize(dt, src)
			back := make([]float32, cols)
			if err := kernels.Dequantize(back, dt, q); err != nil {
				t.Fatal(err)
			}
			var amax float64
			for _, v := range src {
				amax = max(amax, math.Abs(float64(v)))
			}
			tol := map[kernels.DType]float64{kernels.F32: 0, kernels.F16: 1e-3, kernels.BF16: 8e-3, kernels.Q8_0: 1.0 / 127, kernels.Q4_0: 0.15, kernels.Q4_1: 0.07, kernels.Q5_0: 0.04, kernels.Q5_1: 0.035, kernels.Q2_K: 0.45, kernels.Q3_K: 0.18, kernels.MXFP4: 0.26, kernels.Q4_K: 0.15, kernels.Q5_K: 0.08, kernels.Q6_K: 0.08}[dt]
			for i := range src {
				if d := math.Abs(float64(back[i] - src[i])); d > tol*amax {
					t.Fatalf("round trip of element %d: got %v, want %v ± %v", i, back[i], src[i], tol*amax)
				}
			}
		})
	}
	t.Run("known encodings", func(t *testing.T) {
		tests := []struct {
			name string
			f    float32
			h    uint16
			bf   uint16
		}{
			{"one", 1, 0x3c00, 0x3f80},
			{"minus two", -2, 0xc000, 0xc000},
			{"half max", 65504, 0x7bff, 0x4780},
			{"overflow to inf", 1e6, 0x7c00, 0x4974},
			{"smallest subnormal", 5.960464477539063e-08, 0x0001, 0x3380},
			{"tie rounds to even", 1 + 1.0/2048, 0x3c00, 0x3f80},
		}
		for _, tt := range tests {
			if got := kernels.F32ToF16(tt.f); got != tt.h {
				t.Errorf("%s: F32ToF16(%v) got %#04x, want %#04x", tt.name, tt.f, got, tt.h)
			}
			if got := kernels.F32ToBF16(tt.f); got != tt.bf {
				t.Errorf("%s: F32ToBF16(%v) got %#04x, want %#04x", tt.name, tt.f, got, tt.bf)
			}
		}
		// Every half converts exactly and back.
		for h := range 1 << 16 {
			f := kernels.F16ToF32(uint16(h))
			if f != f {
				continue
			}
			if back := kernels.F32ToF16(f); back != uint16(h) {
				t.Fatalf("half %#04x → %v → %#04x", h, f, back)
			}
		}
		// A Q8_0 block by hand: scale 0.5 (f16 0x3800), quants 0…31.
		blk := []byte{0x00, 0x38}
		for j := range 32 {
			blk = append(blk, byte(int8(j-16)))
		}
		got := make([]float32, 32)
		if err := kernels.Dequantize(got, kernels.Q8_0, blk); err != nil {
			t.Fatal(err)
		}
		for j, g := range got {
			if want := float32(j-16) * 0.5; g != want {
				t.Fatalf("Q8_0 element %d: got %v, want %v", j, g, want)
			}
		}
	})
}

// actBlock is the block length over which a backend may quantize the
// activations of a product with dt weights (0: it may not).
func actBlock(dt kernels.DType) int {
	switch dt {
	case kernels.Q8_0, kernels.Q4_0:
		return 32
	case kernels.Q4_K, kernels.Q6_K:
		return 256
	}
	return 0
}

// matmulTol is the stated MatMul tolerance for output (r, o).
func matmulTol(dt kernels.DType, x []float64, w []float64) float64 {
	var s float64
	for i := range x {
		s += math.Abs(x[i] * w[i])
	}
	tol := float64(len(x)+4)*eps*s + 1e-30
	// Activations quantized to 8 bits per block as llama.cpp does: Q8
	// blocks of 32 for Q8_0 and Q4_0 weights, Q8_K blocks of 256 for the
	// k-quants.
	if ab := actBlock(dt); ab > 0 && len(x)%ab == 0 {
		for b := 0; b < len(x); b += ab {
			var amax, wsum float64
			for i := b; i < b+ab; i++ {
				amax = max(amax, math.Abs(x[i]))
				wsum += math.Abs(w[i])
			}
			tol += amax / 254 * wsum
		}
	}
	// BF16 weights may meet activations rounded to BF16 first (8
	// significant bits, nearest even), as llama.cpp does.
	if dt == kernels.BF16 {
		tol += 0x1p-8 * s
	}
	return tol
}

func matmulCase(t *testing.T, b kernels.Backend, w weights, rows int, seed uint64) {
	t.Helper()
	r := newRand(seed)
	xs := randFloats(r, rows*w.cols, 1)
	x := tensor(t, b, rows, w.cols, xs)
	dst := tensor(t, b, rows, w.rows, nil)
	m := w.matrix(t, b)
	if err := b.MatMul(dst, x, m); err != nil {
		t.Fatalf("MatMul: %v", err)
	}
	got := download(t, b, dst)
	x64 := to64(rows, w.cols, xs)
	want := reference.MatMul(x64, w.ref)
	for rr := range rows {
		for o := range w.rows {
			tol := matmulTol(w.dt, x64[rr], w.ref[o])
			if g := got[rr*w.rows+o]; !within(g, want[rr][o], tol) {
				t.Fatalf("out[%d][%d]: got %v, want %v ± %.3g", rr, o, g, want[rr][o], tol)
			}
		}
	}
}

func testMatMul(t *testing.T, b kernels.Backend) {
	shapes := []struct{ rows, out, blocks int }{
		{1, 1, 1}, {1, 7, 2}, {1, 25, 2}, {2, 24, 1}, {3, 5, 2}, {5, 49, 1}, {66, 8, 1},
	}
	r := newRand(2)
	for _, dt := range kernels.DTypes() {
		for _, s := range shapes {
			cols := s.blocks * max(dt.BlockSize(), 32)
			if dt.BlockSize() == 1 && s.blocks == 1 {
				cols = 37 // not a multiple of any unroll width
			}
			t.Run(fmt.Sprintf("%v/%s", dt, fmtShape(s.rows, s.out, cols)), func(t *testing.T) {
				matmulCase(t, b, randWeights(t, r, dt, s.out, cols), s.rows, uint64(s.rows*1000+s.out))
			})
		}
	}
}

// rowAlone computes x's row i·wᵀ in a one-row product.
func rowAlone(t tb, b kernels.Backend, m kernels.Matrix, row []float32) []float32 {
	t.Helper()
	x := tensor(t, b, 1, len(row), row)
	dst := tensor(t, b, 1, m.Rows(), nil)
	if err := b.MatMul(dst, x, m); err != nil {
		t.Fatalf("MatMul: %v", err)
	}
	return download(t, b, dst)
}

func testMatMulBatchInvariance(t *testing.T, b kernels.Backend) {
	r := newRand(3)
	for _, dt := range kernels.DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			cols := 2 * max(dt.BlockSize(), 32)
			w := randWeights(t, r, dt, 27, cols)
			m := w.matrix(t, b)
			const rows = 67 // crosses a task of 64 or 66 rows (cpu) and is odd
			xs := randFloats(r, rows*cols, 1)
			x := tensor(t, b, rows, cols, xs)
			dst := tensor(t, b, rows, w.rows, nil)
			if err := b.MatMul(dst, x, m); err != nil {
				t.Fatal(err)
			}
			all := download(t, b, dst)
			for _, i := range []int{0, 1, 2, 63, 64, 65, 66} {
				alone := rowAlone(t, b, m, xs[i*cols:(i+1)*cols])
				checkBits(t, fmt.Sprintf("row %d alone vs in a batch of %d", i, rows), alone, all[i*w.rows:(i+1)*w.rows])
			}
			// The same row among other neighbours, through a Slice view.
			sub := x.Slice(3, 9)
			dst2 := tensor(t, b, 6, w.rows, nil)
			if err := b.MatMul(dst2, sub, m); err != nil {
				t.Fatal(err)
			}
			checkBits(t, "rows 3…8 as a sliced batch", download(t, b, dst2), all[3*w.rows:9*w.rows])
			// Repeating gives the same bits.
			if err := b.MatMul(dst, x, m); err != nil {
				t.Fatal(err)
			}
			checkBits(t, "repeated product", download(t, b, dst), all)
		})
	}
}

// testMatMulProperty: for random dtypes, shapes and batch compositions, a
// row's product never depends on the other rows.
func testMatMulProperty(t *testing.T, b kernels.Backend) { rapid.Check(t, MatMulBatchInvariance(b)) }

// MatMulBatchInvariance is the property of testMatMulProperty, exported for
// fuzzing like ArenaLifecycle.
func MatMulBatchInvariance(b kernels.Backend) func(*rapid.T) {
	return func(rt *rapid.T) {
		dt := rapid.SampledFrom(kernels.DTypes()).Draw(rt, "dtype")
		bs := max(dt.BlockSize(), 32)
		cols := bs * rapid.IntRange(1, 3).Draw(rt, "blocks")
		if dt.BlockSize() == 1 {
			cols = rapid.IntRange(1, 80).Draw(rt, "cols")
		}
		out := rapid.IntRange(1, 30).Draw(rt, "out")
		rows := rapid.IntRange(1, 12).Draw(rt, "rows")
		seed := rapid.Uint64().Draw(rt, "seed")
		r := newRand(seed)
		w := randWeights(rt, r, dt, out, cols)
		m := w.matrix(rt, b)
		xs := randFloats(r, rows*cols, 1)
		x := tensor(rt, b, rows, cols, xs)
		dst := tensor(rt, b, rows, out, nil)
		if err := b.MatMul(dst, x, m); err != nil {
			rt.Fatal(err)
		}
		all := download(rt, b, dst)
		i := rapid.IntRange(0, rows-1).Draw(rt, "row")
		checkBits(rt, "row alone vs in batch", rowAlone(rt, b, m, xs[i*cols:(i+1)*cols]), all[i*out:(i+1)*out])
	}
}

func testMultiMatMul(t *testing.T, b kernels.Backend) {
	r := newRand(4)
	const rows, cols = 3, 64
	ws := []weights{randWeights(t, r, kernels.Q8_0, 10, cols), randWeights(t, r, kernels.F16, 4, cols), randWeights(t, r, kernels.F32, 7, cols)}
	xs := randFloats(r, rows*cols, 1)
	x := tensor(t, b, rows, cols, xs)
	var dsts []kernels.Tensor
	var ms []kernels.Matrix
	for _, w := range ws {
		dsts = append(dsts, tensor(t, b, rows, w.rows, nil))
		ms = append(ms, w.matrix(t, b))
	}
	if err := kernels.MultiMatMul(b, dsts, x, ms); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		one := tensor(t, b, rows, ws[i].rows, nil)
		if err := b.MatMul(one, x, m); err != nil {
			t.Fatal(err)
		}
		checkBits(t, fmt.Sprintf("product %d", i), download(t, b, dsts[i]), download(t, b, one))
	}
	errIs(t, "mismatched lists", kernels.MultiMatMul(b, dsts[:1], x, ms), kernels.ErrShape)
}

func testEmbed(t *testing.T, b kernels.Backend) {
	r := newRand(5)
	for _, dt := range kernels.DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			cols := max(dt.BlockSize(), 32)
			w := randWeights(t, r, dt, 9, cols)
			m := w.matrix(t, b)
			ids := []int32{8, 0, 3, 3}
			dst := tensor(t, b, len(ids), cols, nil)
			if err := b.Embed(dst, m, ids); err != nil {
				t.Fatal(err)
			}
			got := download(t, b, dst)
			want := reference.Embed(w.ref, ids)
			for i, g := range got {
				if float64(g) != want[i/cols][i%cols] {
					t.Fatalf("element %d: got %v, want %v", i, g, want[i/cols][i%cols])
				}
			}
			errIs(t, "id out of range", b.Embed(tensor(t, b, 1, cols, nil), m, []int32{9}), kernels.ErrShape)
			errIs(t, "negative id", b.Embed(tensor(t, b, 1, cols, nil), m, []int32{-1}), kernels.ErrShape)
		})
	}
}

func testRMSNorm(t *testing.T, b kernels.Backend) {
	r := newRand(6)
	// group = cols: the whole row; a smaller group: each run of group
	// elements on its own (per-head Q/K norm), checked against the
	// reference applied to each head.
	for _, tc := range []struct{ cols, group int }{{1, 1}, {7, 7}, {64, 64}, {300, 300}, {64, 16}, {6, 2}, {384, 128}} {
		t.Run(fmt.Sprintf("%d/%d", tc.cols, tc.group), func(t *testing.T) {
			const rows = 3
			cols, g := tc.cols, tc.group
			xs := randFloats(r, rows*cols, 3)
			ws := randFloats(r, g, 1)
			x := tensor(t, b, 4, cols, nil).Slice(1, 1+rows) // a view at an offset
			if err := b.Upload(x, xs); err != nil {
				t.Fatal(err)
			}
			w := tensor(t, b, 1, g, ws)
			const e = 1e-5
			if err := b.RMSNorm(x, x, w, e); err != nil { // in place
				t.Fatal(err)
			}
			got := download(t, b, x)
			w64 := to64(1, g, ws)[0]
			for rr := range rows {
				x64 := to64(rows, cols, xs)[rr]
				for h := 0; h < cols; h += g {
					want := reference.RMSNorm(x64[h:h+g], w64, e)
					for c := range g {
						if tol := 1e-5*math.Abs(want[c]) + 1e-7; !within(got[rr*cols+h+c], want[c], tol) {
							t.Fatalf("[%d][%d]: got %v, want %v ± %.3g", rr, h+c, got[rr*cols+h+c], want[c], tol)
						}
					}
				}
			}
		})
	}
	x := tensor(t, b, 2, 6, nil)
	errIs(t, "weight not dividing the row", b.RMSNorm(x, x, tensor(t, b, 1, 4, nil), 1e-5), kernels.ErrShape)
	errIs(t, "weight longer than the row", b.RMSNorm(x, x, tensor(t, b, 1, 12, nil), 1e-5), kernels.ErrShape)
	errIs(t, "two-row weight", b.RMSNorm(x, x, tensor(t, b, 2, 6, nil), 1e-5), kernels.ErrShape)
}

func testRoPE(t *testing.T, b kernels.Backend) {
	tests := []struct {
		name  string
		heads int
		p     kernels.RoPE
	}{
		{"normal", 2, kernels.RoPE{HeadDim: 8, Base: 10000}},
		{"neox", 3, kernels.RoPE{HeadDim: 8, Base: 10000, NeoX: true}},
		{"partial rotary", 2, kernels.RoPE{HeadDim: 16, Dims: 8, Base: 10000, NeoX: true}},
		{"linear scaling", 1, kernels.RoPE{HeadDim: 64, Base: 500000, Scale: 0.25}},
		{"frequency factors", 2, kernels.RoPE{HeadDim: 8, Base: 10000, Factors: []float32{1, 2, 4, 8}}},
	}
	r := newRand(7)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols := tt.heads * tt.p.HeadDim
			pos := []int32{0, 1, 17, 4095, 3}
			xs := randFloats(r, len(pos)*cols, 1)
			x := tensor(t, b, len(pos), cols, xs)
			if err := b.RoPE(x, pos, tt.p); err != nil {
				t.Fatal(err)
			}
			got := download(t, b, x)
			for rr, p := range pos {
				in := to64(len(pos), cols, xs)[rr]
				want := reference.RoPE(in, int(p), tt.p)
				for c := range cols {
					// The pair partner of c decides the scale of the error.
					tol := (2e-6 + 5e-7*float64(p)) * (math.Abs(in[c]) + pairAbs(in, c, tt.p))
					if !within(got[rr*cols+c], want[c], tol+1e-12) {
						t.Fatalf("pos %d col %d: got %v, want %v ± %.3g", p, c, got[rr*cols+c], want[c], tol)
					}
				}
			}
		})
	}
	x := tensor(t, b, 1, 8, nil)
	errIs(t, "odd dims", b.RoPE(x, []int32{0}, kernels.RoPE{HeadDim: 8, Dims: 3, Base: 1e4}), kernels.ErrShape)
	errIs(t, "head dim not dividing", b.RoPE(x, []int32{0}, kernels.RoPE{HeadDim: 6, Base: 1e4}), kernels.ErrShape)
	errIs(t, "positions", b.RoPE(x, []int32{0, 1}, kernels.RoPE{HeadDim: 8, Base: 1e4}), kernels.ErrShape)
	errIs(t, "factors", b.RoPE(x, []int32{0}, kernels.RoPE{HeadDim: 8, Base: 1e4, Factors: []float32{1}}), kernels.ErrShape)
}

// pairAbs returns |x| of the element that c is rotated with (0 if none).
func pairAbs(x []float64, c int, p kernels.RoPE) float64 {
	dims := p.Dims
	if dims == 0 {
		dims = p.HeadDim
	}
	h, i := c/p.HeadDim*p.HeadDim, c%p.HeadDim
	if i >= dims {
		return 0
	}
	j := i ^ 1
	if p.NeoX {
		j = (i + dims/2) % dims
	}
	return math.Abs(x[h+j])
}

func testActivations(t *testing.T, b kernels.Backend) {
	r := newRand(8)
	const rows, cols = 2, 50
	g := randFloats(r, rows*cols, 4)
	u := randFloats(r, rows*cols, 1)
	g = append(g[:len(g)-4], 0, -100, 100, 1e-3)
	gt, ut := tensor(t, b, rows, cols, g), tensor(t, b, rows, cols, u)
	s := tensor(t, b, rows, cols, nil)
	if err := b.SiLU(s, gt); err != nil {
		t.Fatal(err)
	}
	sw := tensor(t, b, rows, cols, nil)
	if err := b.SwiGLU(sw, gt, ut); err != nil {
		t.Fatal(err)
	}
	gotS, gotW := download(t, b, s), download(t, b, sw)
	for i := range g {
		want := reference.SiLU(float64(g[i]))
		if !within(gotS[i], want, 4e-6*math.Abs(want)+1e-30) {
			t.Fatalf("silu(%v): got %v, want %v", g[i], gotS[i], want)
		}
		want *= float64(u[i])
		if !within(gotW[i], want, 4e-6*math.Abs(want)+1e-30) {
			t.Fatalf("swiglu(%v, %v): got %v, want %v", g[i], u[i], gotW[i], want)
		}
	}
	// In place, aliasing the gate.
	if err := b.SwiGLU(gt, gt, ut); err != nil {
		t.Fatal(err)
	}
	checkBits(t, "swiglu in place", download(t, b, gt), gotW)
}

func testSoftmax(t *testing.T, b kernels.Backend) {
	r := newRand(9)
	for _, cols := range []int{1, 5, 1000} {
		xs := randFloats(r, 2*cols, 5)
		xs[0] = 80 // large values must not overflow
		x := tensor(t, b, 2, cols, xs)
		if err := b.Softmax(x); err != nil {
			t.Fatal(err)
		}
		got := download(t, b, x)
		for rr := range 2 {
			want := reference.Softmax(to64(2, cols, xs)[rr])
			for c := range cols {
				if !within(got[rr*cols+c], want[c], 1e-5*want[c]+1e-9) {
					t.Fatalf("cols %d [%d][%d]: got %v, want %v", cols, rr, c, got[rr*cols+c], want[c])
				}
			}
		}
	}
}

func testAddCopySlice(t *testing.T, b kernels.Backend) {
	r := newRand(10)
	const rows, cols = 4, 6
	as, bs, bias := randFloats(r, rows*cols, 1), randFloats(r, rows*cols, 1), randFloats(r, cols, 1)
	a, bt, bi := tensor(t, b, rows, cols, as), tensor(t, b, rows, cols, bs), tensor(t, b, 1, cols, bias)
	dst := tensor(t, b, rows, cols, nil)
	if err := b.Add(dst, a, bt); err != nil {
		t.Fatal(err)
	}
	got := download(t, b, dst)
	for i := range got {
		if got[i] != as[i]+bs[i] {
			t.Fatalf("add %d: got %v, want %v", i, got[i], as[i]+bs[i])
		}
	}
	if err := b.Add(a, a, bi); err != nil { // bias, in place
		t.Fatal(err)
	}
	got = download(t, b, a)
	for i := range got {
		if want := as[i] + bias[i%cols]; got[i] != want {
			t.Fatalf("bias add %d: got %v, want %v", i, got[i], want)
		}
	}
	// Slice views share memory: copy row 3 of b into row 0 of dst.
	if err := b.Copy(dst.Slice(0, 1), bt.Slice(3, 4)); err != nil {
		t.Fatal(err)
	}
	got = download(t, b, dst)
	checkBits(t, "copied row", got[:cols], bs[3*cols:4*cols])
	if s := dst.Slice(1, 3); s.Rows() != 2 || s.Cols() != cols {
		t.Fatalf("slice shape %d×%d, want 2×%d", s.Rows(), s.Cols(), cols)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Slice beyond the rows did not panic")
			}
		}()
		dst.Slice(2, rows+1)
	}()
}

// testRowOpsBatchInvariance: row-wise ops give a row the same bits alone
// and in a batch.
func testRowOpsBatchInvariance(t *testing.T, b kernels.Backend) {
	r := newRand(11)
	const rows, cols = 70, 256 // enough elements for a backend to go parallel
	xs := randFloats(r, rows*cols, 2)
	ws := randFloats(r, cols, 1)
	pos := make([]int32, rows)
	for i := range pos {
		pos[i] = int32(r.IntN(5000))
	}
	rope := kernels.RoPE{HeadDim: 64, Base: 10000, NeoX: true}
	ops := map[string]func(x kernels.Tensor, p []int32) error{
		"rmsnorm": func(x kernels.Tensor, _ []int32) error { return b.RMSNorm(x, x, tensor(t, b, 1, cols, ws), 1e-6) },
		"rope":    func(x kernels.Tensor, p []int32) error { return b.RoPE(x, p, rope) },
		"softmax": func(x kernels.Tensor, _ []int32) error { return b.Softmax(x) },
		"silu":    func(x kernels.Tensor, _ []int32) error { return b.SiLU(x, x) },
	}
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		op := ops[name]
		all := tensor(t, b, rows, cols, xs)
		if err := op(all, pos); err != nil {
			t.Fatal(err)
		}
		got := download(t, b, all)
		for _, i := range []int{0, 4, 33, rows - 1} {
			one := tensor(t, b, 1, cols, xs[i*cols:(i+1)*cols])
			if err := op(one, pos[i:i+1]); err != nil {
				t.Fatal(err)
			}
			checkBits(t, fmt.Sprintf("%s row %d", name, i), download(t, b, one), got[i*cols:(i+1)*cols])
		}
	}
}

func testShapeErrors(t *testing.T, b kernels.Backend) {
	r := newRand(12)
	w := randWeights(t, r, kernels.Q8_0, 4, 64).matrix(t, b)
	x := tensor(t, b, 2, 64, nil)
	tests := []struct {
		name string
		err  error
	}{
		{"matmul wrong output cols", b.MatMul(tensor(t, b, 2, 5, nil), x, w)},
		{"matmul wrong output rows", b.MatMul(tensor(t, b, 3, 4, nil), x, w)},
		{"matmul wrong input cols", b.MatMul(tensor(t, b, 2, 4, nil), tensor(t, b, 2, 32, nil), w)},
		{"matmul output aliases input", b.MatMul(x.Slice(0, 1), x.Slice(0, 1), mustMatrix(t, b, kernels.F32, 64, 64))},
		{"add shapes", b.Add(x, x, tensor(t, b, 2, 32, nil))},
		{"add broadcast of two rows", b.Add(tensor(t, b, 3, 64, nil), tensor(t, b, 3, 64, nil), x)},
		{"swiglu shapes", b.SwiGLU(x, x, tensor(t, b, 1, 64, nil))},
		{"rmsnorm weight", b.RMSNorm(x, x, tensor(t, b, 2, 64, nil), 1e-5)},
		{"copy shapes", b.Copy(x, tensor(t, b, 1, 64, nil))},
		{"upload length", b.Upload(x, make([]float32, 3))},
		{"download length", b.Download(make([]float32, 3), x)},
	}
	for _, tt := range tests {
		errIs(t, tt.name, tt.err, kernels.ErrShape)
	}
	matrixTests := []struct {
		name       string
		dt         kernels.DType
		rows, cols int
		bytes      int
	}{
		{"cols not a block multiple", kernels.Q8_0, 1, 33, 34},
		{"short data", kernels.Q8_0, 2, 32, 34},
		{"long data", kernels.F16, 1, 4, 10},
		{"unsupported dtype", kernels.DType(23), 1, 32, 32},
		{"no rows", kernels.F32, 0, 4, 0},
	}
	for _, tt := range matrixTests {
		_, err := b.NewMatrix(tt.dt, tt.rows, tt.cols, make([]byte, tt.bytes))
		errIs(t, tt.name, err, kernels.ErrShape)
	}
	_, err := b.NewTensor(-1, 3)
	errIs(t, "negative rows", err, kernels.ErrShape)
}

func mustMatrix(t tb, b kernels.Backend, dt kernels.DType, rows, cols int) kernels.Matrix {
	t.Helper()
	rb, _ := dt.RowBytes(cols)
	m, err := b.NewMatrix(dt, rows, cols, make([]byte, rows*rb))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
