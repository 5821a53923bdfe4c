package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// BenchmarkReplayCost measures a replay's cost against the request it
// replays (CPU backend, context-bag model): replay-µs/original-µs is the
// replay's engine time over the original's (request.completed
// duration_micros), for a prompt of about 500 tokens and up to 32 generated. A
// replay re-computes the whole prompt alone (no prefix cache, fresh pool),
// so it costs about one uncached request.
func BenchmarkReplayCost(b *testing.B) {
	p := platformtest.New(b, platformtest.Options{Pages: 128, ReplayPages: 64})
	prompt := strings.Repeat("replay cost ", 48)
	tok := p.Token(b, "victim", tenancy.ScopeInfer)
	var replay, orig float64
	for b.Loop() {
		resp, body := send(b, "POST", p.URL+"/v1/completions", tok,
			mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 32, "temperature": 0}))
		if resp.StatusCode != 200 {
			b.Fatalf("%d %s", resp.StatusCode, body)
		}
		id := resp.Header.Get("X-Request-Id")
		resp, body = send(b, "POST", p.URL+"/v1/requests/"+id+"/replay", tok, mustJSON(map[string]any{"prompt": prompt}))
		var r api.ReplayResult
		if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 || r.Verdict != audit.VerdictNotIsolationFailure {
			b.Fatalf("replay: %d %s", resp.StatusCode, body)
		}
		replay += float64(r.ReplayMicros)
		orig += float64(r.OriginalMicros)
	}
	b.ReportMetric(replay/orig, "replay/original")
	b.ReportMetric(replay/float64(b.N), "replay-µs/op")
}
