package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cloison/cloison/node/prefill"

	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// responses completes the API's Responses with what the node holds (where
// the caller left a field unset): the KEK, the served model's digest,
// backend and kernel path, and with ReplayPages the replay engine.
func (s Spec) responses(r *api.Responses, lm *prefill.Instance, log *slog.Logger, o *opened) error {
	if r.KEK == nil {
		r.KEK = s.Keys.KEK
	}
	if r.ModelDigest == (audit.Digest{}) {
		r.ModelDigest = audit.Digest(lm.Digest)
	}
	if r.Backend == "" {
		r.Backend = lm.Backend.Name()
	}
	if r.KernelPath == "" {
		r.KernelPath = prefill.KernelPath(lm.Backend)
	}
	if s.ReplayPages <= 0 {
		return nil
	}
	eng, pool, rl, stop, err := s.replay(lm, log)
	if err != nil {
		return fmt.Errorf("replay engine: %w", err)
	}
	o.add(stop)
	r.Replay, r.ReplayPool = eng, pool
	if r.ReplayBackend == "" {
		r.ReplayBackend = rl.Backend.Name()
	}
	if r.ReplayKernelPath == "" {
		r.ReplayKernelPath = prefill.KernelPath(rl.Backend)
	}
	log.Info("replay engine", "pages", s.ReplayPages, "served_context", eng.Attestation().ServedContext, "kernel_path", r.ReplayKernelPath)
	return nil
}

// replay loads the model a second time and starts the replay engine on a
// pool and arena of its own: every defence on (no Unsafe, whatever the
// serving instance's), pages always zeroed, no prefix cache (a replay
// computes its whole prompt alone). A replay longer than the replay pool
// is refused there (its verdict inconclusive), never served partly. stop
// ends it and closes the instance.
func (s Spec) replay(lm *prefill.Instance, log *slog.Logger) (*engine.Engine, *isolation.Pool, *prefill.Instance, func(), error) {
	opts := s.Model.Options
	opts.Unsafe = kernels.Unsafe{}
	rl, err := s.Model.Load(opts)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	fail := func(err error) (*engine.Engine, *isolation.Pool, *prefill.Instance, func(), error) {
		rl.Close()
		return nil, nil, nil, nil, err
	}
	if rl.Digest != lm.Digest {
		return fail(errors.New("the model file changed while loading"))
	}
	pages, pageTokens, kv := s.ReplayPages, s.Capacity.Pool.PageTokens, s.Capacity.KV
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pageTokens, DefaultZeroing: isolation.ZeroAlways})
	if err != nil {
		return fail(err)
	}
	served := s.Capacity.ServedContext
	if served <= 0 {
		served = rl.Model.Model.Context
	}
	att, err := attest.Capacity(attest.Config{ModelContext: rl.Model.Model.Context, ServedContext: min(served, pages*pageTokens),
		PoolPages: pages, PageTokens: pageTokens, Zeroing: isolation.ZeroAlways, KVType: kv.String()})
	if err != nil {
		return fail(err)
	}
	arena, err := rl.Backend.NewArena(rl.Model.Model.ArenaConfig(pages, pageTokens, kv))
	if err != nil {
		return fail(err)
	}
	eng, err := engine.New(engine.Config{Model: rl.Model.Model, Tokenizer: rl.Tokenizer, Pool: pool, Arena: arena, Attestation: att})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if err := eng.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("replay engine stopped", "err", err)
		}
		close(done)
	}()
	return eng, pool, rl, func() { cancel(); <-done; rl.Close() }, nil
}
