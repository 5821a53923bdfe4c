package engine

import (
	"errors"
	"sync"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// Admission errors. A rejection carries one of these (wrapped with the
// numbers) back to the client unchanged: the original error, never a
// placeholder.
var (
	ErrEmptyPrompt = cloison.NewError(cloison.CodeInvalid, "the prompt is empty")
	ErrMaxTokens   = cloison.NewError(cloison.CodeInvalid, "max_tokens must be at least 1 (0 only to score the prompt)")
	ErrBadToken    = cloison.NewError(cloison.CodeInvalid, "the prompt holds a token id outside the vocabulary")
	// ErrContextLength: prompt + max_tokens exceed the served context or
	// what the KV pool can ever hold for the tenant.
	ErrContextLength = cloison.NewError(cloison.CodeContextLengthExceeded, "context length exceeded")
)

// Request is what the scheduler needs of an inference request.
type Request struct {
	ID        cloison.RequestID
	Tenant    cloison.TenantID
	Prompt    []int32
	MaxTokens int // new tokens at most; 0 only with ScorePrompt
	// ScorePrompt asks for the log-probability of every prompt token
	// given the ones before it (GenerateRequest.ScorePrompt): the prompt
	// is computed in full, never taken from the prefix cache.
	ScorePrompt bool
	// CacheSalt narrows the tenant's prefix-cache namespace
	// (GenerateRequest.CacheSalt): the lease
	// finds and publishes only pages keyed with the same salt
	// (isolation.Pool.AllocatePrefixSalted). Submit derives it from the
	// client's salt and the request's LoRA adapter (prefixSalt); nil for none.
	CacheSalt []byte
}

// Ticket is proof that admission accepted a request. Only Admission.Admit
// makes a valid Ticket and only a valid Ticket can be enqueued: a rejected
// request has no Ticket, so it has no path to the queue, to the pool, to a
// transfer or to a token. The zero Ticket is refused by Scheduler.Enqueue.
type Ticket struct {
	req   Request
	valid bool
}

// Request returns the admitted request.
func (t Ticket) Request() Request { return t.req }

// AdmissionConfig configures Admission.
type AdmissionConfig struct {
	// ServedContext is the attested served context: prompt + max tokens may
	// not exceed it.
	ServedContext int
	// Vocab is the model's vocabulary size; prompt ids must lie in [0, Vocab).
	Vocab int
	// Pool is asked for the most tokens one lease of the tenant could hold.
	Pool *isolation.Pool
	// PrefillCapacity, on a decode node, is the smallest prefill node's
	// pool in tokens (attest.Prefill): a prompt that no prefill node can
	// hold is rejected here, before the decode node reserves anything.
	// 0: no bound (the node prefills itself).
	PrefillCapacity int
	// Unsafe (faults builds only) switches the length checks off, to prove
	// the other layers fail closed without them.
	Unsafe Unsafe
}

// Admission validates requests BEFORE anything is allocated: prompt length
// plus max new tokens against the served context and the tenant's pool
// capacity, token ids against the vocabulary. It allocates nothing, queues
// nothing, and is safe for concurrent use.
type Admission struct {
	cfg AdmissionConfig

	mu       sync.Mutex
	rejected map[cloison.TenantID]map[cloison.Code]uint64 // guarded by mu
}

// NewAdmission returns an Admission.
func NewAdmission(cfg AdmissionConfig) *Admission {
	return &Admission{cfg: cfg, rejected: map[cloison.TenantID]map[cloison.Code]uint64{}}
}

// Admit returns a Ticket for an acceptable request, or the typed reason it is
// rejected: ErrEmptyPrompt, ErrMaxTokens, ErrBadToken, ErrContextLength,
// isolation.ErrUnknownTenant. A rejection is terminal.
func (a *Admission) Admit(r Request) (Ticket, error) {
	if err := a.check(r); err != nil {
		a.mu.Lock()
		byCode := a.rejected[r.Tenant]
		if byCode == nil {
			byCode = map[cloison.Code]uint64{}
			a.rejected[r.Tenant] = byCode
		}
		byCode[cloison.ErrorCode(err)]++
		a.mu.Unlock()
		return Ticket{}, err
	}
	return Ticket{req: r, valid: true}, nil
}

func (a *Admission) check(r Request) error {
	if len(r.Prompt) == 0 {
		return ErrEmptyPrompt
	}
	if r.MaxTokens < 1 && !(r.MaxTokens == 0 && r.ScorePrompt) {
		return ErrMaxTokens.Withf("got %d", r.MaxTokens)
	}
	for i, t := range r.Prompt {
		if t < 0 || int(t) >= a.cfg.Vocab {
			return ErrBadToken.Withf("position %d holds %d, vocabulary has %d", i, t, a.cfg.Vocab)
		}
	}
	maxLease, err := a.cfg.Pool.MaxLeaseTokens(r.Tenant)
	if err != nil {
		return err
	}
	if a.cfg.Unsafe.skipLengthCheck() {
		return nil
	}
	// Overflow-safe: MaxTokens may be huge.
	total := len(r.Prompt) + min(r.MaxTokens, 1<<40)
	if total > a.cfg.ServedContext {
		return ErrContextLength.Withf("this model's maximum context length is %d tokens, but %d were requested (%d in the prompt, %d for the completion)",
			a.cfg.ServedContext, total, len(r.Prompt), r.MaxTokens)
	}
	if c := a.cfg.PrefillCapacity; c > 0 && len(r.Prompt) > c {
		return ErrContextLength.Withf("the prefill nodes hold %d tokens, but the prompt has %d",
			c, len(r.Prompt))
	}
	if total > maxLease {
		return ErrContextLength.Withf("the KV capacity available to this tenant is %d tokens, but %d were requested (%d in the prompt, %d for the completion)",
			maxLease, total, len(r.Prompt), r.MaxTokens)
	}
	return nil
}

// Rejections returns rejection counts by tenant and code.
func (a *Admission) Rejections() map[cloison.TenantID]map[cloison.Code]uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[cloison.TenantID]map[cloison.Code]uint64, len(a.rejected))
	for t, m := range a.rejected {
		c := make(map[cloison.Code]uint64, len(m))
		for k, v := range m {
			c[k] = v
		}
		out[t] = c
	}
	return out
}

// IsRejection reports whether err is one Admit returns.
func IsRejection(err error) bool {
	for _, e := range []error{ErrEmptyPrompt, ErrMaxTokens, ErrBadToken, ErrContextLength, isolation.ErrUnknownTenant} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
