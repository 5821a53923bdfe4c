package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/reference"
)

// testScaleGeGLU checks kernels.Scaler and kernels.GeGLUer against float64
// formulas, when b has them.
func testScaleGeGLU(t *testing.T, b kernels.Backend) {
	r := newRand(30)
	const rows, cols = 3, 40
	g := randFloats(r, rows*cols, 4)
	g = append(g[:len(g)-5], 0, -100, 100, 1e-3, -3)
	u := randFloats(r, rows*cols, 1)
	t.Run("Scale", func(t *testing.T) {
		s, ok := b.(kernels.Scaler)
		if !ok {
			t.Skipf("%s has no Scale", b.Name())
		}
		x := tensor(t, b, rows, cols, g)
		out := tensor(t, b, rows, cols, nil)
		if err := s.Scale(out, x, 0.125); err != nil {
			t.Fatal(err)
		}
		got := download(t, b, out)
		for i, v := range g {
			if want := v * 0.125; got[i] != want {
				t.Fatalf("scale(%v): got %v, want %v", v, got[i], want)
			}
		}
		if err := s.Scale(x, x, 0.125); err != nil {
			t.Fatal(err)
		}
		checkBits(t, "scale in place", download(t, b, x), got)
		errIs(t, "scale of different shapes", s.Scale(tensor(t, b, rows, cols-1, nil), x, 2), kernels.ErrShape)
	})
	t.Run("GeGLU", func(t *testing.T) {
		gg, ok := b.(kernels.GeGLUer)
		if !ok {
			t.Skipf("%s has no GeGLU", b.Name())
		}
		gt, ut := tensor(t, b, rows, cols, g), tensor(t, b, rows, cols, u)
		out := tensor(t, b, rows, cols, nil)
		if err := gg.GeGLU(out, gt, ut); err != nil {
			t.Fatal(err)
		}
		got := download(t, b, out)
		for i := range g {
			x := float64(g[i])
			want := 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * float64(u[i])
			if !within(got[i], want, 4e-6*math.Abs(want)+1e-30) {
				t.Fatalf("geglu(%v, %v): got %v, want %v", g[i], u[i], got[i], want)
			}
		}
		if err := gg.GeGLU(gt, gt, ut); err != nil {
			t.Fatal(err)
		}
		checkBits(t, "geglu in place", download(t, b, gt), got)
		errIs(t, "geglu of different shapes", gg.GeGLU(out, gt, tensor(t, b, rows, cols+1, nil)), kernels.ErrShape)
	})
}

// testWindowAttention checks kernels.WindowAttender: a query at position p
// attends to exactly the keys of positions p−W+1…p (llama.cpp's standard
// sliding window), with the given score scale, against dense reference
// attention over those keys alone; a window that covers the whole sequence
// is bit-identical to Attention.
func testWindowAttention(t *testing.T, b kernels.Backend) {
	p := newPool(t, isolation.Config{}, "a", "b")
	a := newArena(t, b)
	wa, ok := a.(kernels.WindowAttender)
	if !ok {
		t.Skipf("%s arenas have no AttentionWith", b.Name())
	}
	r := newRand(31)
	s1, s2 := allocate(t, p, "a", "r1", 20), allocate(t, p, "b", "r1", 20)
	seqs := []*seq{s1, s2}
	qw := tQHeads * tHeadDim
	for i, n := range [][]int{{11, 3}, {1, 1}, {1, 9}, {2, 1}} {
		res := step(t, b, p, a, r, seqs, n)
		rows := n[0] + n[1]
		for _, o := range []kernels.AttentionOptions{{Window: 1}, {Window: 3}, {Window: 5, Scale: 0.5}, {Window: 4}, {Scale: 0.2}} {
			t.Run(fmt.Sprintf("step %d %+v", i, o), func(t *testing.T) {
				for l := range tLayers {
					q := tensor(t, b, rows, qw, res.q[l])
					out := tensor(t, b, rows, qw, nil)
					if err := wa.AttentionWith(l, out, q, res.spans, o); err != nil {
						t.Fatal(err)
					}
					got := download(t, b, out)
					// The reference scales by 1/sqrt(head_dim): give it q
					// multiplied so that the product has o's scale.
					qmul := 1.0
					if o.Scale != 0 {
						qmul = float64(o.Scale) * math.Sqrt(tHeadDim)
					}
					for si, s := range seqs {
						sp := res.spans[si]
						for j := range sp.N {
							row, pos := sp.Row+j, sp.Pos+j
							lo := 0
							if o.Window > 0 {
								lo = max(0, pos+1-o.Window)
							}
							qv := to64(1, qw, res.q[l][row*qw:(row+1)*qw])[0]
							for c := range qv {
								qv[c] *= qmul
							}
							want := reference.Attention(qv, s.keys[l][lo:pos+1], s.vals[l][lo:pos+1], tQHeads, tKVHeads, tHeadDim)
							for c := range qw {
								if !within(got[row*qw+c], want[c], 1e-4) {
									t.Fatalf("layer %d seq %d pos %d col %d: got %v, want %v (window [%d, %d])", l, si, pos, c, got[row*qw+c], want[c], lo, pos)
								}
							}
						}
					}
				}
			})
		}
		// A window wider than every sequence, and the zero options: Attention's bits.
		for _, o := range []kernels.AttentionOptions{{}, {Window: 1000}, {Scale: float32(1 / math.Sqrt(tHeadDim))}} {
			for l := range tLayers {
				q := tensor(t, b, rows, qw, res.q[l])
				out := tensor(t, b, rows, qw, nil)
				if err := wa.AttentionWith(l, out, q, res.spans, o); err != nil {
					t.Fatal(err)
				}
				checkBits(t, fmt.Sprintf("step %d layer %d %+v vs Attention", i, l, o), download(t, b, out), res.out[l])
			}
		}
	}
	q := tensor(t, b, 1, qw, nil)
	out := tensor(t, b, 1, qw, nil)
	for _, o := range []kernels.AttentionOptions{{Window: -1}, {Scale: -1}, {Scale: float32(math.NaN())}, {Scale: float32(math.Inf(1))}} {
		errIs(t, fmt.Sprintf("options %+v", o), wa.AttentionWith(0, out, q, res0(p, s1), o), kernels.ErrShape)
	}
}

func res0(p *isolation.Pool, s *seq) []kernels.Span {
	bt, _ := p.BlockTable(s.lease, 1)
	return []kernels.Span{{Table: bt, Row: 0, Pos: 0, N: 1}}
}

// testBiasAttention checks Bidirectional and a T5 relative-position Bias
// (kernels.AttentionOptions) against dense float64 attention: every row of
// a span reads the keys of all the span's positions (Bidirectional) or of
// those up to its own, each score q·k plus the head's bucket bias, times
// the scale. A sequence's rows are bit-identical computed alone and in a
// batch with another; contradictory or misshapen options are ErrShape.
func testBiasAttention(t *testing.T, b kernels.Backend) {
	p := newPool(t, isolation.Config{}, "a", "b")
	a := newArena(t, b)
	wa, ok := a.(kernels.WindowAttender)
	if !ok {
		t.Skipf("%s arenas have no AttentionWith", b.Name())
	}
	r := newRand(32)
	s1, s2 := allocate(t, p, "a", "r1", 40), allocate(t, p, "b", "r1", 40)
	seqs := []*seq{s1, s2}
	qw := tQHeads * tHeadDim
	table := randFloats(r, 8*tQHeads, 2)
	for i, n := range [][]int{{13, 3}, {1, 21}, {9, 1}} {
		res := step(t, b, p, a, r, seqs, n)
		rows := n[0] + n[1]
		for _, o := range []kernels.AttentionOptions{
			{Bidirectional: true},
			{Bidirectional: true, Scale: 1, Bias: &kernels.PosBias{Heads: tQHeads, Buckets: 8, MaxDistance: 6, Bidirectional: true, Table: table}},
			{Scale: 0.3, Bias: &kernels.PosBias{Heads: tQHeads, Buckets: 8, MaxDistance: 10, Table: table}},
		} {
			t.Run(fmt.Sprintf("step %d %v %v", i, o.Bidirectional, o.Bias != nil), func(t *testing.T) {
				for l := range tLayers {
					q := tensor(t, b, rows, qw, res.q[l])
					out := tensor(t, b, rows, qw, nil)
					if err := wa.AttentionWith(l, out, q, res.spans, o); err != nil {
						t.Fatal(err)
					}
					got := download(t, b, out)
					scale := 1 / math.Sqrt(tHeadDim)
					if o.Scale != 0 {
						scale = float64(o.Scale)
					}
					for si, s := range seqs {
						sp := res.spans[si]
						// Alone: the same rows, the same bits.
						alone := tensor(t, b, sp.N, qw, nil)
						one := []kernels.Span{{Table: sp.Table, Row: 0, Pos: sp.Pos, N: sp.N}}
						if err := wa.AttentionWith(l, alone, tensor(t, b, sp.N, qw, res.q[l][sp.Row*qw:(sp.Row+sp.N)*qw]), one, o); err != nil {
							t.Fatal(err)
						}
						checkBits(t, fmt.Sprintf("layer %d seq %d alone vs batched", l, si), download(t, b, alone), got[sp.Row*qw:(sp.Row+sp.N)*qw])
						for j := range sp.N {
							row, pos := sp.Row+j, sp.Pos+j
							end := pos + 1
							if o.Bidirectional {
								end = sp.Pos + sp.N
							}
							qv := to64(1, qw, res.q[l][row*qw:(row+1)*qw])[0]
							bias := func(h, kp int) float64 {
								if o.Bias == nil {
									return 0
								}
								bk := kernels.RelativeBucket(kp-pos, o.Bias.Buckets, o.Bias.MaxDistance, o.Bias.Bidirectional)
								return float64(table[bk*tQHeads+h])
							}
							want := reference.AttentionBias(qv, s.keys[l][:end], s.vals[l][:end], tQHeads, tKVHeads, tHeadDim, scale, bias)
							for c := range qw {
								if !within(got[row*qw+c], want[c], 1e-4) {
									t.Fatalf("layer %d seq %d pos %d col %d: got %v, want %v", l, si, pos, c, got[row*qw+c], want[c])
								}
							}
						}
					}
				}
			})
		}
	}
	q := tensor(t, b, 1, qw, nil)
	out := tensor(t, b, 1, qw, nil)
	for _, o := range []kernels.AttentionOptions{
		{Bidirectional: true, Window: 2},
		{Bias: &kernels.PosBias{Heads: tQHeads - 1, Buckets: 8, MaxDistance: 10, Table: table[:8*(tQHeads-1)]}},
		{Bias: &kernels.PosBias{Heads: tQHeads, Buckets: 8, MaxDistance: 10, Table: table[:7]}},
		{Bias: &kernels.PosBias{Heads: tQHeads, Buckets: 2, MaxDistance: 10, Bidirectional: true, Table: table[:2*tQHeads]}},
		{Bias: &kernels.PosBias{Heads: tQHeads, Buckets: 8, MaxDistance: 2, Bidirectional: true, Table: table}},
	} {
		errIs(t, fmt.Sprintf("options %+v", o), wa.AttentionWith(0, out, q, res0(p, s1), o), kernels.ErrShape)
	}
}
