package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// sample is one line of a text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseExposition reads the samples of a Prometheus text exposition.
func parseExposition(t *testing.T, text string) []sample {
	t.Helper()
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var s sample
		head, val, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '}'); i >= 0 {
			head, val, ok = line[:i+1], strings.TrimSpace(line[i+1:]), true
		}
		if !ok {
			t.Fatalf("exposition line %q", line)
		}
		name, labels, _ := strings.Cut(head, "{")
		s.name, s.labels = name, map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(labels, -1) {
			s.labels[m[1]] = m[2]
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("exposition line %q: %v", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// total sums a metric's samples.
func total(samples []sample, name string) float64 {
	var sum float64
	for _, s := range samples {
		if s.name == name {
			sum += s.value
		}
	}
	return sum
}

// needTool returns the path of a test tool, failing under CI=true (make test
// installs it: test-tools) and skipping otherwise.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing under CI=true (make test-tools installs Debian's %s)", name, pkg)
		}
		t.Skipf("%s not installed (Debian's %s; make test-tools installs it)", name, pkg)
	}
	return path
}

// TestMetricsExposition serves traffic from three tenants and reads the
// exposition back: names without colons, model_name on every cloison_
// series, the tenant label bounded to the configured list (the rest
// "other"), the vLLM-style histograms counting what the requests did, the
// prefix-cache counters 0 with the cache off (platformtest's), and promtool
// check metrics clean.
func TestMetricsExposition(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker", "third"},
		API: func(c *api.Config) { c.Metrics = api.MetricsConfig{Tenants: []cloison.TenantID{"victim"}} }})
	var prompt, completion, gaps float64
	for i, tenant := range []cloison.TenantID{"victim", "attacker", "third", "victim"} {
		body, _ := json.Marshal(map[string]any{"model": platformtest.Model, "prompt": fmt.Sprintf("request %d of %s", i, tenant), "max_tokens": 4, "temperature": 0})
		resp, b := send(t, "POST", p.URL+"/v1/completions", p.Token(t, tenant, tenancy.ScopeInfer), string(body))
		var u struct {
			Usage struct {
				Prompt     float64 `json:"prompt_tokens"`
				Completion float64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &u); resp.StatusCode != 200 || err != nil || u.Usage.Completion == 0 {
			t.Fatalf("got %d %s, want 200 with a completion", resp.StatusCode, b)
		}
		prompt += u.Usage.Prompt
		completion += u.Usage.Completion
		gaps += u.Usage.Completion - 1
	}
	text := scrape(t, p.Server)
	samples := parseExposition(t, text)

	tenants := map[string]bool{}
	for _, s := range samples {
		if strings.Contains(s.name, ":") {
			t.Errorf("metric %s has a colon (reserved for recording rules)", s.name)
		}
		if !strings.HasPrefix(s.name, "cloison_") {
			continue
		}
		if s.labels["model_name"] != platformtest.Model {
			t.Errorf("%s%v: got model_name %q, want %q", s.name, s.labels, s.labels["model_name"], platformtest.Model)
		}
		if tn, ok := s.labels["tenant"]; ok {
			tenants[tn] = true
		}
	}
	for tn := range tenants {
		if tn != "victim" && tn != api.OtherTenant && tn != "" {
			t.Errorf("got tenant label %q, want only victim, %s or empty", tn, api.OtherTenant)
		}
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"cloison_request_success_total", 4},
		{"cloison_prompt_tokens_total", prompt},
		{"cloison_generation_tokens_total", completion},
		{"cloison_request_prompt_tokens_sum", prompt},
		{"cloison_request_generation_tokens_sum", completion},
		{"cloison_time_to_first_token_seconds_count", 4},
		{"cloison_e2e_request_latency_seconds_count", 4},
		{"cloison_request_queue_time_seconds_count", 4},
		{"cloison_request_prefill_time_seconds_count", 4},
		{"cloison_request_decode_time_seconds_count", 4},
		{"cloison_inter_token_latency_seconds_count", gaps},
		{"cloison_prefix_cache_query_tokens_total", 0},
		{"cloison_prefix_cache_hit_tokens_total", 0},
		{"cloison_num_preemptions_total", 0},
		{"cloison_capacity_attestation_ok", 1},
	} {
		if got := total(samples, c.name); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	// The victim's tokens under its own label, the two others' under "other".
	var victim, other float64
	for _, s := range samples {
		if s.name == "cloison_request_success_total" {
			switch s.labels["tenant"] {
			case "victim":
				victim += s.value
			case api.OtherTenant:
				other += s.value
			}
		}
	}
	if victim != 2 || other != 2 {
		t.Errorf("got %v victim and %v other requests, want 2 and 2", victim, other)
	}

	promtool := needTool(t, "promtool", "prometheus")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func scrape(t *testing.T, s *api.Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("metrics: got %d, want 200", rec.Code)
	}
	return rec.Body.String()
}

var metricRef = regexp.MustCompile(`\bcloison_[a-z0-9_]+`)

// TestDeployMonitoring checks deploy/grafana/cloison.json and
// deploy/prometheus/alerts.yml: the dashboard is JSON with panels, the rules
// pass promtool check rules, and every cloison_ metric either references is
// a family the server registers (histograms by their _bucket, _sum and
// _count series); the alerting ones that need no traffic (zero-initialised,
// or read at scrape time) are in a fresh node's exposition.
func TestDeployMonitoring(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	families := api.MetricFamilies(p.Server)
	fresh := map[string]bool{}
	for _, s := range parseExposition(t, scrape(t, p.Server)) {
		fresh[s.name] = true
	}
	dash, err := os.ReadFile("../deploy/grafana/cloison.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exprs := 0
	for _, pn := range d.Panels {
		exprs += len(pn.Targets)
	}
	if exprs < 20 {
		t.Fatalf("dashboard: got %d queries, want the serving, tenant and isolation panels", exprs)
	}
	rules, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	for _, m := range metricRef.FindAllString(string(dash)+"\n"+string(rules), -1) {
		refs[m] = true
	}
	var missing []string
	for ref := range refs {
		base := ref
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(ref, suf); ok && families[b] {
				base = b
			}
		}
		if !families[base] {
			missing = append(missing, ref)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("referenced but not exposed: %v", missing)
	}
	for _, name := range []string{"cloison_isolation_failures_total", "cloison_transfer_verifications_failed_total", "cloison_ledger_append_errors_total",
		"cloison_incident_writes_lost_total", "cloison_capacity_attestation_ok",
		"cloison_ledger_signing_refusals_total", "cloison_ledger_signing_refused", "cloison_kv_cache_usage_ratio", "cloison_num_requests_waiting"} {
		if !refs[name] {
			t.Errorf("the rules and dashboard do not watch %s", name)
		}
		if !fresh[name] {
			t.Errorf("%s is not in a fresh node's exposition: an alert on increase() would miss the first event", name)
		}
	}

	promtool := needTool(t, "promtool", "prometheus")
	if out, err := exec.Command(promtool, "check", "rules", "../deploy/prometheus/alerts.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
