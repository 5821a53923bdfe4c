package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// responsesConfig: keyed digests of what was served, reports and replay
// (issue 17 §1–§3, api/responses.go).
type responsesConfig struct {
	digestKey   string
	webhook     string
	webhookKey  string
	reportLimit int
	reportEvery time.Duration
	replayPages int
}

func (r *responsesConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&r.digestKey, "served-digest-key", string(api.DefaultDigestKey), "id of the per-tenant key (derived from the KEK) under which request.completed digests what was served; name a new id to rotate")
	fs.StringVar(&r.webhook, "report-webhook", "", "URL POSTed a JSON notice (identifiers only) of every report of a suspicious response")
	fs.StringVar(&r.webhookKey, "report-webhook-secret-file", "", "file (owner-only) holding the secret that signs every --report-webhook notice as Standard Webhooks does (webhook-signature: v1,<base64 HMAC-SHA256>); a \"whsec_\" prefix means base64; required with --report-webhook")
	fs.IntVar(&r.reportLimit, "report-limit", 10, "reports of suspicious responses one tenant may send per --report-window")
	fs.DurationVar(&r.reportEvery, "report-window", time.Hour, "window of --report-limit")
	fs.IntVar(&r.replayPages, "replay-pages", 0, "KV pages of the replay engine (a second model instance with its own pool and arena that runs replays alone); 0: replay off")
}

// kernelPath names what computes on b: the CPU kernel path, or the
// backend's name for a backend without paths.
func kernelPath(b kernels.Backend) string {
	if c, ok := b.(*cpu.Backend); ok {
		return string(c.Path())
	}
	return b.Name()
}

// responses builds the API's Responses; with --replay-pages it loads the
// model a second time and starts the replay engine, stopped by the
// returned func.
func (r responsesConfig) responses(c config, kek []byte, lm *loadedModel, log *slog.Logger) (api.Responses, func(), error) {
	out := api.Responses{KEK: kek, DigestKey: audit.Name(r.digestKey), ModelDigest: audit.Digest(lm.digest), Backend: lm.be.Name(),
		KernelPath: kernelPath(lm.be), ReportWebhook: r.webhook, ReportLimit: auditpg.ReportLimit{N: r.reportLimit, Window: r.reportEvery}}
	if err := audit.CheckName("served-digest-key", r.digestKey); err != nil {
		return out, nil, err
	}
	secret, err := r.webhookSecret()
	if err != nil {
		return out, nil, err
	}
	out.WebhookSecret = secret
	if r.replayPages <= 0 {
		return out, func() {}, nil
	}
	rl, err := loadModel(c)
	if err != nil {
		return out, nil, fmt.Errorf("replay engine: %w", err)
	}
	if rl.digest != lm.digest {
		rl.close()
		return out, nil, fmt.Errorf("replay engine: the model file changed while loading")
	}
	pool, err := isolation.NewPool(isolation.Config{Pages: r.replayPages, PageTokens: c.pageTokens, DefaultZeroing: isolation.ZeroAlways})
	if err != nil {
		rl.close()
		return out, nil, fmt.Errorf("replay engine: %w", err)
	}
	// A replay longer than the replay pool is refused there (and its
	// verdict inconclusive), never served partly.
	served := c.servedContext
	if served <= 0 {
		served = rl.m.Context
	}
	att, err := attest.Capacity(attest.Config{ModelContext: rl.m.Context, ServedContext: min(served, r.replayPages*c.pageTokens),
		PoolPages: r.replayPages, PageTokens: c.pageTokens, Zeroing: isolation.ZeroAlways, KVType: c.kvType.String()})
	if err != nil {
		rl.close()
		return out, nil, fmt.Errorf("replay engine: %w", err)
	}
	arena, err := rl.be.NewArena(rl.m.ArenaConfig(r.replayPages, c.pageTokens, c.kvType))
	if err != nil {
		rl.close()
		return out, nil, fmt.Errorf("replay engine: %w", err)
	}
	// No prefix cache: a replay computes its whole prompt alone.
	eng, err := engine.New(engine.Config{Model: rl.m, Tokenizer: rl.tok, Pool: pool, Arena: arena, Attestation: att})
	if err != nil {
		rl.close()
		return out, nil, fmt.Errorf("replay engine: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if err := eng.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("replay engine stopped", "err", err)
		}
		close(done)
	}()
	out.Replay, out.ReplayPool = eng, pool
	out.ReplayBackend, out.ReplayKernelPath = rl.be.Name(), kernelPath(rl.be)
	log.Info("replay engine", "pages", r.replayPages, "served_context", att.ServedContext, "kernel_path", out.ReplayKernelPath)
	return out, func() { cancel(); <-done; rl.close() }, nil
}

// webhookSecret is the secret that signs --report-webhook's notices: none
// without a webhook, and a webhook without one does not start.
func (r responsesConfig) webhookSecret() ([]byte, error) {
	if r.webhook == "" {
		return nil, nil
	}
	if r.webhookKey == "" {
		return nil, fmt.Errorf("--report-webhook needs --report-webhook-secret-file: the receiver must be able to refuse forged notices")
	}
	return readWebhookSecret(r.webhookKey)
}

// readWebhookSecret reads --report-webhook-secret-file (keyfile.ReadSecret:
// owner-only modes): "whsec_" and base64, as Standard Webhooks libraries
// write their secrets, or the raw bytes; 16 bytes at least.
func readWebhookSecret(path string) ([]byte, error) {
	b, err := keyfile.ReadSecret(path)
	if err != nil {
		return nil, fmt.Errorf("--report-webhook-secret-file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if rest, ok := bytes.CutPrefix(b, []byte("whsec_")); ok {
		if b, err = base64.StdEncoding.DecodeString(string(rest)); err != nil {
			return nil, fmt.Errorf("--report-webhook-secret-file %s: whsec_ secret is not base64", path)
		}
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("--report-webhook-secret-file %s: secret shorter than 16 bytes", path)
	}
	return b, nil
}
