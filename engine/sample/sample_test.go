package sample

import (
	"errors"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func mustNew(t *testing.T, p Params, prompt []int32) *Sampler {
	t.Helper()
	s, err := New(p, prompt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidate(t *testing.T) {
	bad := []Params{
		{Temperature: -0.1}, {Temperature: 2.5}, {Temperature: math.NaN()}, {TopK: -1}, {TopP: 1.5},
		{MinP: -1}, {RepetitionPenalty: -1}, {FrequencyPenalty: 3}, {PresencePenalty: -3}, {TopLogprobs: 21},
	}
	for _, p := range bad {
		if _, err := New(p, nil); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("New(%+v): got %v, want ErrInvalidParams", p, err)
		}
	}
	if _, err := New(Params{Temperature: 1, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1, TopLogprobs: 5}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGreedy(t *testing.T) {
	tests := []struct {
		name   string
		p      Params
		prompt []int32
		logits []float32
		want   int32
	}{
		{"argmax", Params{}, nil, []float32{0.1, 3, 2, -1}, 1},
		{"ties take the lowest id", Params{}, nil, []float32{1, 5, 5, 0}, 1},
		{"NaN and Inf are ignored", Params{}, nil, []float32{float32(math.NaN()), 1, float32(math.Inf(1)), 0.5}, 1},
		{"repetition penalty", Params{RepetitionPenalty: 2}, []int32{1}, []float32{0, 3, 2, 0}, 2},
		{"repetition penalty pushes negatives down", Params{RepetitionPenalty: 2}, []int32{0}, []float32{-1, -1.5, -3}, 1},
		{"frequency penalty counts", Params{FrequencyPenalty: 1}, []int32{1, 1}, []float32{0, 3, 1.5}, 2},
		{"presence penalty once", Params{PresencePenalty: 1}, []int32{1, 1, 1}, []float32{0, 3, 2.5}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := mustNew(t, tt.p, tt.prompt).Sample(tt.logits)
			if err != nil {
				t.Fatal(err)
			}
			if c.Token != tt.want {
				t.Fatalf("got token %d, want %d", c.Token, tt.want)
			}
		})
	}
	if _, err := mustNew(t, Params{}, nil).Sample([]float32{float32(math.NaN())}); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("got %v, want an error for a row without finite logits", err)
	}
}

func TestFilters(t *testing.T) {
	logits := []float32{4, 3.9, 1, 0, -2, -5}
	tests := []struct {
		name    string
		p       Params
		allowed map[int32]bool
	}{
		{"top-k 2", Params{Temperature: 1, TopK: 2}, map[int32]bool{0: true, 1: true}},
		{"top-p 0.5 keeps the best", Params{Temperature: 1, TopP: 0.5}, map[int32]bool{0: true}},
		{"top-p 0.9 keeps two", Params{Temperature: 1, TopP: 0.9}, map[int32]bool{0: true, 1: true}},
		{"min-p 0.1", Params{Temperature: 1, MinP: 0.1}, map[int32]bool{0: true, 1: true}},
		{"min-p 0.01", Params{Temperature: 1, MinP: 0.01}, map[int32]bool{0: true, 1: true, 2: true, 3: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[int32]bool{}
			for seed := range uint64(300) {
				p := tt.p
				p.Seed = seed
				c, err := mustNew(t, p, nil).Sample(logits)
				if err != nil {
					t.Fatal(err)
				}
				if !tt.allowed[c.Token] {
					t.Fatalf("seed %d sampled %d, outside %v", seed, c.Token, tt.allowed)
				}
				seen[c.Token] = true
			}
			if len(seen) != len(tt.allowed) {
				t.Fatalf("300 seeds sampled %v, want every one of %v", seen, tt.allowed)
			}
		})
	}
}

func TestTemperatureMatchesSoftmax(t *testing.T) {
	logits := []float32{1, 0, -1}
	counts := make([]int, 3)
	const n = 20000
	s := mustNew(t, Params{Temperature: 1, Seed: 7}, nil)
	for range n {
		c, _ := s.Sample(logits)
		counts[c.Token]++
		s.counts = map[int32]int{} // no penalties configured, but keep history empty anyway
	}
	z := math.Exp(1) + 1 + math.Exp(-1)
	for i, want := range []float64{math.Exp(1) / z, 1 / z, math.Exp(-1) / z} {
		got := float64(counts[i]) / n
		if math.Abs(got-want) > 0.015 {
			t.Errorf("token %d: frequency %.3f, want %.3f", i, got, want)
		}
	}
}

func TestLogprobs(t *testing.T) {
	c, err := mustNew(t, Params{Logprobs: true, TopLogprobs: 2}, nil).Sample([]float32{math.Ln2, 0})
	if err != nil {
		t.Fatal(err)
	}
	// p = 2/3 and 1/3.
	if c.Token != 0 || math.Abs(c.Logprob-math.Log(2.0/3)) > 1e-6 {
		t.Fatalf("got %+v, want token 0 with log(2/3)", c)
	}
	if len(c.Top) != 2 || c.Top[1].Token != 1 || math.Abs(c.Top[1].Logprob-math.Log(1.0/3)) > 1e-6 {
		t.Fatalf("got top %+v", c.Top)
	}
}

// Same seed, same history, same logits: same tokens. Property over random
// parameters and logits.
func TestSeedReproducible(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := Params{
			Temperature: rapid.Float64Range(0, 2).Draw(rt, "temp"),
			TopK:        rapid.IntRange(0, 10).Draw(rt, "topk"),
			TopP:        rapid.Float64Range(0, 1).Draw(rt, "topp"),
			MinP:        rapid.Float64Range(0, 1).Draw(rt, "minp"),
			Seed:        rapid.Uint64().Draw(rt, "seed"),
		}
		logits := rapid.SliceOfN(rapid.Float32Range(-10, 10), 1, 50).Draw(rt, "logits")
		a, _ := New(p, nil)
		b, _ := New(p, nil)
		for range 5 {
			ca, err := a.Sample(logits)
			if err != nil {
				rt.Fatal(err)
			}
			cb, _ := b.Sample(logits)
			if ca.Token != cb.Token || int(ca.Token) >= len(logits) || ca.Token < 0 {
				rt.Fatalf("tokens %d and %d for the same seed", ca.Token, cb.Token)
			}
		}
	})
}

// allowOnly is a Constraint allowing a fixed set, recording what it was
// told.
type allowOnly struct {
	mask     []uint64
	accepted []int32
}

func (a *allowOnly) Allowed() ([]uint64, error) { return a.mask, nil }
func (a *allowOnly) Accept(tok int32) error     { a.accepted = append(a.accepted, tok); return nil }

func maskOf(n int, toks ...int32) []uint64 {
	m := make([]uint64, (n+63)/64)
	for _, t := range toks {
		m[t>>6] |= 1 << (t & 63)
	}
	return m
}

// Logit bias and the constraint: -100 bans, +100 wins, the constraint's
// mask leaves only its tokens (greedy and sampled, whatever the logits),
// the constraint hears every choice, and nothing left is ErrNoToken.
func TestBiasAndConstraint(t *testing.T) {
	logits := make([]float32, 100)
	for i := range logits {
		logits[i] = float32(i) / 10 // 99 is the greedy choice
	}
	tests := []struct {
		name    string
		p       Params
		allow   []int32 // nil: no constraint
		want    []int32 // the tokens that may come out
		wantErr error
	}{
		{"ban the best", Params{LogitBias: map[int32]float64{99: -100}}, nil, []int32{98}, nil},
		{"force one", Params{Temperature: 1, LogitBias: map[int32]float64{3: 100}}, nil, []int32{3}, nil},
		{"constraint greedy", Params{}, []int32{5, 7}, []int32{7}, nil},
		{"constraint sampled", Params{Temperature: 2, TopK: 50}, []int32{5, 7, 11}, []int32{5, 7, 11}, nil},
		{"constraint and bias", Params{LogitBias: map[int32]float64{5: 10}}, []int32{5, 7}, []int32{5}, nil},
		{"constraint and ban", Params{LogitBias: map[int32]float64{7: -100}}, []int32{7}, nil, ErrNoToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.p, nil)
			if err != nil {
				t.Fatal(err)
			}
			var con *allowOnly
			if tt.allow != nil {
				con = &allowOnly{mask: maskOf(len(logits), tt.allow...)}
				s.Constrain(con)
			}
			for range 50 {
				c, err := s.Sample(logits)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("got %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(tt.want, c.Token) {
					t.Fatalf("got token %d, want one of %v", c.Token, tt.want)
				}
				if con != nil && con.accepted[len(con.accepted)-1] != c.Token {
					t.Fatalf("constraint told %v, want %d last", con.accepted, c.Token)
				}
			}
		})
	}
	for _, b := range []float64{-100.5, 101, math.NaN()} {
		if err := (Params{LogitBias: map[int32]float64{1: b}}).Validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("bias %v: got %v, want ErrInvalidParams", b, err)
		}
	}
	if err := (Params{LogitBias: map[int32]float64{-1: 1}}).Validate(); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("negative id: got %v, want ErrInvalidParams", err)
	}
}

// TestScore: Score's log-probability and alternatives equal a log-softmax
// over the whole row and a full sort (ties by lowest id), whatever n.
func TestScore(t *testing.T) {
	rows := [][]float32{
		{1, 2, 3, 3, -1, 0.5, 2, 7, 7, -4},
		{0, 0, 0, 0},
		{-100, 50, 49.5, 3},
	}
	for ri, row := range rows {
		m := math.Inf(-1)
		for _, x := range row {
			m = max(m, float64(x))
		}
		s := 0.0
		for _, x := range row {
			s += math.Exp(float64(x) - m)
		}
		lse := m + math.Log(s)
		c := make([]cand, len(row))
		for i, x := range row {
			c[i] = cand{int32(i), float64(x)}
		}
		slices.SortFunc(c, compareCands)
		for n := 0; n <= len(row)+1; n++ {
			for tok := range row {
				lp, top, err := Score(row, int32(tok), n)
				if err != nil {
					t.Fatal(err)
				}
				if want := float64(row[tok]) - lse; math.Abs(lp-want) > 1e-12 {
					t.Fatalf("row %d token %d: got %v, want %v", ri, tok, lp, want)
				}
				if len(top) != min(n, len(row)) {
					t.Fatalf("row %d n %d: got %d alternatives", ri, n, len(top))
				}
				for k, tp := range top {
					if tp.Token != c[k].tok || math.Abs(tp.Logprob-(c[k].logit-lse)) > 1e-12 {
						t.Fatalf("row %d n %d alternative %d: got %+v, want token %d", ri, n, k, tp, c[k].tok)
					}
				}
			}
		}
	}
	if _, _, err := Score([]float32{1, float32(math.NaN())}, 0, 1); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("NaN: got %v, want ErrInvalidParams", err)
	}
	if _, _, err := Score([]float32{1, 2}, 2, 1); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("token outside: got %v, want ErrInvalidParams", err)
	}
}
