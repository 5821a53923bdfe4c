// Package sample turns a row of logits into a token: greedy, temperature,
// top-k, top-p, min-p, repetition / frequency / presence penalties, logit
// bias, a constraint (constrained decoding: a grammar's allowed tokens), a
// per-request seed, and log-probabilities.
//
// Order of operations on a row: penalties, logit bias (a bias of -100 bans
// the token outright), the constraint's mask (tokens it does not allow are
// dropped), then greedy or temperature / top-k / min-p / top-p sampling
// over what is left. Log-probabilities are those of that final
// distribution.
//
// A Sampler is deterministic: the same Params (seed included), history and
// logits always give the same token, whatever else runs on the server. It
// keeps no reference to the logits it is given. It is not safe for concurrent
// use; the engine owns one per request.
//
// Candidates are ordered best logit first, ties by lowest id (a total
// order): by a radix sort, and for top-k by a heap selection of the k best
// (order.go); a 32k vocabulary sorted by comparisons cost milliseconds a
// token.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/cloison/cloison"
)

// ErrInvalidParams: sampling parameters out of range (code invalid_request_error).
var ErrInvalidParams = cloison.NewError(cloison.CodeInvalid, "sample: invalid sampling parameters")

// Params are one request's sampling parameters, OpenAI-style.
type Params struct {
	// Temperature 0 means greedy (argmax, lowest id on ties). At most 2.
	Temperature float64
	// TopK keeps the K most likely tokens; 0 disables.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP; 0 or 1 disables.
	TopP float64
	// MinP drops tokens less likely than MinP × the most likely; 0 disables.
	MinP float64
	// RepetitionPenalty (llama.cpp / CTRL style) divides positive logits and
	// multiplies negative logits of tokens already seen; 0 or 1 disables.
	RepetitionPenalty float64
	// FrequencyPenalty subtracts count×penalty; PresencePenalty subtracts
	// penalty once for every token seen (OpenAI, range [-2, 2]).
	FrequencyPenalty float64
	PresencePenalty  float64
	// Seed makes sampling reproducible.
	Seed uint64
	// Logprobs asks for the chosen token's log-probability and the TopLogprobs
	// most likely alternatives (0–20).
	Logprobs    bool
	TopLogprobs int
	// LogitBias adds a bias in [-100, 100] to a token's logit (OpenAI's
	// logit_bias); -100 bans the token. Ids must be inside the vocabulary
	// (the engine checks them against its model).
	LogitBias map[int32]float64
}

// BanBias is the logit bias that bans a token.
const BanBias = -100

// Validate reports ErrInvalidParams for values outside their ranges.
func (p Params) Validate() error {
	bad := func(name string, v any) error { return fmt.Errorf("%w: %s = %v", ErrInvalidParams, name, v) }
	switch {
	case !(p.Temperature >= 0 && p.Temperature <= 2):
		return bad("temperature", p.Temperature)
	case p.TopK < 0:
		return bad("top_k", p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return bad("top_p", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return bad("min_p", p.MinP)
	case !(p.RepetitionPenalty >= 0 && p.RepetitionPenalty <= 10):
		return bad("repetition_penalty", p.RepetitionPenalty)
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return bad("frequency_penalty", p.FrequencyPenalty)
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return bad("presence_penalty", p.PresencePenalty)
	case p.TopLogprobs < 0 || p.TopLogprobs > 20:
		return bad("top_logprobs", p.TopLogprobs)
	}
	for tok, b := range p.LogitBias {
		if tok < 0 {
			return ErrInvalidParams.Withf("logit_bias token %d", tok)
		}
		if !(b >= -100 && b <= 100) {
			return ErrInvalidParams.Withf("logit_bias for token %d = %v, want [-100, 100]", tok, b)
		}
	}
	return nil
}

// Choice is a sampled token.
type Choice struct {
	Token   int32
	Logprob float64     // log-probability under the final distribution (0 if not asked)
	Top     []TokenProb // most likely alternatives, best first (if asked)
}

// TokenProb is a token with its log-probability.
type TokenProb struct {
	Token   int32
	Logprob float64
}

// ErrNoToken: the constraint and the logit bias left no token to choose
// (code internal_error: a grammar always allows some token until it is
// complete, so this is a defect, and the request fails closed).
var ErrNoToken = cloison.NewError(cloison.CodeInternal, "sample: no allowed token")

// Constraint restricts which tokens may come next (constrained decoding).
// It must depend only on the tokens it accepted, so that sampling stays
// deterministic and independent of the batch.
type Constraint interface {
	// Allowed returns the allowed tokens as a bitset: token t is allowed
	// when bit t%64 of word t/64 is set. The slice may be reused.
	Allowed() ([]uint64, error)
	// Accept records the token the sampler chose.
	Accept(tok int32) error
}

// Sampler samples tokens for one request.
type Sampler struct {
	p      Params
	rng    *rand.Rand
	counts map[int32]int // tokens seen (prompt and output), for penalties
	work   []cand
	tmp    []keyed    // radix sort's buffers (order.go)
	con    Constraint // nil: unconstrained
}

// Constrain makes every later Sample choose among c's allowed tokens and
// report the choice to c.
func (s *Sampler) Constrain(c Constraint) { s.con = c }

type cand struct {
	tok   int32
	logit float64
}

// New returns a Sampler; the prompt counts as history for the penalties.
func New(p Params, prompt []int32) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15)), counts: map[int32]int{}}
	for _, t := range prompt {
		s.counts[t]++
	}
	return s, nil
}

// Accept records an emitted token in the history.
func (s *Sampler) Accept(tok int32) { s.counts[tok]++ }

// Sample picks the next token from logits (one row, the vocabulary) and
// records it (Accept). A logits row with no finite value is an error.
func (s *Sampler) Sample(logits []float32) (Choice, error) {
	p := s.p
	c := s.work[:0]
	for i, l := range logits {
		c = append(c, cand{int32(i), float64(l)})
	}
	// Penalties touch only tokens seen so far.
	for tok, n := range s.counts {
		if int(tok) >= len(c) || tok < 0 {
			continue
		}
		v := c[tok].logit
		if rp := p.RepetitionPenalty; rp > 0 && rp != 1 {
			if v > 0 {
				v /= rp
			} else {
				v *= rp
			}
		}
		c[tok].logit = v - float64(n)*p.FrequencyPenalty - p.PresencePenalty
	}
	for tok, b := range p.LogitBias {
		if int(tok) >= len(c) {
			continue
		}
		if b <= BanBias {
			c[tok].logit = math.Inf(-1)
		} else {
			c[tok].logit += b
		}
	}
	// Drop non-finite logits, and tokens the constraint does not allow.
	finite := 0
	var mask []uint64
	if s.con != nil {
		m, err := s.con.Allowed()
		if err != nil {
			return Choice{}, err
		}
		mask = m
	}
	k := 0
	for _, x := range c {
		if math.IsNaN(x.logit) || math.IsInf(x.logit, 0) {
			continue
		}
		finite++
		if mask != nil && (int(x.tok>>6) >= len(mask) || mask[x.tok>>6]&(1<<(x.tok&63)) == 0) {
			continue
		}
		c[k] = x
		k++
	}
	c = c[:k]
	s.work = c
	if len(c) == 0 {
		if finite > 0 || len(p.LogitBias) > 0 {
			return Choice{}, ErrNoToken.Withf("the response format and logit_bias leave no token")
		}
		return Choice{}, fmt.Errorf("%w: no finite logit in a row of %d", ErrInvalidParams, len(logits))
	}
	var choice Choice
	if p.Temperature == 0 {
		// Greedy: argmax, lowest id on ties; no sort unless logprobs are asked.
		best := 0
		for i := 1; i < len(c); i++ {
			if c[i].logit > c[best].logit {
				best = i
			}
		}
		choice.Token = c[best].tok
		if p.Logprobs {
			s.sortCands(c)
			lse := logSumExp(c, 1)
			choice.Logprob = c[0].logit - lse
			choice.Top = top(c, 1, lse, p.TopLogprobs)
		}
		return choice, s.accept(choice.Token)
	}
	invT := 1 / p.Temperature
	if p.TopK > 0 && p.TopK < len(c) {
		c = s.topK(c, p.TopK)
	} else {
		s.sortCands(c)
	}
	lse := logSumExp(c, invT)
	if p.MinP > 0 {
		// Keep tokens with prob ≥ MinP × max prob: logit·invT ≥ max·invT + ln MinP.
		cut := c[0].logit*invT + math.Log(p.MinP)
		n := 1
		for n < len(c) && c[n].logit*invT >= cut {
			n++
		}
		c = c[:n]
		lse = logSumExp(c, invT)
	}
	if p.TopP > 0 && p.TopP < 1 {
		cum, n := 0.0, 0
		for n < len(c) {
			cum += math.Exp(c[n].logit*invT - lse)
			n++
			if cum >= p.TopP {
				break
			}
		}
		c = c[:n]
		lse = logSumExp(c, invT)
	}
	u := s.rng.Float64()
	cum := 0.0
	pick := len(c) - 1
	for i := range c {
		cum += math.Exp(c[i].logit*invT - lse)
		if u < cum {
			pick = i
			break
		}
	}
	choice.Token = c[pick].tok
	if p.Logprobs {
		choice.Logprob = c[pick].logit*invT - lse
		choice.Top = top(c, invT, lse, p.TopLogprobs)
	}
	return choice, s.accept(choice.Token)
}

// accept records a sampled token in the history and the constraint.
func (s *Sampler) accept(tok int32) error {
	s.Accept(tok)
	if s.con != nil {
		return s.con.Accept(tok)
	}
	return nil
}

func logSumExp(c []cand, invT float64) float64 {
	m := c[0].logit * invT // c is sorted best first
	s := 0.0
	for _, x := range c {
		s += math.Exp(x.logit*invT - m)
	}
	return m + math.Log(s)
}

func top(c []cand, invT, lse float64, n int) []TokenProb {
	n = min(n, len(c))
	if n == 0 {
		return nil
	}
	out := make([]TokenProb, n)
	for i := range out {
		out[i] = TokenProb{Token: c[i].tok, Logprob: c[i].logit*invT - lse}
	}
	return out
}

// Score returns the log-probability of tok under the raw distribution of
// logits (log-softmax, no penalty, bias, temperature or constraint: what
// prompt scoring reports, as OpenAI's echo with logprobs and vLLM's
// prompt_logprobs do) and the n most likely tokens (n ≤ 20), best first,
// ties by lowest id. It keeps n candidates, never a sorted vocabulary. A
// row with a non-finite logit, or tok outside it, is ErrInvalidParams.
func Score(logits []float32, tok int32, n int) (float64, []TokenProb, error) {
	if tok < 0 || int(tok) >= len(logits) {
		return 0, nil, fmt.Errorf("%w: token %d outside a row of %d", ErrInvalidParams, tok, len(logits))
	}
	n = min(max(n, 0), 20, len(logits))
	best := make([]cand, 0, n+1)
	m := math.Inf(-1)
	for i, l := range logits {
		v := float64(l)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, nil, fmt.Errorf("%w: non-finite logit for token %d", ErrInvalidParams, i)
		}
		m = max(m, v)
		if n == 0 {
			continue
		}
		c := cand{int32(i), v}
		if len(best) == n && !better(c, best[n-1]) {
			continue
		}
		// Insertion into the n best (n ≤ 20).
		j := len(best)
		if j < n {
			best = append(best, c)
		} else {
			j = n - 1
		}
		for j > 0 && better(c, best[j-1]) {
			best[j] = best[j-1]
			j--
		}
		best[j] = c
	}
	s := 0.0
	for _, l := range logits {
		s += math.Exp(float64(l) - m)
	}
	lse := m + math.Log(s)
	var top []TokenProb
	if n > 0 {
		top = make([]TokenProb, len(best))
		for i, c := range best {
			top[i] = TokenProb{Token: c.tok, Logprob: c.logit - lse}
		}
	}
	return float64(logits[tok]) - lse, top, nil
}
