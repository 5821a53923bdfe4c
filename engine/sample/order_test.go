package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestOrderMatchesComparisonSort: the radix sort and the top-k selection
// give exactly the comparison sort's sequence (best logit first, ties by
// lowest id) on any finite logits: many ties, ±0, extremes, any input
// order.
func TestOrderMatchesComparisonSort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 600).Draw(t, "n")
		pool := []float64{0, math.Copysign(0, -1), 1, -1, 1.5, -2.25, math.MaxFloat64, -math.MaxFloat64,
			math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 3.4028234663852886e38, 1e-300}
		c := make([]cand, n)
		for i := range c {
			var l float64
			if rapid.Bool().Draw(t, "fromPool") {
				l = rapid.SampledFrom(pool).Draw(t, "l")
			} else {
				l = float64(rapid.Float32Range(-1e6, 1e6).Draw(t, "f"))
			}
			c[i] = cand{tok: int32(i), logit: l}
		}
		perm := rapid.Bool().Draw(t, "shuffle")
		if perm {
			r := rand.New(rand.NewPCG(uint64(n), 1))
			r.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
		}
		want := slices.Clone(c)
		slices.SortFunc(want, compareCands)
		var s Sampler
		got := slices.Clone(c)
		s.sortCands(got)
		if !slices.Equal(got, want) {
			t.Fatalf("sortCands:\n got %v\nwant %v", got, want)
		}
		if n > 0 {
			k := rapid.IntRange(1, n).Draw(t, "k")
			top := s.topK(slices.Clone(c), k)
			if !slices.Equal(top, want[:k]) {
				t.Fatalf("topK(%d):\n got %v\nwant %v", k, top, want[:k])
			}
		}
	})
}

// BenchmarkSample: one temperature-sampling step over a 32k vocabulary,
// without and with top-k.
func BenchmarkSample(b *testing.B) {
	logits := make([]float32, 32000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	for _, p := range []Params{{Temperature: 0.8, TopP: 0.95}, {Temperature: 0.8, TopK: 40}} {
		b.Run(map[bool]string{false: "top-p", true: "top-k"}[p.TopK > 0], func(b *testing.B) {
			s, err := New(p, nil)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.Sample(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
