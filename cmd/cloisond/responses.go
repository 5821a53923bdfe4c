package main

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"time"

	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/keyfile"
)

// responsesConfig: keyed digests of what was served, reports and replay
// (api/responses.go).
type responsesConfig struct {
	digestKey   string
	webhook     string
	webhookKey  string
	reportLimit int
	reportEvery time.Duration
	replayPages int
	replayWait  time.Duration
}

func (r *responsesConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&r.digestKey, "served-digest-key", string(api.DefaultDigestKey), "id of the per-tenant key (derived from the KEK) under which request.completed digests what was served; name a new id to rotate")
	fs.StringVar(&r.webhook, "report-webhook", "", "URL POSTed a JSON notice (identifiers only) of every report of a suspicious response")
	fs.StringVar(&r.webhookKey, "report-webhook-secret-file", "", "file (owner-only) holding the secret that signs every --report-webhook notice as Standard Webhooks does (webhook-signature: v1,<base64 HMAC-SHA256>); a \"whsec_\" prefix means base64; required with --report-webhook")
	fs.IntVar(&r.reportLimit, "report-limit", 10, "reports of suspicious responses one tenant may send per --report-window")
	fs.DurationVar(&r.reportEvery, "report-window", time.Hour, "window of --report-limit")
	fs.IntVar(&r.replayPages, "replay-pages", 0, "KV pages of the replay engine (a second model instance with its own pool and arena that runs replays one at a time); 0: replay off")
	fs.DurationVar(&r.replayWait, "replay-wait", api.DefaultReplayWait, "longest a replay waits for the replay engine behind other tenants' replays (one waiting or running per tenant, served in arrival order) before 503 with Retry-After")
}

// config is the API's Responses as the flags set them; node.Open adds
// the KEK, the model's identity and the replay engine (--replay-pages).
func (r responsesConfig) config() (api.Responses, error) {
	out := api.Responses{DigestKey: audit.Name(r.digestKey), ReportWebhook: r.webhook,
		ReportLimit: audit.ReportLimit{N: r.reportLimit, Window: r.reportEvery}, ReplayWait: r.replayWait}
	if err := audit.CheckName("served-digest-key", r.digestKey); err != nil {
		return out, err
	}
	secret, err := r.webhookSecret()
	if err != nil {
		return out, err
	}
	out.WebhookSecret = secret
	return out, nil
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
