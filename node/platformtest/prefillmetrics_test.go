package platformtest_test

import (
	"bytes"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestPrefillMetrics: a prefill node serves its own metrics — the prefills
// it was asked for by outcome, the prompt tokens it computed, its prefill
// time, pool usage and attestation — each with model_name, lint-clean.
func TestPrefillMetrics(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Split: &platformtest.Split{}})
	scrape := func() []byte {
		rec := httptest.NewRecorder()
		p.Prefill.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			t.Fatalf("metrics: %d", rec.Code)
		}
		return rec.Body.Bytes()
	}
	value := func(body []byte, series string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("no series %s in\n%s", series, body)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	ok := `cloison_prefill_requests_total{code="ok",model_name="` + platformtest.Model + `"}`
	if got := value(scrape(), ok); got != 0 {
		t.Fatalf("%s = %v before any request", ok, got)
	}
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	for range 2 {
		if code, _, _ := chatTraced(t, p, tok, "Count this prefill", nil); code != 200 {
			t.Fatalf("status %d, want 200", code)
		}
	}
	// The prefill node counts a prefill when its RPC ends, which may be
	// after the decode node has answered: wait for it (bounded; not timed).
	body := scrape()
	for end := time.Now().Add(time.Minute); value(body, ok) < 2 && time.Now().Before(end); body = scrape() {
		time.Sleep(20 * time.Millisecond)
	}
	if got := value(body, ok); got != 2 {
		t.Errorf("%s = %v, want 2\n%s", ok, got, body)
	}
	for _, s := range []string{`cloison_prefill_prompt_tokens_total{model_name="` + platformtest.Model + `"}`,
		`cloison_prefill_time_seconds_count{model_name="` + platformtest.Model + `"}`,
		`cloison_capacity_attestation_ok{model_name="` + platformtest.Model + `"}`,
		`cloison_pool_tokens{model_name="` + platformtest.Model + `"}`} {
		if got := value(body, s); got < 1 {
			t.Errorf("%s = %v, want at least 1", s, got)
		}
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
}
